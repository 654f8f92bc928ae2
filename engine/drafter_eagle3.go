package engine

import (
	"context"
	"fmt"

	"github.com/tandem-run/tandem/engine/grammar"
	"github.com/tandem-run/tandem/engine/model"
	"github.com/tandem-run/tandem/engine/sample"
)

// eagle3Drafter drafts with an EAGLE-3 head. The target hands it the hidden
// states of every position it runs, prompt and verification batches alike
// (model.LoadEagle3 sets that up);
// before drafting, the head catches up on the positions the target has run
// since the last step, then drafts on its own states.
//
// Draft position p reads token p+1 and the state of position p, so the
// head can only start once the target has run every token but the last:
// the generation loop keeps the target there between steps.
type eagle3Drafter struct {
	m      *model.Eagle3
	target *sequence // its cache says which captured states are current
	fed    []int32   // fed[p]: the token draft position p read, from the history
	toks   []int32
	dists  [][]float32
	// rowDist is the last draw's distribution over the draft's rows.
	rowDist []float32
	// probs: the draft's head computes a sampled step's distribution over
	// its rows (model.Eagle3.ForwardProbsRows, on a GPU) and the host only
	// draws from it.
	probs bool
}

// behind is where the draft's catch-up on history starts, c, and the
// positions with current target states, ran: it reruns c..ran-1. ok is
// false while the target has not run every token but the last.
func (d *eagle3Drafter) behind(history []int32) (c, ran int, ok bool) {
	last := len(history) - 1
	ran = commonPrefix(d.target.cached, history[:last])
	// The target's last pass may have captured nothing (paused while
	// drafting was off): without its states there is nothing to draft on.
	if ran < last || ran == 0 || d.m.Fused() < ran {
		return 0, 0, false
	}
	// From the first position whose token or state changed; at least the
	// last one, whose output gives the first draft.
	return min(d.m.Len(), commonPrefix(d.fed, history[1:]), ran-1), ran, true
}

func (d *eagle3Drafter) prefill(ctx context.Context, history []int32) error {
	c, ran, ok := d.behind(history)
	if !ok || c >= ran-1 {
		return nil
	}
	// Every position the first round would catch up on but the last.
	if _, err := d.m.ForwardTop(ctx, history[c+1:ran], c); err != nil {
		return err
	}
	d.fed = append(d.fed[:c], history[c+1:ran]...)
	return nil
}

