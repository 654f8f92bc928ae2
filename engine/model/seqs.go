package model

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/tandem-run/tandem/kernels"
)

// Seq is one sequence's tokens in a pass over several (ForwardSeqs).
type Seq struct {
	Slot   int     // its KV cache slot, 0 to Slots()-1
	Pos    int     // the position of Tokens[0]: the slot holds the positions before it
	Tokens []int32 // run at Pos, Pos+1, ...
	Out    int     // the last Out rows' results are wanted
}

// segment is a Seq's rows of the pass: rows [row, row+n) in slot slot.
type segment struct{ slot, row, n int }

// Slots is how many sequences the KV caches hold, Context() tokens each:
// the plan's Parallel for a target, 1 for a draft.
func (m *Model) Slots() int { return m.slots }

// slot is slot s of a block's cache t: its Context() rows.
func (m *Model) slot(t kernels.Tensor, s int) kernels.Tensor {
	return t.RowSlice(s*m.ctx, m.ctx)
}

// ForwardSeqs runs several sequences' tokens in one pass, each in its own
// KV slot at its own positions, each row attending to its own sequence
// only, and returns the logits of each sequence's last Out rows, sequence
// after sequence, row after row, len*Vocab floats (reused by the next
// call). The slots must differ and the tokens together fit one batch.
// Unlike Forward it does not track what the slots hold (Len, Truncate
// concern Forward's sequence, slot 0): the caller keeps, for each slot,
// the positions before Pos. The rows' numbers and slots make one program
// per backend, so a set of sequences that goes on from step to step
// reuses it.
func (m *Model) ForwardSeqs(ctx context.Context, seqs []Seq) ([]float32, error) {
	vocab := m.params.Vocab
	k, err := m.checkSeqs(seqs)
	if err != nil {
		return nil, err
	}
	if need := k * vocab; cap(m.logits) < need {
		m.logits = make([]float32, need)
	}
	logits := m.logits[:k*vocab]
	err = m.forwardSeqs(ctx, seqs, func(k int) error {
		if err := m.runHead(ctx, k, headLogits, 0, 0); err != nil {
			return err
		}
		return m.gather(k, logits)
	})
	if err != nil {
		return nil, err
	}
	return logits, nil
}

// ForwardSeqsArgmax is ForwardSeqs for greedy decoding, as ForwardArgmax
// is Forward's: each wanted row's argmax, found where the head runs.
func (m *Model) ForwardSeqsArgmax(ctx context.Context, seqs []Seq) ([]int32, error) {
	k, err := m.checkSeqs(seqs)
	if err != nil {
		return nil, err
	}
	if cap(m.ids) < k {
		m.ids = make([]int32, k)
	}
	ids := m.ids[:k]
	err = m.forwardSeqs(ctx, seqs, func(k int) error {
		if err := m.runHead(ctx, k, headArgmax, 0, 0); err != nil {
			return err
		}
		return m.readArgmax(k, ids)
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// checkSeqs checks a ForwardSeqs call and returns the rows wanted.
func (m *Model) checkSeqs(seqs []Seq) (int, error) {
	if m.cap != nil {
		return 0, fmt.Errorf("model: a pass over several sequences with a draft reading the states: %w", ErrUnsupported)
	}
	if len(seqs) == 0 {
		return 0, fmt.Errorf("model: a pass over no sequences: %w", ErrBadParam)
	}
	rows, out := 0, 0
	used := make(map[int]bool, len(seqs))
	for _, s := range seqs {
		if s.Slot < 0 || s.Slot >= m.slots || used[s.Slot] {
			return 0, fmt.Errorf("model: slot %d of %d (each once): %w", s.Slot, m.slots, ErrBadParam)
		}
		used[s.Slot] = true
		if s.Out < 0 || s.Out > len(s.Tokens) {
			return 0, fmt.Errorf("model: %d rows wanted of %d: %w", s.Out, len(s.Tokens), ErrBadParam)
		}
		if err := checkForward(s.Tokens, s.Pos, nil, s.Pos, m.ctx, m.params.Vocab); err != nil {
			return 0, fmt.Errorf("model: slot %d: %w", s.Slot, err)
		}
		rows += len(s.Tokens)
		out += s.Out
	}
	if rows > m.batch {
		return 0, fmt.Errorf("model: %d rows in a batch of %d: %w", rows, m.batch, ErrBadParam)
	}
	return out, nil
}

// forwardSeqs stages the sequences' tokens and positions, runs the pass
// with their segments in force, and then head(k) on the k wanted rows,
// staged in outIdx.
func (m *Model) forwardSeqs(ctx context.Context, seqs []Seq, head func(k int) error) error {
	b := 0
	var key strings.Builder
	segs := make([]segment, 0, len(seqs))
	for _, s := range seqs {
		copy(m.tokens[b:], s.Tokens)
		for i := range s.Tokens {
			m.positions[b+i] = int32(s.Pos + i)
		}
		segs = append(segs, segment{slot: s.Slot, row: b, n: len(s.Tokens)})
		key.WriteString(strconv.Itoa(s.Slot) + ":" + strconv.Itoa(len(s.Tokens)) + " ")
		b += len(s.Tokens)
	}
	m.segs, m.layout = segs, key.String()
	err := m.pass(ctx, b)
	m.segs, m.layout = nil, ""
	if err != nil {
		return err
	}
	k := 0
	for i, sg := range segs {
		for r := sg.row + sg.n - seqs[i].Out; r < sg.row+sg.n; r++ {
			m.outIdx[k] = int32(r)
			k++
		}
	}
	if k == 0 {
		return nil
	}
	return head(k)
}
