package engine

import (
	"context"
	"fmt"
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
	for _, tc := range []struct{ target, draft string }{
		{"factory-target-F16.gguf", "F16"},
		{"factory-target-Q4_K_M.gguf", "Q8_0"},
	} {
		t.Run(tc.target, func(t *testing.T) { dflashGreedy(t, prompts, tc.target, tc.draft) })
	}
}

// dflashGreedy is TestDFlashGreedyIsTheTargets for one target and type of
// the draft (a subtest each, so that -test.run can pick the Q4_K_M target
// where the F16 one does not travel, as on the GPU machine).
func dflashGreedy(t *testing.T, prompts []oraclePrompt, targetName, draftType string) {
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
	tc := struct{ target, draft string }{targetName, draftType}
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
	t.Logf("%d drafted", drafted)
	sameDistribution(t, counts, alone, 0.01/2) // two checks share a false-alarm rate of 0.01
}

// The demo target with the DFlash draft on a device of its own generates
// what the target alone does, in the layouts of the seed reports and both
// ways of using the borrowed embedding and head (placedDraftIsTheTargets);
// each device holds what the plan says within 0.5%. The acceptance is
// checked only where the pair on one device accepts more than 20 tokens.
func TestPlacedDFlashIsTheTargets(t *testing.T) {
	placedDraftIsTheTargets(t, placedDraft{path: dflashPath("F16"), drafting: Drafting{Max: 4, PMin: -1}, usageTol: 0.005, acceptFrom: 20})
}

// A generation cancelled halfway leaves the DFlash draft's injected states
// behind the target's or past the history's; the next one still
// reproduces the target.
func TestDFlashAfterCancel(t *testing.T) {
	st := generateAfterCancel(t, dflashPath("F16"), Drafting{Max: 7})
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
