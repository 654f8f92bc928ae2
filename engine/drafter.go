package engine

import (
	"context"
	"fmt"
	"math"

	"github.com/tandem-run/tandem/engine/grammar"
	"github.com/tandem-run/tandem/engine/sample"
	"github.com/tandem-run/tandem/engine/spec"
)

// drafter proposes tokens to follow a history.
type drafter interface {
	// prefill runs the draft on all but the last token of a prompt the
	// target has just prefilled, so that the first round, like every
	// other, catches up on one token and the prompt counts as prefill.
	prefill(ctx context.Context, history []int32) error
	// draft proposes up to n tokens to follow history, stopping early
	// where its own top probability falls below pMin. m, when not nil, is
	// the grammar the output must follow, at the history's end: a drafter
	// that picks from logits masks them with it and advances it by each
	// proposal (it is the drafter's own copy); one that does not may
	// propose anything, and the generation cuts its proposals where the
	// grammar refuses one.
	draft(ctx context.Context, history []int32, n int, pMin float64, s *sample.Sampler, m *grammar.Matcher) (proposal, error)
}

// proposal is what a drafter proposes in a round, and what it cost.
type proposal struct {
	tokens []int32
	// dists[i] is the distribution tokens[i] was drawn from under the
	// request's sampling settings; nil means each proposal is certain (a
	// one-hot distribution), as for greedy drafting and prompt lookup.
	dists [][]float32
	// passes are the draft's forward passes; behind, the tokens the first
	// of them caught up on (one, or a round's accepted tokens and one,
	// when the draft kept pace; more after rounds it sat out).
	passes, behind int
	// block is the length of the block a one-pass drafter (DFlash)
	// computed, which its pass's cost goes by; 0 for a drafter of steps.
	block int
}

// blockDrafter is a drafter that proposes a block of tokens in one pass,
// up to blockMax of them: the chooser prices its call by the block's
// length, not as steps (spec.CostOptions.Block).
type blockDrafter interface {
	blockMax() int
}

// greedyOnDevice reports whether s drafts by argmax alone, which runs on
// the device (Model.Chain): greedy and unpenalised.
func greedyOnDevice(s *sample.Sampler) bool {
	p := s.Params()
	return p.Greedy() && !p.Penalised()
}

// confident is how many of ids to propose: those before the first whose
// probability is below pMin (all without probabilities).
func confident(ids []int32, probs []float32, pMin float64) []int32 {
	for i, p := range probs {
		if float64(p) < pMin {
			return ids[:i]
		}
	}
	return ids
}

// modelDrafter drafts with a small model of the same vocabulary.
type modelDrafter struct {
	seq   sequence
	toks  []int32
	dists [][]float32
	// probs: the draft's head computes a sampled step's distribution
	// (model.ForwardProbs, on a GPU) and the host only draws from it.
	probs bool
}

func (d *modelDrafter) prefill(ctx context.Context, history []int32) error {
	if len(history) < 2 {
		return nil
	}
	_, err := d.seq.runArgmax(ctx, history[:len(history)-1], 1)
	return err
}

func (d *modelDrafter) draft(ctx context.Context, history []int32, n int, pMin float64, s *sample.Sampler, m *grammar.Matcher) (proposal, error) {
	behind := len(history) - commonPrefix(d.seq.cached, history)
	if m == nil && greedyOnDevice(s) {
		ids, probs, err := d.seq.chain(ctx, history, n, pMin)
		if err != nil {
			return proposal{}, err
		}
		return proposal{tokens: confident(ids, probs, pMin), passes: len(ids), behind: behind}, nil
	}
	// Sampled, penalised or constrained drafting takes each pass's logits
	// to the host.
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
	passes := 0
	onHead := d.probs && m == nil && s.Params().TemperatureOnly()
	for i := range n {
		var t int32
		var top float64
		if onHead {
			q, err := d.seq.runProbs(ctx, d.toks, 1, s.Params().Temperature, dists[i])
			if err != nil {
				return proposal{}, err
			}
			passes++
			dists[i] = q
			if t, top, err = drawProbs(s, q, pMin); err != nil {
				return proposal{}, fmt.Errorf("engine: draft: %w", err)
			}
		} else {
			logits, err := d.seq.run(ctx, d.toks, 1)
			if err != nil {
				return proposal{}, err
			}
			passes++
			if t, top, err = pickUnder(m, s, logits, d.toks, dists, i); err != nil {
				return proposal{}, err
			}
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
			return proposal{}, err
		}
		if stop {
			break
		}
	}
	p := proposal{tokens: proposed, passes: passes, behind: behind}
	if !greedy {
		p.dists = dists[:len(proposed)]
	}
	return p, nil
}

// pick chooses a drafted token from logits under s's settings and returns
// it with the draft's confidence: for greedy settings the softmax
// probability of the top logit; for sampling the top probability of the
// distribution it was drawn from, which is kept in dists[i] for the verifier.
func pick(s *sample.Sampler, logits []float32, history []int32, dists [][]float32, i int) (int32, float64, error) {
	if !s.Params().Greedy() {
		q, t, top, err := s.Pick(dists[i], logits, history)
		if err != nil {
			return 0, 0, fmt.Errorf("engine: draft: %w", err)
		}
		dists[i] = q
		return t, top, nil
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

// drawProbs draws a token from a row of probabilities a head computed
// (model.ForwardProbs) with s's randomness, and returns it with the row's
// largest probability when pMin asks for it (else 1: a sampled draft's
// step costs one pass over the row, the draw's). A row the head made of
// non-finite logits is NaN throughout (the backends' softmax): ErrNonFinite.
func drawProbs(s *sample.Sampler, p []float32, pMin float64) (int32, float64, error) {
	if err := finiteProbs(p); err != nil {
		return 0, 0, err
	}
	t := sample.Draw(p, s.Uniform())
	top := 1.0
	if pMin > 0 {
		top = float64(p[sample.Argmax(p)])
	}
	return t, top, nil
}

// finiteProbs checks a head's softmax row: any NaN or infinite logit (or
// one the temperature's scaling overflowed) leaves every entry NaN.
func finiteProbs(p []float32) error {
	if len(p) == 0 || p[0] != p[0] {
		return fmt.Errorf("sample: a softmax row of non-finite logits: %w", sample.ErrNonFinite)
	}
	return nil
}

// lookupDrafter drafts by prompt lookup: no model, certain proposals.
type lookupDrafter struct{ l spec.Lookup }

func (lookupDrafter) prefill(context.Context, []int32) error { return nil }

func (d lookupDrafter) draft(_ context.Context, history []int32, n int, _ float64, _ *sample.Sampler, _ *grammar.Matcher) (proposal, error) {
	return proposal{tokens: d.l.Draft(history, n)}, nil
}
