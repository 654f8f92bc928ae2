package engine

import (
	"context"
	"fmt"
	"github.com/tandem-run/tandem/engine/plan"
	"slices"
	"testing"

	"github.com/tandem-run/tandem/engine/spec"
)

// dflashPath is the DFlash draft trained for the demo target with
// packaging/tools/dflashtrain (main.go says how), F16 or Q8_0.
func dflashPath(typ string) string { return fmt.Sprintf("testdata/factory-dflash-%s.gguf", typ) }

// With the DFlash draft, greedy output is the target's own for every
// oracle prompt, EOS respected and ignored, for the F16 and Q4_K_M targets
// and both of the draft's types; drafted and accepted tokens are counted,
// and on the scripture and fortune prompts the draft is right often.
func TestDFlashGreedyIsTheTargets(t *testing.T) {
	prompts := loadOracle(t)
	const tokens = 48
	generate := func(r *Runner, prompt string, ignoreEOS bool, k int) ([]int32, Stats) {
		t.Helper()
		var ids []int32
		st, err := r.Generate(context.Background(), Request{Prompt: prompt, MaxTokens: tokens, IgnoreEOS: ignoreEOS,
			Drafting: Drafting{Max: k, Min: k, PMin: -1}},
			func(e Event) { ids = append(ids, e.IDs...) })
		if err != nil {
			t.Fatal(err)
		}
		return ids, st
	}
	for _, tc := range []struct{ target, draft string }{
		{"factory-target-F16.gguf", "F16"},
		{"factory-target-Q4_K_M.gguf", "Q8_0"},
	} {
		target := modelPath(t, tc.target)
		alone := load(t, Config{Target: target})
		r := load(t, Config{Target: target, Draft: dflashPath(tc.draft)})
		if kind := r.Info().DraftKind; kind != spec.DraftDFlash {
			t.Fatalf("draft kind %q", kind)
		}
		if got := r.Info().DraftBorrows; !slices.Equal(got, []string{"token_embd.weight", "output.weight"}) {
			t.Errorf("the draft borrows %v", got)
		}
		for _, k := range []int{1, 3, 7} {
			drafted, accepted := 0, 0
			for i, p := range prompts {
				for _, ignore := range []bool{true, false} {
					want, _ := generate(alone, p.Text, ignore, 0)
					got, st := generate(r, p.Text, ignore, k)
					if !slices.Equal(got, want) {
						t.Errorf("%s, k=%d, prompt %d, EOS ignored %v:\n got %v\nwant %v", tc.target, k, i, ignore, got, want)
					}
					if ignore {
						drafted += st.Drafted
						accepted += st.Accepted
						t.Logf("%s + DFlash %s, k=%d, prompt %d: drafted %d, accepted %d", tc.target, tc.draft, k, i, st.Drafted, st.Accepted)
					}
				}
			}
			t.Logf("%s + DFlash %s, k=%d: drafted %d, accepted %d", tc.target, tc.draft, k, drafted, accepted)
			if drafted == 0 || accepted == 0 {
				t.Errorf("k=%d: drafted %d, accepted %d", k, drafted, accepted)
			}
		}
	}
}

// With sampling, the DFlash draft changes nothing about the distribution
// of the output: the first two tokens under many seeds are distributed
// alike with and without it (issue 5's chi-square test of homogeneity).
// The draft's q for each slot is the distribution of the block pass at
// that position, whatever was drafted before it.
func TestDFlashSampledKeepsDistribution(t *testing.T) {
	if testing.Short() {
		t.Skip("28,000 sampled generations")
	}
	target := modelPath(t, "factory-target-Q8_0.gguf")
	alone, _ := sampledPairs(t, load(t, Config{Target: target}), 20000, 1<<32)
	with := load(t, Config{Target: target, Draft: dflashPath("F16")})
	counts, drafted := sampledPairs(t, with, 8000, 0)
	if drafted == 0 {
		t.Fatal("the draft proposed nothing")
	}
	const alpha = 0.01 / 2 // two checks share a false-alarm rate of 0.01
	for _, pos := range []int{0, -1} {
		chi, df := homogeneity(counts, alone, pos)
		p := chiSquareSF(chi, df)
		t.Logf("position %v: chi2 = %.1f, df = %d, p = %.3f (%d drafted)", pos, chi, df, p, drafted)
		if p < alpha {
			t.Errorf("distributions differ with the draft: chi2 = %.1f, df = %d, p = %.4f < %.4f", chi, df, p, alpha)
		}
	}
}

