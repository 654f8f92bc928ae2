package engine

import (
	"context"
	"errors"

	"github.com/tandem-run/tandem/engine/grammar"
	"github.com/tandem-run/tandem/engine/model"
	"github.com/tandem-run/tandem/engine/sample"
)

// dflashDrafter drafts with a DFlash block draft. The target hands it the
// hidden states of every position it runs (model.LoadDFlash sets that up),
// which the draft turns into its own K and V there; a step then proposes
// up to a block of tokens in one draft pass: the pending last token as the
// block's anchor, mask tokens after it.
//
// The pass needs the target's states of every position before the anchor:
// as for EAGLE-3, the generation loop keeps the target there between steps.
// The block's slots are all computed at once, so each slot's distribution
// q is that of its position whatever was drafted before it: rejection
// sampling with those q keeps the target's distribution exactly.
type dflashDrafter struct {
	m      *model.DFlash
	target *sequence // its cache says which captured states are current
	toks   []int32
	dists  [][]float32
}

// prefill has nothing to do: the draft's keys and values at the prompt's
// positions come from the target's states, written when a block is drafted.
func (d *dflashDrafter) prefill(context.Context, []int32) error { return nil }

// draft proposes the block in one pass (passes 1; behind 1, the anchor:
// the positions the pass writes from the target's states are not draft
// passes).
func (d *dflashDrafter) draft(ctx context.Context, history []int32, n int, pMin float64, s *sample.Sampler, m *grammar.Matcher) (proposal, error) {
	tokens, dists, err := d.block(ctx, history, n, pMin, s, m)
	if err != nil || len(tokens) == 0 {
		return proposal{}, err
	}
	return proposal{tokens: tokens, dists: dists, passes: 1, behind: 1}, nil
}

func (d *dflashDrafter) block(ctx context.Context, history []int32, n int, pMin float64, s *sample.Sampler, m *grammar.Matcher) ([]int32, [][]float32, error) {
	last := len(history) - 1
	ran := commonPrefix(d.target.cached, history[:last]) // positions with current target states
	n = min(n, d.m.MaxDraft())
	if ran < last || n <= 0 || d.m.Len() < ran {
		return nil, nil, nil
	}
	// Positions past the history's (a rejected verification's) hold states
	// of tokens no longer there: the block overwrites them.
	if err := d.m.Truncate(ran); err != nil {
		return nil, nil, err
	}
	// Unpenalised greedy drafting needs only each slot's top token: with
	// the target's head split by vocabulary, the shards' tops merge and no
	// logits are gathered. A grammar needs the logits to mask.
	topOnly := s.Params().Greedy() && !s.Params().Penalised() && m == nil
	var tops []model.Top
	var logits []float32
	var err error
	if topOnly {
		tops, err = d.m.BlockTop(ctx, history[last], last, n)
	} else {
		logits, err = d.m.Block(ctx, history[last], last, n)
	}
	if err != nil {
		return nil, nil, err
	}
	d.toks = append(d.toks[:0], history...)
	greedy := s.Params().Greedy()
	var dists [][]float32
	if !greedy {
		if cap(d.dists) < n {
			d.dists = make([][]float32, n)
		}
		dists = d.dists[:n]
	}
	vocab := len(logits) / n
	for i := range n {
		var t int32
		var p float64
		if topOnly {
			t, p = tops[i].ID, tops[i].P
		} else if t, p, err = pickUnder(m, s, logits[i*vocab:(i+1)*vocab], d.toks, dists, i); err != nil {
			return nil, nil, err
		}
		if p < pMin {
			break
		}
		d.toks = append(d.toks, t)
		stop, err := draftedUnder(m, t)
		if err != nil {
			return nil, nil, err
		}
		if stop {
			break
		}
	}
	proposed := d.toks[len(history):]
	if greedy {
		return proposed, nil, nil
	}
	return proposed, dists[:len(proposed)], nil
}

// DraftBlock runs one pass of the loaded DFlash draft as a greedy round
// does: the block [anchor, mask x k] at positions pos..pos+k, each slot's
// top found where the head runs, after the target's last Forward ran the
// positions before pos (Forward hands the draft their states). k is
// clamped to the draft's block; the slots' top tokens are returned (valid
// until the next call). Benchmarks time it: the cost of a block against
// its length.
func (r *Runner) DraftBlock(ctx context.Context, anchor int32, pos, k int) ([]int32, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.draft.(*dflashDrafter)
	if !ok {
		return nil, errors.New("engine: no DFlash draft is loaded")
	}
	k = min(k, d.m.MaxDraft())
	tops, err := d.m.BlockTop(ctx, anchor, pos, k)
	if err != nil {
		return nil, err
	}
	d.toks = d.toks[:0]
	for _, t := range tops {
		d.toks = append(d.toks, t.ID)
	}
	return d.toks, nil
}
