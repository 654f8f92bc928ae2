package main

// The engine-facing part: everything specbench asks of the engine goes
// through these three functions, so that adapting to a changed engine API
// (draft settings moving onto the request, the cost-aware chooser's
// statistics) touches this file alone.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/tandem-run/tandem/engine"
	"github.com/tandem-run/tandem/engine/chat"
	"github.com/tandem-run/tandem/engine/sample"
	"github.com/tandem-run/tandem/engine/tokenizer"
)

// mode is how a row drafts.
type mode struct {
	name   string
	draft  string // draft file: a model or an EAGLE-3 draft
	lookup bool
	fixedK int  // draft exactly this many tokens a round (no p-min cut); 0: adaptive
	alone  bool // the target alone
}

// loadMode loads the target with what m drafts with, on o's backend,
// threads and clock.
func loadMode(ctx context.Context, o options, target string, m mode) (*engine.Runner, error) {
	cfg := engine.Config{Target: target, Backend: o.backend, Context: 1024, Threads: o.threads, Clock: o.clock}
	if !m.alone {
		cfg.Draft, cfg.Lookup = m.draft, m.lookup
	}
	return engine.Load(ctx, cfg, nil)
}

// drafting is the request's drafting settings for m: a fixed k drafts
// exactly k tokens a round, never cut short by the draft's confidence.
func (m mode) drafting() engine.Drafting {
	if m.fixedK > 0 {
		return engine.Drafting{Min: m.fixedK, Max: m.fixedK, PMin: -1}
	}
	return engine.Drafting{}
}

// round is one speculative step as generate saw it.
type round struct {
	drafted, accepted int
	took              time.Duration // since the previous step ended (0 for the first)
	ids               []int32       // the tokens it accepted
	// speedup and expected are the engine's statistics after the step:
	// its measured speedup of the generation so far and what its chooser
	// expects of the next step (engine.Stats).
	speedup, expected float64
}

// generate runs one chat message for n tokens (past any end-of-text) and
// returns its statistics and rounds.
func generate(ctx context.Context, r *engine.Runner, d engine.Drafting, message string, n int, temp float64, seed uint64, clock func() time.Time) (engine.Stats, []round, error) {
	var rounds []round
	var last time.Time
	var prev engine.Stats
	req := engine.Request{
		Messages:  []chat.Message{{Role: "user", Content: message}},
		MaxTokens: n, IgnoreEOS: true,
		Sampling: sample.Params{Temperature: temp, Seed: seed},
		Drafting: d,
	}
	st, err := r.Generate(ctx, req, func(ev engine.Event) {
		if ev.Kind != engine.EventToken {
			return
		}
		now := clock()
		rd := round{drafted: ev.Stats.Drafted - prev.Drafted, accepted: ev.Stats.Accepted - prev.Accepted, ids: slices.Clone(ev.IDs),
			speedup: ev.Stats.Speedup, expected: ev.Stats.ExpectedSpeedup}
		if !last.IsZero() {
			rd.took = now.Sub(last)
		}
		rounds = append(rounds, rd)
		last, prev = now, ev.Stats
	})
	if err != nil {
		return st, nil, fmt.Errorf("generate: %w", err)
	}
	return st, rounds, nil
}

// passCosts times target passes of 1..maxRows rows after a prompt (the
// verification of maxRows-1 drafted tokens): the median of reps each.
func passCosts(ctx context.Context, r *engine.Runner, message string, maxRows, reps int, clock func() time.Time) ([]time.Duration, error) {
	text, err := r.RenderChat(ctx, []chat.Message{{Role: "user", Content: message}}, true)
	if err != nil {
		return nil, err
	}
	prompt, err := r.Tokenizer().Encode(text, tokenizer.EncodeOptions{ParseSpecial: true, AddSpecial: r.Tokenizer().AddBOS()})
	if err != nil {
		return nil, err
	}
	if _, err := r.Forward(ctx, prompt, 0, nil); err != nil {
		return nil, err
	}
	costs := make([]time.Duration, maxRows+1)
	for rows := 1; rows <= maxRows; rows++ {
		tokens := prompt[:rows] // any tokens: the pass costs the same
		out := make([]int, rows)
		for i := range out {
			out[i] = i
		}
		times := make([]time.Duration, 0, reps)
		for i := 0; i <= reps; i++ {
			start := clock()
			if _, err := r.Forward(ctx, tokens, len(prompt), out); err != nil {
				return nil, err
			}
			if i > 0 { // the first run compiles the pass
				times = append(times, clock().Sub(start))
			}
		}
		costs[rows] = median(times)
	}
	return costs, nil
}