// The demo target with the DFlash draft on a device of its own generates
// what the target alone does, in the layouts of the seed reports (the
// draft on device 2 with the target on 0, by layers on 0-1, or by tensors
// on 0-1 with the head split or replicated) and both ways of using the
// borrowed embedding and head; each device holds what the plan says, the
// draft's device only the draft.
func TestPlacedDFlashIsTheTargets(t *testing.T) {
	prompts := loadOracle(t)[:3]
	target, draft := placedTargetPath(t), dflashPath("F16")
	one := load(t, Config{Target: target, Context: 256})
	pair := load(t, Config{Target: target, Draft: draft, Context: 256})
	drafting := Drafting{Max: 4, PMin: -1}
	want := make([][]int32, len(prompts))
	wantAccepted := 0
	for i, p := range prompts {
		if _, err := one.Generate(context.Background(), Request{Prompt: p.Text, MaxTokens: 24, IgnoreEOS: true},
			func(e Event) { want[i] = append(want[i], e.IDs...) }); err != nil {
			t.Fatal(err)
		}
		st, err := pair.Generate(context.Background(), Request{Prompt: p.Text, MaxTokens: 24, IgnoreEOS: true, Drafting: drafting}, func(Event) {})
		if err != nil {
			t.Fatal(err)
		}
		wantAccepted += st.Accepted
	}
	devs := virtualCPUs(t, "cpu:256MiB,cpu:256MiB,cpu:256MiB")
	for _, tc := range []struct {
		name   string
		target plan.Placement
	}{
		{"target on 0", plan.Placement{Devices: []int{0}}},
		{"target by layers on 0-1", plan.Placement{Devices: []int{0, 1}, Ratios: []float64{1, 3}}},
		{"target by tensors on 0-1, head split", plan.Placement{Devices: []int{0, 1}, Split: plan.SplitTensor, Head: plan.HeadSplit}},
		{"target by tensors on 0-1, head replicated", plan.Placement{Devices: []int{0, 1}, Split: plan.SplitTensor, Head: plan.HeadReplicated}},
	} {
		for _, borrow := range []plan.Borrow{plan.BorrowInPlace, plan.BorrowCopy} {
			t.Run(fmt.Sprintf("%s, draft on 2, borrow %s", tc.name, borrow), func(t *testing.T) {
				r := load(t, Config{
					Target: target, Draft: draft, Context: 256, Batch: 64,
					Placement: &Placement{Devices: devs, Target: tc.target, Draft: plan.Placement{Devices: []int{2}, Borrow: borrow}},
				})
				accepted, drafted := 0, 0
				for i, p := range prompts {
					var got []int32
					st, err := r.Generate(context.Background(), Request{Prompt: p.Text, MaxTokens: 24, IgnoreEOS: true, Drafting: drafting},
						func(e Event) { got = append(got, e.IDs...) })
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(got, want[i]) {
						t.Errorf("prompt %d:\n got %v\nwant %v", i, got, want[i])
					}
					accepted += st.Accepted
					drafted += st.Drafted
				}
				t.Logf("drafted %d, accepted %d; %d accepted on one device", drafted, accepted, wantAccepted)
				if drafted == 0 {
					t.Error("nothing drafted")
				}
				if wantAccepted > 20 && (float64(accepted) < 0.8*float64(wantAccepted) || float64(accepted) > 1.2*float64(wantAccepted)) {
					t.Errorf("accepted %d drafted tokens, %d on one device", accepted, wantAccepted)
				}
				held := r.DeviceUsage()
				for _, b := range r.Plan().Devices {
					u, i := held[b.Device.Index], b.Device.Index
					got, want := u.Total(), b.Total()
					t.Logf("device %d (%s): holds %d bytes (draft %d), plan %d (draft %d)", i, b.Device.Label(), got, u.Of("draft"), want, b.Draft.Total())
					if d := float64(got-want) / float64(want); d < -0.005 || d > 0.005 {
						t.Errorf("device %d holds %d bytes, plan %d", i, got, want)
					}
					switch {
					case i == 2 && (u.Of("target") != 0 || u.Of("draft") == 0):
						t.Errorf("device 2 holds %d target and %d draft bytes; want the draft alone", u.Of("target"), u.Of("draft"))
					case i != 2 && borrow == plan.BorrowCopy && u.Of("draft") != 0:
						t.Errorf("device %d holds %d bytes of a draft that copies what it borrows", i, u.Of("draft"))
					}
				}
			})
		}
	}
}

