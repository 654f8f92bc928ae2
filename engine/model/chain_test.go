package model

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/tandem-run/tandem/engine/plan"
)

// stepwise is greedy drafting one pass at a time through the host, the
// reference for Chain: the argmax after history (all of it run from 0)
// and k-1 more, each on the one before, with each one's softmax
// probability from the logits on the host.
func stepwise(t *testing.T, m *Model, history []int32, k int) ([]int32, []float64) {
	t.Helper()
	ctx := context.Background()
	var ids []int32
	var probs []float64
	in, pos := history, 0
	for range k {
		logits, err := m.Forward(ctx, in, pos, nil)
		if err != nil {
			t.Fatal(err)
		}
		id, p := argmaxProb(logits)
		ids, probs = append(ids, id), append(probs, p)
		pos += len(in)
		in = []int32{id}
	}
	return ids, probs
}

// checkChain compares a chain's ids and probabilities with the stepwise
// reference: the same ids; the probabilities, from the device's softmax,
// within float rounding of the host's.
func checkChained(t *testing.T, what string, ids []int32, probs []float32, want []int32, wantP []float64) {
	t.Helper()
	if !slices.Equal(ids, want) {
		t.Errorf("%s: ids %v, want %v", what, ids, want)
	}
	if probs == nil {
		return
	}
	if len(probs) != len(ids) {
		t.Fatalf("%s: %d probabilities for %d ids", what, len(probs), len(ids))
	}
	for i, p := range probs {
		if math.Abs(float64(p)-wantP[i]) > 1e-5 {
			t.Errorf("%s: probability %d is %v, want %v", what, i, p, wantP[i])
		}
	}
}

// A greedy chain of the demo draft gives the ids of drafting one pass at a
// time, on one device (the chain stays on the device) and over two (one
// pass at a time through the host); a second round rolls back into the
// first one's drafts and chains on from there, as the engine does after a
// rejection; with a p-min cut the probabilities are the softmax's and the
// host path stops after the first unsure id.
func TestChainIsStepwise(t *testing.T) {
	prompt := loadOracle(t).Prompts[0].IDs
	ref := openModel(t, "factory-draft-Q8_0.gguf", Options{Context: 128})
	const k = 6
	want, wantP := stepwise(t, ref, prompt, k)
	// Round 2: three drafts accepted, the fourth replaced by another token.
	other := (want[3] + 1) % int32(ref.Params().Vocab)
	history2 := append(append(slices.Clone(prompt), want[:3]...), other)
	want2, wantP2 := stepwise(t, ref, history2, 4)
	for _, l := range []placedLayout{placedLayouts[len(placedLayouts)-1], placedLayouts[0]} {
		t.Run(l.name, func(t *testing.T) {
			m := placeModel(t, "factory-draft-Q8_0.gguf", "cpu:64MiB,cpu:64MiB", l.placement(), 128, 16).m
			onDevice := m.chainPart(k) != nil
			if onDevice != (len(l.ratios) == 1) {
				t.Fatalf("chain on the device: %v with %d devices", onDevice, len(l.ratios))
			}
			ctx := context.Background()
			for _, pMin := range []float64{0.3, -1} { // the last leaves every draft cached
				ids, probs, err := m.Chain(ctx, prompt, 0, k, pMin)
				if err != nil {
					t.Fatal(err)
				}
				w, wp := want, wantP
				if !onDevice && pMin > 0 {
					cut := slices.IndexFunc(wp, func(p float64) bool { return p < pMin })
					if cut >= 0 {
						w, wp = w[:cut+1], wp[:cut+1]
					}
				}
				checkChained(t, "round 1", ids, probs, w, wp)
				if got := m.Len(); got != len(prompt)+len(w)-1 {
					t.Errorf("round 1: %d positions cached, want %d", got, len(prompt)+len(w)-1)
				}
				if pMin < 0 && probs != nil {
					t.Error("probabilities without a p-min")
				}
			}
			// The cache holds the prompt and want[:k-1]; round 2 keeps
			// three of them.
			ids, probs, err := m.Chain(ctx, []int32{other}, len(prompt)+3, 4, 0.01)
			if err != nil {
				t.Fatal(err)
			}
			checkChained(t, "round 2", ids, probs, want2, wantP2)
			if _, _, err := m.Chain(ctx, []int32{other}, m.Len()+1, 2, 0); err == nil {
				t.Error("a chain past the cached positions was accepted")
			}
			if _, _, err := m.Chain(ctx, []int32{other}, 120, 10, 0); err == nil {
				t.Error("a chain past the context was accepted")
			}
		})
	}
}

// eagle3Stepwise drafts k tokens with ForwardTop and StepTop after the
// target ran seq[:n]: the reference for an EAGLE-3 chain.
func eagle3Stepwise(t *testing.T, pr *eagle3Pair, seq []int32, n, k int) ([]int32, []float64) {
	t.Helper()
	ctx := context.Background()
	if _, err := pr.target.Forward(ctx, seq[:n], 0, nil); err != nil {
		t.Fatal(err)
	}
	top, err := pr.draft.ForwardTop(ctx, seq[1:n+1], 0)
	if err != nil {
		t.Fatal(err)
	}
	ids, probs := []int32{top.ID}, []float64{top.P}
	for i := range k - 1 {
		if top, err = pr.draft.StepTop(ctx, top.ID, n+i); err != nil {
			t.Fatal(err)
		}
		ids, probs = append(ids, top.ID), append(probs, top.P)
	}
	return ids, probs
}

