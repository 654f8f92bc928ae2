package engine

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tandem-run/tandem/engine/spec"
)

// warmDrafts are the demo pair's drafts of each kind: a model drafting in
// steps, a head-sharing EAGLE-3 head and a DFlash block draft.
func warmDrafts(t *testing.T) []struct{ name, path string } {
	return []struct{ name, path string }{
		{"draft Q8_0", modelPath(t, "factory-draft-Q8_0.gguf")},
		{"EAGLE-3", modelPath(t, "factory-eagle3-F16.gguf")},
		{"DFlash", dflashPath("F16")},
	}
}

// After Load, both Choosers of the pair (greedy and sampled) hold the
// costs the warm-up timed as settled measurements and decide the first
// round on them: on a tick clock every call costs one 10 ms tick, so a
// draft call costs what a target pass does and drafting cannot pay at
// the prior acceptance. The first request's first step then drafts
// nothing and says why, and a model draft has not read its prompt.
func TestWarmUpSeedsChoosers(t *testing.T) {
	prompts := loadOracle(t)
	for _, d := range warmDrafts(t) {
		t.Run(d.name, func(t *testing.T) {
			clock := &tickClock{t: time.Unix(0, 0), tick: 10 * time.Millisecond}
			var phases []Progress
			cfg := Config{Target: modelPath(t, "factory-target-F16.gguf"), Draft: d.path, Clock: clock.now, WarmUp: time.Hour, Backend: *backend}
			r, err := Load(context.Background(), cfg, func(p Progress) {
				if p.Model == "warm-up" {
					phases = append(phases, p)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if n := len(phases); n < 2 || phases[n-1].TensorsDone != phases[n-1].Tensors {
				t.Errorf("warm-up progress %+v", phases)
			}
			for _, greedy := range []bool{true, false} {
				c := r.choosers[greedy]
				if c == nil {
					t.Fatalf("greedy %v: no chooser after the warm-up", greedy)
				}
				dec := c.Decision()
				if dec.Verify1 != clock.tick || dec.DraftStep != clock.tick || dec.Drafting || dec.Reason != spec.ReasonCosts {
					t.Errorf("greedy %v: decision %+v, want one-tick costs, drafting off", greedy, dec)
				}
			}
			// The first step's statistics, and whether a model draft had
			// run by then (its prompt's prefill is skipped when drafting
			// starts off).
			var first *Stats
			draftRan := false
			_, err = r.Generate(context.Background(), Request{Prompt: prompts[0].Text, MaxTokens: 8, IgnoreEOS: true},
				func(e Event) {
					if first == nil {
						first = &e.Stats
						if m, ok := r.draft.(*modelDrafter); ok {
							draftRan = len(m.seq.cached) > 0
						}
					}
				})
			if err != nil {
				t.Fatal(err)
			}
			if first == nil || first.Drafted != 0 || first.Drafting || first.DraftOff != spec.ReasonCosts || draftRan {
				t.Errorf("first step %+v; the draft ran: %v", first, draftRan)
			}
		})
	}
}

// The warm-up leaves no trace: the caches hold what a load without it
// leaves them holding, and a request after it makes exactly the
// tokens, drafts and acceptances it makes on a runner loaded without it,
// greedy and sampled with a seed, at a fixed draft length (a chosen one
// differs with the costs known), and greedy at a chosen length.
func TestWarmUpLeavesNoTrace(t *testing.T) {
	prompts := loadOracle(t)
	reqs := []Request{
		{Prompt: prompts[0].Text, MaxTokens: 24, IgnoreEOS: true, Drafting: Drafting{Max: 3, Min: 3, PMin: -1}},
		{Prompt: prompts[1].Text, MaxTokens: 24, IgnoreEOS: true, Drafting: Drafting{Max: 3, Min: 3, PMin: -1},
			Sampling: Sampling{Temperature: 0.8, Seed: 7}},
		{Prompt: prompts[2].Text, MaxTokens: 24, IgnoreEOS: true},
	}
	for _, d := range warmDrafts(t) {
		t.Run(d.name, func(t *testing.T) {
			cfg := Config{Target: modelPath(t, "factory-target-F16.gguf"), Draft: d.path, Context: 256}
			cold := cfg
			cold.WarmUp = -1
			warm, fresh := load(t, cfg), load(t, cold)
			if a, b := pairState(warm), pairState(fresh); a != b {
				t.Errorf("after the warm-up the pair holds %+v, after a load without it %+v", a, b)
			}
			for i, req := range reqs {
				a, as := runCollect(t, warm, req)
				b, bs := runCollect(t, fresh, req)
				if !slices.Equal(a, b) {
					t.Errorf("request %d: after the warm-up %v\nwithout it        %v", i, a, b)
				}
				if req.Drafting.Resolve().Fixed() && (as.Drafted != bs.Drafted || as.Accepted != bs.Accepted) {
					t.Errorf("request %d: drafted %d accepted %d after the warm-up, %d and %d without", i, as.Drafted, as.Accepted, bs.Drafted, bs.Accepted)
				}
			}
		})
	}
}

// heldState is what a pair's caches hold: the tokens the target's and a
// model draft's caches hold, the positions a head-sharing draft holds.
type heldState struct{ target, draft, head int }

func pairState(r *Runner) heldState {
	s := heldState{target: len(r.target.cached)}
	switch d := r.draft.(type) {
	case *modelDrafter:
		s.draft = len(d.seq.cached)
	case *eagle3Drafter:
		s.draft, s.head = len(d.fed), d.m.Len()
	case *dflashDrafter:
		s.head = d.m.Len()
	}
	return s
}

// runCollect runs req and returns its tokens and statistics.
func runCollect(t *testing.T, r *Runner, req Request) ([]int32, Stats) {
	t.Helper()
	var ids []int32
	st, err := r.Generate(context.Background(), req, func(e Event) { ids = append(ids, e.IDs...) })
	if err != nil {
		t.Fatal(err)
	}
	return ids, st
}

// Cancelling the load during the warm-up stops it with ctx's error, and
// a load after it runs as usual.
func TestWarmUpCancelled(t *testing.T) {
	for _, d := range warmDrafts(t)[:2] {
		t.Run(d.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			warming := false
			cfg := Config{Target: modelPath(t, "factory-target-F16.gguf"), Draft: d.path, WarmUp: time.Hour, Backend: *backend}
			r, err := Load(ctx, cfg, func(p Progress) {
				if p.Model == "warm-up" && p.TensorsDone == 1 {
					warming = true
					cancel()
				}
			})
			if err == nil {
				r.Close()
			}
			if !warming || !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled during the warm-up (%v): %v", warming, err)
			}
			load(t, cfg)
		})
	}
}