// A generation cancelled halfway leaves the DFlash draft's injected states
// behind the target's or past the history's; the next one still
// reproduces the target.
func TestDFlashAfterCancel(t *testing.T) {
	r := load(t, Config{Target: modelPath(t, "factory-target-F16.gguf"), Draft: dflashPath("F16")})
	ctx, cancel := context.WithCancel(context.Background())
	events := 0
	st, err := r.Generate(ctx, Request{Prompt: "In the beginning", MaxTokens: 2000, IgnoreEOS: true, Drafting: Drafting{Max: 7}}, func(Event) {
		events++
		if events == 3 {
			cancel()
		}
	})
	if err != nil || st.FinishReason != "cancelled" {
		t.Fatalf("finish %q, %v", st.FinishReason, err)
	}
	p := loadOracle(t)[3]
	var ids []int32
	st, err = r.Generate(context.Background(), Request{Prompt: p.Text, MaxTokens: len(p.Target.Greedy), IgnoreEOS: true, Drafting: Drafting{Max: 7}},
		func(e Event) { ids = append(ids, e.IDs...) })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, p.Target.Greedy) {
		t.Errorf("after cancel:\n got %v\nwant %v", ids, p.Target.Greedy)
	}
	if st.Drafted == 0 {
		t.Error("nothing drafted after the cancel")
	}
}

// DraftBlock, what benchmarks time, runs a greedy round's block after the
// target's Forward: as many slots as asked, up to the draft's block, the
// same tokens each time, and refuses a runner without a DFlash draft.
func TestDraftBlock(t *testing.T) {
	ctx := context.Background()
	target := modelPath(t, "factory-target-F16.gguf")
	r := load(t, Config{Target: target, Draft: dflashPath("Q8_0")})
	prompt := []int32{1, 872, 198, 5, 9, 40}
	if _, err := r.Forward(ctx, prompt, 0, nil); err != nil {
		t.Fatal(err)
	}
	var first []int32
	for _, k := range []int{1, 4, 7, 15} {
		ids, err := r.DraftBlock(ctx, 2, len(prompt), k)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) != min(k, 7) {
			t.Errorf("a block of %d drafted %d tokens (the draft's block is 8)", k, len(ids))
		}
		if k == 7 {
			first = slices.Clone(ids)
		}
		if k == 15 && !slices.Equal(ids, first) {
			t.Errorf("the clamped block drafted %v, the block of 7 %v", ids, first)
		}
	}
	if _, err := load(t, Config{Target: target}).DraftBlock(ctx, 2, len(prompt), 1); err == nil {
		t.Error("a runner without a DFlash draft drafted a block")
	}
}
