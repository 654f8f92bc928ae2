package engine

import (
	"context"
	"fmt"
	"math"

	"github.com/tandem-run/tandem/engine/grammar"
	"github.com/tandem-run/tandem/engine/sample"
	"github.com/tandem-run/tandem/engine/spec"
)

// drafter proposes up to n tokens to follow a history, stopping early where
// its own top probability falls below pMin. dists[i] is the distribution
// tokens[i] was drawn from under the request's sampling settings; a nil
// dists means each proposal is certain (a one-hot distribution), as for
// greedy drafting and prompt lookup. m, when not nil, is the grammar the
// output must follow, at the history's end: a drafter that picks from
// logits masks them with it and advances it by each proposal (it is the
// drafter's own copy); one that does not may propose anything, and the
// generation cuts its proposals where the grammar refuses one.
type drafter interface {
	draft(ctx context.Context, history []int32, n int, pMin float64, s *sample.Sampler, m *grammar.Matcher) (tokens []int32, dists [][]float32, err error)
}

// modelDrafter drafts with a small model of the same vocabulary.
type modelDrafter struct {
	seq   sequence
	toks  []int32
	dists [][]float32
}

func (d *modelDrafter) draft(ctx context.Context, history []int32, n int, pMin float64, s *sample.Sampler, m *grammar.Matcher) ([]int32, [][]float32, error) {
	d.toks = append(d.toks[:0], history...)
	proposed := d.toks[len(history):]
	greedy := s.Params().Greedy()
	var dists [][]float32 // the distributions sampled drafts came from
	if !greedy {
		if cap(d.dists) < n {
			d.dists = make([][]float32, n)
		}
		dists = d.dists[:n]
	}
	for i := range n {
		logits, err := d.seq.run(ctx, d.toks, 1)
		if err != nil {
			return nil, nil, err
		}
		t, top, err := pickUnder(m, s, logits, d.toks, dists, i)
		if err != nil {
			return nil, nil, err
		}
		// A draft unsure of its own next token is likely wrong: stop here
		// rather than spend the target's time verifying a guess.
		if top < pMin {
			break
		}
		d.toks = append(d.toks, t)
		proposed = d.toks[len(history):]
		stop, err := draftedUnder(m, t)
		if err != nil {
			return nil, nil, err
		}
		if stop {
			break
		}
	}
	if greedy {
		return proposed, nil, nil
	}
	return proposed, dists[:len(proposed)], nil
}

// pick chooses a drafted token from logits under s's settings and returns
// it with the draft's confidence: for greedy settings the softmax
// probability of the top logit; for sampling the top probability of the
// distribution it was drawn from, which is kept in dists[i] for the verifier.
func pick(s *sample.Sampler, logits []float32, history []int32, dists [][]float32, i int) (int32, float64, error) {
	if !s.Params().Greedy() {
		q, err := s.Probs(dists[i], logits, history)
		if err != nil {
			return 0, 0, fmt.Errorf("engine: draft: %w", err)
		}
		dists[i] = q
		return sample.Draw(q, s.Uniform()), float64(q[sample.Argmax(q)]), nil
	}
	t, err := s.Sample(logits, history)
	if err != nil {
		return 0, 0, fmt.Errorf("engine: draft: %w", err)
	}
	maxv := logits[sample.Argmax(logits)]
	var sum float64
	for _, l := range logits {
		sum += math.Exp(float64(l - maxv))
	}
	return t, math.Exp(float64(logits[t]-maxv)) / sum, nil
}

// lookupDrafter drafts by prompt lookup: no model, certain proposals.
type lookupDrafter struct{ l spec.Lookup }

func (d lookupDrafter) draft(_ context.Context, history []int32, n int, _ float64, _ *sample.Sampler, _ *grammar.Matcher) ([]int32, [][]float32, error) {
	return d.l.Draft(history, n), nil, nil
}
