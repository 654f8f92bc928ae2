package engine

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/tandem-run/tandem/engine/plan"
)

// placedDraft is what placedDraftIsTheTargets checks a head-sharing draft
// with: its file, how it drafts, how close each device's bytes must come
// to the plan's (a fraction of them), and the one-device acceptance above
// which the placed pair's must be within 20% of it (0: always, and the
// placed pair must accept some).
type placedDraft struct {
	path       string
	drafting   Drafting
	usageTol   float64
	acceptFrom int
}

// placedDraftIsTheTargets runs the demo target with draft on a device of
// its own (device 2 of three virtual CPUs), in the layouts of the seed
// reports (the target on 0, by layers on 0-1, or by tensors on 0-1 with
// the head split or replicated) and both ways of using the borrowed
// embedding and head. Every layout generates what the target alone on one
// device does and drafts; each device holds what the plan says, the
// draft's device only the draft, and the draft has a share of the target's
// devices only when it uses the target's head in place.
func placedDraftIsTheTargets(t *testing.T, draft placedDraft) {
	prompts := loadOracle(t)[:3]
	target := placedTargetPath(t)
	one := load(t, Config{Target: target, Context: 256})
	pair := load(t, Config{Target: target, Draft: draft.path, Context: 256})
	want := make([][]int32, len(prompts))
	wantAccepted := 0
	for i, p := range prompts {
		if _, err := one.Generate(context.Background(), Request{Prompt: p.Text, MaxTokens: 24, IgnoreEOS: true},
			func(e Event) { want[i] = append(want[i], e.IDs...) }); err != nil {
			t.Fatal(err)
		}
		st, err := pair.Generate(context.Background(), Request{Prompt: p.Text, MaxTokens: 24, IgnoreEOS: true, Drafting: draft.drafting}, func(Event) {})
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
					Target: target, Draft: draft.path, Context: 256, Batch: 64,
					Placement: &Placement{Devices: devs, Target: tc.target, Draft: plan.Placement{Devices: []int{2}, Borrow: borrow}},
				})
				if got := r.Info().DraftBorrows; !slices.Equal(got, []string{"token_embd.weight", "output.weight"}) {
					t.Errorf("the draft borrows %v", got)
				}
				accepted, drafted := 0, 0
				for i, p := range prompts {
					var got []int32
					st, err := r.Generate(context.Background(), Request{Prompt: p.Text, MaxTokens: 24, IgnoreEOS: true, Drafting: draft.drafting},
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
				if (draft.acceptFrom == 0 && accepted == 0) ||
					(wantAccepted > draft.acceptFrom && (float64(accepted) < 0.8*float64(wantAccepted) || float64(accepted) > 1.2*float64(wantAccepted))) {
					t.Errorf("accepted %d drafted tokens, %d on one device", accepted, wantAccepted)
				}
				held := r.DeviceUsage()
				for _, b := range r.Plan().Devices {
					u, i := held[b.Device.Index], b.Device.Index
					got, want := u.Total(), b.Total()
					t.Logf("device %d (%s): holds %d bytes (draft %d), plan %d (draft %d)", i, b.Device.Label(), got, u.Of("draft"), want, b.Draft.Total())
					if d := float64(got-want) / float64(want); d < -draft.usageTol || d > draft.usageTol {
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
