package model

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// TestForwardSeqsIsOracleGreedy decodes the oracle prompts together, each
// in its own KV slot, joining one after another and leaving as they end,
// so the passes mix prefill and decode rows of sequences at different
// positions: each must be its solo greedy output from transformers. Odd
// prompts take the argmax on the host from ForwardSeqs' logits, even ones
// ForwardSeqsArgmax's, in separate passes.
func TestForwardSeqsIsOracleGreedy(t *testing.T) {
	o := loadOracle(t)
	const slots = 4
	m := openModel(t, "factory-target-F16.gguf", Options{Context: 128, Parallel: slots})
	if m.Slots() != slots {
		t.Fatalf("Slots() = %d, want %d", m.Slots(), slots)
	}
	type running struct {
		prompt int
		slot   int
		hist   []int32 // prompt and output
		cached int     // positions in the slot
		out    []int32
	}
	ctx := context.Background()
	var active []*running
	next, free := 0, []int{3, 1, 0, 2}
	got := make([][]int32, len(o.Prompts))
	for step := 0; next < len(o.Prompts) || len(active) > 0; step++ {
		if next < len(o.Prompts) && len(free) > 0 && step%2 == 0 {
			r := &running{prompt: next, slot: free[0], hist: slices.Clone(o.Prompts[next].IDs)}
			free = free[1:]
			active = append(active, r)
			next++
		}
		for _, host := range []bool{false, true} {
			var seqs []Seq
			var in []*running
			for _, r := range active {
				if (r.prompt%2 == 1) != host {
					continue
				}
				seqs = append(seqs, Seq{Slot: r.slot, Pos: r.cached, Tokens: r.hist[r.cached:], Out: 1})
				in = append(in, r)
			}
			if len(seqs) == 0 {
				continue
			}
			var ids []int32
			if host {
				logits, err := m.ForwardSeqs(ctx, seqs)
				if err != nil {
					t.Fatal(err)
				}
				vocab := m.Params().Vocab
				for i := range in {
					ids = append(ids, argmax(logits[i*vocab:(i+1)*vocab]))
				}
			} else {
				var err error
				if ids, err = m.ForwardSeqsArgmax(ctx, seqs); err != nil {
					t.Fatal(err)
				}
			}
			for i, r := range in {
				r.cached = len(r.hist)
				r.hist = append(r.hist, ids[i])
				r.out = append(r.out, ids[i])
			}
		}
		active = slices.DeleteFunc(active, func(r *running) bool {
			if len(r.out) < len(o.Prompts[r.prompt].Target.Greedy) {
				return false
			}
			got[r.prompt] = r.out
			free = append(free, r.slot)
			return true
		})
	}
	for i, p := range o.Prompts {
		if !slices.Equal(got[i], p.Target.Greedy) {
			t.Errorf("prompt %d:\n got %v\nwant %v", i, got[i], p.Target.Greedy)
		}
	}
	// Slot 0 still serves Forward's own sequence.
	if g := greedyArgmax(t, m, o.Prompts[0].IDs, 8); !slices.Equal(g, o.Prompts[0].Target.Greedy[:8]) {
		t.Errorf("Forward after ForwardSeqs: %v, want %v", g, o.Prompts[0].Target.Greedy[:8])
	}
}

func TestForwardSeqsRefusesBadInput(t *testing.T) {
	m := openModel(t, "factory-target-F16.gguf", Options{Context: 32, Batch: 8, Parallel: 2})
	ctx := context.Background()
	for name, seqs := range map[string][]Seq{
		"no sequences":  nil,
		"slot twice":    {{Slot: 1, Tokens: []int32{1}, Out: 1}, {Slot: 1, Tokens: []int32{2}, Out: 1}},
		"slot past":     {{Slot: 2, Tokens: []int32{1}, Out: 1}},
		"no tokens":     {{Slot: 0, Out: 0}},
		"too many out":  {{Slot: 0, Tokens: []int32{1}, Out: 2}},
		"past context":  {{Slot: 0, Pos: 31, Tokens: []int32{1, 2}, Out: 1}},
		"over batch":    {{Slot: 0, Tokens: make([]int32, 5), Out: 1}, {Slot: 1, Tokens: make([]int32, 4), Out: 1}},
		"bad token":     {{Slot: 0, Tokens: []int32{-1}, Out: 1}},
		"negative slot": {{Slot: -1, Tokens: []int32{1}, Out: 1}},
	} {
		if _, err := m.ForwardSeqs(ctx, seqs); err == nil {
			t.Errorf("%s: no error", name)
		} else if !errors.Is(err, ErrBadParam) && !errors.Is(err, ErrContext) && !errors.Is(err, ErrToken) {
			t.Errorf("%s: %v, not a parameter error", name, err)
		}
	}
}