// An EAGLE-3 chain gives the ids of ForwardTop and StepTop: on one device,
// where the draft uses the target's embedding and head in its own programs
// (the chain stays on the device), and with the draft on a device of its
// own using them where the target keeps them (through the host).
func TestEagle3ChainIsStepwise(t *testing.T) {
	seq := demoSequence(t)
	n := len(loadOracle(t).Prompts[0].IDs) - 1
	const k = 5
	ref, err := loadEagle3Pair(t, demoEagle3(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	want, wantP := eagle3Stepwise(t, ref, seq, n, k)
	one, err := loadEagle3Pair(t, demoEagle3(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	if !one.draft.chains(k) {
		t.Fatal("the draft on the target's device does not chain on the device")
	}
	target, placed := placedEagle3(t, plan.Placement{Devices: []int{0}}, plan.BorrowInPlace)
	if placed.chains(k) {
		t.Fatal("a draft using the head on another device chains on its own")
	}
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		target *Model
		draft  *Eagle3
	}{{"one device", one.target, one.draft}, {"draft apart", target, placed}} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := c.target.Forward(ctx, seq[:n], 0, nil); err != nil {
				t.Fatal(err)
			}
			ids, probs, err := c.draft.Chain(ctx, seq[1:n+1], 0, k, 0.01)
			if err != nil {
				t.Fatal(err)
			}
			checkChained(t, "chain", ids, probs, want, wantP)
			if c.draft.Len() != n+k-1 {
				t.Errorf("%d positions cached, want %d", c.draft.Len(), n+k-1)
			}
			// The draft goes on from the chain's last step as after Step.
			top, err := c.draft.StepTop(ctx, ids[k-1], n+k-1)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ref.target.Forward(ctx, seq[:n], 0, nil); err != nil {
				t.Fatal(err)
			}
			more, _ := eagle3Stepwise(t, ref, seq, n, k+1)
			if top.ID != more[k] {
				t.Errorf("step after the chain: %d, want %d", top.ID, more[k])
			}
			// Without probabilities, and rolled back to the start.
			if err := c.draft.Truncate(0); err != nil {
				t.Fatal(err)
			}
			ids, probs, err = c.draft.Chain(ctx, seq[1:n+1], 0, k, -1)
			if err != nil || probs != nil {
				t.Fatalf("probabilities %v, %v", probs, err)
			}
			checkChained(t, "chain without p", ids, nil, want, nil)
		})
	}
}

// A draft with a reduced vocabulary (d2t) chains through its device argmax
// and the host's map: each id is the borrowing demo draft's best among the
// mapped target ids, on the ids drafted before, with that one's softmax
// over the mapped ids; a p-min cut stops after the first unsure one.
func TestEagle3ChainMapped(t *testing.T) {
	seq := demoSequence(t)
	n := len(loadOracle(t).Prompts[0].IDs) - 1
	const k = 4
	ref, err := loadEagle3Pair(t, demoEagle3(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	path, mapped := eagle3D2TVariant(t, ref.tf)
	pr, err := loadEagle3Pair(t, path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !pr.draft.picksOnDevice() || pr.draft.chains(k) {
		t.Fatal("the d2t draft should pick on the device but not chain there")
	}
	ctx := context.Background()
	for _, pMin := range []float64{-1, 0.01, 0.9} {
		if _, err := pr.target.Forward(ctx, seq[:n], 0, nil); err != nil {
			t.Fatal(err)
		}
		if err := pr.draft.Truncate(0); err != nil {
			t.Fatal(err)
		}
		ids, probs, err := pr.draft.Chain(ctx, seq[1:n+1], 0, k, pMin)
		if err != nil {
			t.Fatal(err)
		}
		if (probs == nil) != (pMin <= 0) {
			t.Fatalf("p-min %v: probabilities %v", pMin, probs)
		}
		want := ref.draftRun(t, seq, n, ids[:len(ids)-1])
		for i, id := range ids {
			best, sum := mapped[0], 0.0
			for _, m := range mapped {
				if want[i][m] > want[i][best] || want[i][m] == want[i][best] && m < best {
					best = m
				}
			}
			for _, m := range mapped {
				sum += math.Exp(float64(want[i][m] - want[i][best]))
			}
			if int64(id) != best {
				t.Errorf("p-min %v, step %d: %d, want %d", pMin, i, id, best)
			}
			if probs != nil && math.Abs(float64(probs[i])-1/sum) > 1e-4 {
				t.Errorf("p-min %v, step %d: probability %v, want %v", pMin, i, probs[i], 1/sum)
			}
			unsure := probs != nil && float64(probs[i]) < pMin
			if last := i == len(ids)-1; last != (unsure || i == k-1) {
				t.Errorf("p-min %v: chain of %d stops at step %d (p %v)", pMin, len(ids), i, probs)
			}
		}
	}
}