func (d *eagle3Drafter) draft(ctx context.Context, history []int32, n int, pMin float64, s *sample.Sampler, m *grammar.Matcher) (proposal, error) {
	c, ran, ok := d.behind(history)
	if !ok || n <= 0 {
		return proposal{}, nil
	}
	p := proposal{behind: ran - c}
	if m == nil && greedyOnDevice(s) {
		ids, probs, err := d.m.Chain(ctx, history[c+1:ran+1], c, n, pMin)
		if err != nil {
			return proposal{}, err
		}
		d.fed = append(d.fed[:c], history[c+1:ran+1]...)
		p.tokens, p.passes = confident(ids, probs, pMin), len(ids)
		return p, d.forget(ran)
	}
	// Sampled, penalised or constrained drafting takes each pass's logits
	// to the host (a grammar masks them there). A draft with a reduced
	// vocabulary of its own (d2t) is sampled over its rows, where neither
	// penalties (by target id) nor a grammar apply: the same distribution
	// as over the target's ids, which would only add -Inf entries to scan.
	d2t, vocab := d.m.Rows()
	rows := d2t != nil && m == nil && !s.Params().Penalised()
	forward, step := d.m.Forward, d.m.Step
	if rows {
		forward, step = d.m.ForwardRows, d.m.StepRows
	}
	// At a temperature alone, the head's softmax on the device: the host
	// reads the distribution in place of the logits and only draws.
	onHead := rows && d.probs && s.Params().TemperatureOnly()
	if onHead {
		temp := s.Params().Temperature
		forward = func(ctx context.Context, tokens []int32, pos int) ([]float32, error) {
			return d.m.ForwardProbsRows(ctx, tokens, pos, temp)
		}
		step = func(ctx context.Context, token int32, pos int) ([]float32, error) {
			return d.m.StepProbsRows(ctx, token, pos, temp)
		}
	}
	logits, err := forward(ctx, history[c+1:ran+1], c)
	if err != nil {
		return proposal{}, err
	}
	d.fed = append(d.fed[:c], history[c+1:ran+1]...)
	d.toks = append(d.toks[:0], history...)
	greedy := s.Params().Greedy()
	var dists [][]float32 // the distributions sampled drafts came from
	if !greedy {
		if cap(d.dists) < n {
			d.dists = make([][]float32, n)
		}
		dists = d.dists[:n]
	}
	for i := 0; ; i++ {
		p.passes++
		var t int32
		var top float64
		switch {
		case onHead:
			t, top, err = drawRows(s, logits, d2t, vocab, dists, i, pMin)
		case rows:
			t, top, d.rowDist, err = pickRows(s, logits, d2t, vocab, d.rowDist, dists, i)
		default:
			t, top, err = pickUnder(m, s, logits, d.toks, dists, i)
		}
		if err != nil {
			return proposal{}, err
		}
		if top < pMin {
			break
		}
		d.toks = append(d.toks, t)
		stop, err := draftedUnder(m, t)
		if err != nil {
			return proposal{}, err
		}
		if i == n-1 || stop {
			break
		}
		// Position ran+i reads the token just drafted and the output the
		// previous call left.
		if logits, err = step(ctx, t, ran+i); err != nil {
			return proposal{}, err
		}
	}
	p.tokens = d.toks[len(history):]
	if !greedy {
		p.dists = dists[:len(p.tokens)]
	}
	return p, d.forget(ran)
}

// forget drops the positions the draft ran on its own outputs: the target
// will provide its states for them.
func (d *eagle3Drafter) forget(ran int) error {
	return d.m.Truncate(min(ran, d.m.Len()))
}

// pickRows is pick over a draft's own rows, logits in d2t's order: the
// token is mapped to its target id and, when sampling, the distribution
// (drawn into rowDist, returned for reuse) is spread into dists[i] over
// the target's vocab ids, the form verification reads. Without penalties
// the draw is the one pick makes over the target's ids with -Inf outside
// d2t: those ids get no mass, and the rest keep their order.
func pickRows(s *sample.Sampler, logits []float32, d2t []int32, vocab int, rowDist []float32, dists [][]float32, i int) (int32, float64, []float32, error) {
	if dists == nil {
		t, top, err := pick(s, logits, nil, nil, i)
		if err != nil {
			return 0, 0, rowDist, err
		}
		return d2t[t], top, rowDist, nil
	}
	q, t, top, err := s.Pick(rowDist, logits, nil)
	if err != nil {
		return 0, 0, rowDist, fmt.Errorf("engine: draft: %w", err)
	}
	spreadRows(dists, i, q, d2t, vocab)
	return d2t[t], top, q, nil
}

// drawRows is pickRows on the draft's softmax over its rows, q, computed
// by its head (ForwardProbsRows): a draw, and q spread into dists[i].
func drawRows(s *sample.Sampler, q []float32, d2t []int32, vocab int, dists [][]float32, i int, pMin float64) (int32, float64, error) {
	t, top, err := drawProbs(s, q, pMin)
	if err != nil {
		return 0, 0, fmt.Errorf("engine: draft: %w", err)
	}
	spreadRows(dists, i, q, d2t, vocab)
	return d2t[t], top, nil
}

// spreadRows writes q, a distribution over the draft's rows, into
// dists[i] over the target's vocab ids (grown as needed), the form
// verification reads.
func spreadRows(dists [][]float32, i int, q []float32, d2t []int32, vocab int) {
	full := dists[i]
	if cap(full) < vocab {
		full = make([]float32, vocab)
	}
	full = full[:vocab]
	clear(full)
	for r, id := range d2t {
		full[id] = q[r]
	}
	dists[i] = full
}
