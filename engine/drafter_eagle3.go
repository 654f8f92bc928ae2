package engine

import (
	"context"

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
}

func (d *eagle3Drafter) draft(ctx context.Context, history []int32, n int, pMin float64, s *sample.Sampler, m *grammar.Matcher) ([]int32, [][]float32, error) {
	last := len(history) - 1
	ran := commonPrefix(d.target.cached, history[:last]) // positions with current target states
	if ran < last || ran == 0 || n <= 0 {
		return nil, nil, nil
	}
	// Catch up from the first position whose token or state changed; rerun
	// at least the last one, whose logits give the first draft.
	c := min(d.m.Len(), commonPrefix(d.fed, history[1:]), ran-1)
	// Unpenalised greedy drafting needs only the top token: with the
	// target's head split by vocabulary, its shards' tops merge and no
	// logits are gathered. A grammar needs the logits to mask.
	topOnly := s.Params().Greedy() && !s.Params().Penalised() && m == nil
	var logits []float32
	var top model.Top
	var err error
	if topOnly {
		top, err = d.m.ForwardTop(ctx, history[c+1:ran+1], c)
	} else {
		logits, err = d.m.Forward(ctx, history[c+1:ran+1], c)
	}
	if err != nil {
		return nil, nil, err
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
		t, p := top.ID, top.P
		if !topOnly {
			if t, p, err = pickUnder(m, s, logits, d.toks, dists, i); err != nil {
				return nil, nil, err
			}
		}
		if p < pMin {
			break
		}
		d.toks = append(d.toks, t)
		stop, err := draftedUnder(m, t)
		if err != nil {
			return nil, nil, err
		}
		if i == n-1 || stop {
			break
		}
		// Position ran+i reads the token just drafted and the output the
		// previous call left.
		if topOnly {
			top, err = d.m.StepTop(ctx, t, ran+i)
		} else {
			logits, err = d.m.Step(ctx, t, ran+i)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	// Positions run on the draft's own outputs are not kept: the target
	// will provide its states for them.
	if err := d.m.Truncate(min(ran, d.m.Len())); err != nil {
		return nil, nil, err
	}
	proposed := d.toks[len(history):]
	if greedy {
		return proposed, nil, nil
	}
	return proposed, dists[:len(proposed)], nil
}
