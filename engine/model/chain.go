package model

import (
	"context"
	"fmt"

	"github.com/tandem-run/tandem/kernels"
)

// Greedy drafting on the device. A draft proposing k tokens runs k passes,
// each on the argmax of the one before. Taking each argmax to the host and
// writing it back as the next input costs a round trip per token (on a GPU,
// a synchronisation that leaves it idle while the host reads, decides and
// launches again), which for a small draft is most of a step. Chain keeps
// the whole run on the device where the model allows: each step's argmax
// lands in a slot of the top-ids buffer, from which the next step's token
// lookup reads it, and the k-1 steps after the first are one program (one
// CUDA graph); only the k ids, and their probabilities when asked, cross
// to the host at the end.
//
// The probabilities serve the engine's p-min cut (stop drafting where the
// draft is unsure). They come from the softmax op on the device and a
// gather of the argmax's entry, so the cut needs no logits on the host;
// the device runs all k steps, and the engine keeps the ids before the
// first unsure one. Sampled drafting needs the draft's distributions on the
// host and does not chain.

// pickOps takes the argmax of one row of logits into slot of ids and,
// with withP, its softmax probability into slot of probs (the logits are
// overwritten by their softmax). The argmax is taken on the logits: two
// logits close enough may round to one probability.
func pickOps(logits, ids, probs kernels.Tensor, slot int, withP bool) []kernels.Op {
	id := packed(ids, 1, slot+1).ColSlice(slot, 1)
	ops := []kernels.Op{kernels.Argmax{Dst: id, X: logits}}
	if withP {
		ops = append(ops,
			kernels.Softmax{Dst: logits, X: logits},
			kernels.GetRows{Dst: packed(probs, 1, slot+1).ColSlice(slot, 1), Src: logits.Reshape(logits.Cols, 1), Idx: id})
	}
	return ops
}

// chainBuffers are a chain's results on the host.
type chainBuffers struct {
	ids   []int32
	probs []float32
}

// results reads n ids (and probabilities) from their device slots.
func (c *chainBuffers) results(be kernels.Backend, ids, probs kernels.Tensor, n int, withP bool) ([]int32, []float32, error) {
	c.grow(n)
	if err := be.Read(kernels.I32Bytes(c.ids[:n]), packed(ids, 1, n)); err != nil {
		return nil, nil, fmt.Errorf("model: drafted ids: %w", err)
	}
	if !withP {
		return c.ids[:n], nil, nil
	}
	if err := be.Read(kernels.F32Bytes(c.probs[:n]), packed(probs, 1, n)); err != nil {
		return nil, nil, fmt.Errorf("model: drafted probabilities: %w", err)
	}
	return c.ids[:n], c.probs[:n], nil
}

func (c *chainBuffers) grow(n int) {
	if cap(c.ids) < n {
		c.ids, c.probs = make([]int32, n), make([]float32, n)
	}
}

// checkChain checks a chain of k steps after n tokens at pos in a context
// of ctx positions: its last step runs at pos+n+k-2.
func checkChain(n, pos, k, ctx int) error {
	switch {
	case k < 1:
		return fmt.Errorf("model: a chain of %d steps: %w", k, ErrBadParam)
	case pos+n+k-1 > ctx:
		return fmt.Errorf("model: %d tokens at %d and %d drafted steps in a %d-token context: %w", n, pos, k-1, ctx, ErrContext)
	}
	return nil
}

// Chain drafts greedily: it runs tokens at pos, pos+1, ... (what the cache
// lacks, ending with the last known token), takes the argmax of the last
// row, and runs k-1 more steps, each on the argmax before. It returns the
// k argmaxes and, when pMin > 0, the softmax probability of each. The cache
// then holds every position run: the tokens and the first k-1 ids.
//
// On one device with the whole embedding and head there, the run stays on
// the device (see above). Otherwise each step is a ForwardArgmax, or with
// pMin > 0 a Forward whose argmax and probability the host takes, and the
// run stops after the first id whose probability is below pMin: fewer than
// k ids then, the last of them the unsure one. The returned slices are
// reused by the next call.
func (m *Model) Chain(ctx context.Context, tokens []int32, pos, k int, pMin float64) ([]int32, []float32, error) {
	if err := checkChain(len(tokens), pos, k, m.ctx); err != nil {
		return nil, nil, err
	}
	withP := pMin > 0
	pt := m.chainPart(k)
	if pt == nil {
		return m.chainHost(ctx, tokens, pos, k, pMin)
	}
	kind := headPick
	if withP {
		kind = headPickP
	}
	last := []int{len(tokens) - 1}
	err := m.forward(ctx, tokens, pos, last, func(_, rows int) error { return m.runHead(ctx, rows, kind, 0, 0) })
	if err != nil {
		return nil, nil, err
	}
	if k > 1 {
		at := pos + len(tokens)
		for i := range k - 1 {
			m.positions[i] = int32(at + i)
		}
		if err := pt.be.Write(pt.s.pos.ColSlice(0, k-1), kernels.I32Bytes(m.positions[:k-1])); err != nil {
			return nil, nil, fmt.Errorf("model: %w", err)
		}
		err := pt.progs.run(ctx, progKey{kind: progChain, n: k, top: int(kind)}, func() []kernels.Op { return m.chainOps(pt, k, withP) })
		if err != nil {
			return nil, nil, err
		}
		m.n = at + k - 1
	}
	return m.chain.results(pt.be, pt.s.topIDs, pt.s.topLogits, k, withP)
}

// chainPart is the part that runs a chain of k steps on its own, or nil:
// the model's one device, holding the whole embedding and head, its slots
// room for k ids and positions, and no block inputs read back for a draft.
func (m *Model) chainPart(k int) *part {
	if len(m.parts) != 1 || len(m.embd) != 1 || len(m.head) != 1 || m.cap != nil {
		return nil
	}
	pt, vocab := m.parts[0], int64(m.params.Vocab)
	switch {
	case pt.embdRows.Len() != vocab || pt.headRows.Len() != vocab:
		return nil
	case !pt.s.topIDs.Valid() || !pt.s.topLogits.Valid() || k > pt.s.pos.Cols:
		return nil
	case int64(k) > int64(pt.s.topIDs.Rows)*int64(pt.s.topIDs.Cols):
		return nil
	}
	return pt
}

// chainOps are steps 2..k of a chain on pt: step i looks up the id in
// slot i-2 and runs at the position in slot i-2 of the inputs, and its
// argmax goes to slot i-1.
func (m *Model) chainOps(pt *part, k int, withP bool) []kernels.Op {
	x, xn, logits := pt.s.x.RowSlice(0, 1), pt.s.xn.RowSlice(0, 1), pt.s.logits.RowSlice(0, 1)
	var ops []kernels.Op
	for i := 1; i < k; i++ {
		prev := packed(pt.s.topIDs, 1, i).ColSlice(i-1, 1)
		pos := pt.s.pos.ColSlice(i-1, 1)
		ops = append(ops, kernels.GetRows{Dst: x, Src: pt.w.tokEmbd, Idx: prev})
		for l := range m.params.Layers {
			ops = append(ops, m.attnOpsAt(pt, l, 1, pos)...)
			ops = append(ops, kernels.Add{Dst: x, A: x, B: xn})
			ops = append(ops, m.ffnOps(pt, l, 1)...)
			ops = append(ops, kernels.Add{Dst: x, A: x, B: xn})
		}
		ops = append(ops,
			kernels.RMSNorm{Dst: xn, X: x, W: pt.w.outNorm, Eps: m.params.NormEps},
			kernels.MatMul{Dst: logits, W: pt.w.output, X: xn})
		ops = append(ops, pickOps(logits, pt.s.topIDs, pt.s.topLogits, i, withP)...)
	}
	return ops
}

// chainHost is Chain one step at a time through the host, where the model
// is placed over several devices.
func (m *Model) chainHost(ctx context.Context, tokens []int32, pos, k int, pMin float64) ([]int32, []float32, error) {
	m.chain.grow(k)
	ids, probs := m.chain.ids[:0], m.chain.probs[:0]
	in := tokens
	for i := range k {
		var id int32
		if pMin > 0 {
			logits, err := m.Forward(ctx, in, pos, nil)
			if err != nil {
				return nil, nil, err
			}
			var p float64
			id, p = argmaxProb(logits)
			probs = append(probs, float32(p))
		} else {
			out, err := m.ForwardArgmax(ctx, in, pos, nil)
			if err != nil {
				return nil, nil, err
			}
			id = out[0]
		}
		ids = append(ids, id)
		if pMin > 0 && float64(probs[i]) < pMin {
			break
		}
		pos += len(in)
		in = ids[i : i+1]
	}
	if pMin <= 0 {
		probs = nil
	}
	return ids, probs, nil
}

// argmaxProb is the argmax of logits (the lowest id on ties) and its
// softmax probability.
func argmaxProb(logits []float32) (int32, float64) {
	t := topOf(logits)
	return t.ID, t.P
}

// Chain is Model.Chain for the EAGLE-3 draft: tokens at pos are what the
// draft has not run on the target's states (Forward's rows), ending with
// the last known token; the k-1 steps after them are Steps. On the device
// where the draft uses its own (or the target's local) embedding and head
// over the target's vocabulary, the run stays there; otherwise each step
// reads its top token to the host (ForwardTop, StepTop), stopping after
// the first whose probability is below pMin. The draft's state afterwards
// is that of its last step, as after Step.
func (m *Eagle3) Chain(ctx context.Context, tokens []int32, pos, k int, pMin float64) ([]int32, []float32, error) {
	if err := m.checkForward(tokens, pos); err != nil {
		return nil, nil, err
	}
	if err := checkChain(len(tokens), pos, k, m.context); err != nil {
		return nil, nil, err
	}
	withP := pMin > 0
	if m.d2t != nil && m.picksOnDevice() {
		return m.chainMapped(ctx, tokens, pos, k, pMin)
	}
	if !m.chains(k) {
		return m.chainHost(ctx, tokens, pos, k, pMin)
	}
	s := m.s
	first := func(b int) []kernels.Op {
		return append(m.bodyOps(b), pickOps(s.logits, s.topIDs, s.topP, 0, withP)...)
	}
	if err := m.run(ctx, tokens, pos, progKey{kind: progDraft, block: 1, top: boolInt(withP)}, first); err != nil {
		return nil, nil, err
	}
	if k > 1 {
		at := pos + len(tokens)
		for i := range k - 1 {
			m.positions[i] = int32(at + i)
		}
		if err := m.be.Write(s.pos.ColSlice(0, k-1), kernels.I32Bytes(m.positions[:k-1])); err != nil {
			return nil, nil, fmt.Errorf("model: %w", err)
		}
		err := m.progs.run(ctx, progKey{kind: progChain, n: k, top: boolInt(withP)}, func() []kernels.Op { return m.chainOps(k, withP) })
		if err != nil {
			return nil, nil, err
		}
		m.n, m.next = at+k-1, at+k-1
	}
	return m.chain.results(m.be, s.topIDs, s.topP, k, withP)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// chains reports whether a chain of k steps runs on the draft's device:
// its embedding and head there, over the target's vocabulary (a d2t map
// would need the mapped id on the device), with slots for k ids.
func (m *Eagle3) chains(k int) bool {
	s := m.s
	switch {
	case m.d2t != nil || !m.w.tokEmbd.Valid() || !m.w.output.Valid():
		return false
	case m.far != nil && (m.far.embed || len(m.far.heads) > 0):
		return false
	case !s.topIDs.Valid() || !s.topP.Valid() || !s.logits.Valid():
		return false
	}
	return k <= s.pos.Cols && int64(k) <= int64(s.topIDs.Rows)*int64(s.topIDs.Cols)
}

// picksOnDevice reports whether the draft's own head runs on its device
// with slots for an argmax and its probability.
func (m *Eagle3) picksOnDevice() bool {
	s := m.s
	switch {
	case !m.w.output.Valid() || m.far != nil && len(m.far.heads) > 0:
		return false
	case !s.topIDs.Valid() || !s.topP.Valid() || !s.logits.Valid():
		return false
	}
	return true
}

// chainMapped is Chain for a draft whose head covers a reduced vocabulary
// (d2t): each pass takes its argmax on the device, over the draft's rows,
// and only the id (and its probability) crosses to the host, which maps
// it to a target id and sends that as the next step's token. The host
// path would read the draft's logits and scan the target's whole
// vocabulary every step; a real EAGLE-3 draft (32,000 rows for a
// 151,936-token target) spends most of a step's time there. The argmax's
// probability is the softmax over the draft's rows, which is the one over
// the target's ids: the ids outside d2t get none.
func (m *Eagle3) chainMapped(ctx context.Context, tokens []int32, pos, k int, pMin float64) ([]int32, []float32, error) {
	s, withP := m.s, pMin > 0
	m.chain.grow(k)
	ids, probs := m.chain.ids[:k], m.chain.probs[:k]
	pick := pickOps(s.logits, s.topIDs, s.topP, 0, withP)
	first := func(b int) []kernels.Op { return append(m.bodyOps(b), pick...) }
	step := func(b int) []kernels.Op { return append(m.stepOps(b), pick...) }
	err := m.run(ctx, tokens, pos, progKey{kind: progDraft, block: 1, top: boolInt(withP)}, first)
	at := pos + len(tokens)
	var one [1]int32
	var p [1]float32
	for i := 0; ; i++ {
		if err != nil {
			return nil, nil, err
		}
		if err := m.be.Read(kernels.I32Bytes(one[:]), packed(s.topIDs, 1, 1)); err != nil {
			return nil, nil, fmt.Errorf("model: drafted id: %w", err)
		}
		if one[0] < 0 || int(one[0]) >= len(m.d2t) {
			return nil, nil, fmt.Errorf("model: drafted id %d of a %d-token draft vocabulary: %w", one[0], len(m.d2t), ErrShape)
		}
		ids[i] = m.d2t[one[0]]
		if withP {
			if err := m.be.Read(kernels.F32Bytes(p[:]), packed(s.topP, 1, 1)); err != nil {
				return nil, nil, fmt.Errorf("model: drafted probability: %w", err)
			}
			probs[i] = p[0]
		}
		if i == k-1 || withP && float64(p[0]) < pMin {
			ids, probs = ids[:i+1], probs[:i+1]
			break
		}
		err = m.run(ctx, []int32{ids[i]}, at+i, progKey{kind: progStep, block: 1, top: boolInt(withP)}, step)
	}
	if !withP {
		probs = nil
	}
	return ids, probs, nil
}

// chainOps are a chain's steps 2..k, each a Step on the id in the slot
// before and the output the step before left in own.
func (m *Eagle3) chainOps(k int, withP bool) []kernels.Op {
	s := m.s
	var ops []kernels.Op
	for i := 1; i < k; i++ {
		prev := packed(s.topIDs, 1, i).ColSlice(i-1, 1)
		ops = append(ops, kernels.GetRows{Dst: s.emb.RowSlice(0, 1), Src: m.w.tokEmbd, Idx: prev})
		ops = append(ops, m.layerOpsAt(1, m.own, s.pos.ColSlice(i-1, 1))...)
		ops = append(ops, kernels.Copy{Dst: m.own, Src: s.x.Row(0)})
		ops = append(ops, m.headOps(1)...)
		ops = append(ops, pickOps(s.logits, s.topIDs, s.topP, i, withP)...)
	}
	return ops
}

// chainHost is Chain through the host: ForwardTop, then StepTop.
func (m *Eagle3) chainHost(ctx context.Context, tokens []int32, pos, k int, pMin float64) ([]int32, []float32, error) {
	m.chain.grow(k)
	ids, probs := m.chain.ids[:0], m.chain.probs[:0]
	top, err := m.ForwardTop(ctx, tokens, pos)
	at := pos + len(tokens)
	for i := 0; ; i++ {
		if err != nil {
			return nil, nil, err
		}
		ids, probs = append(ids, top.ID), append(probs, float32(top.P))
		if i == k-1 || pMin > 0 && top.P < pMin {
			break
		}
		top, err = m.StepTop(ctx, top.ID, at+i)
	}
	if pMin <= 0 {
		probs = nil
	}
	return ids, probs, nil
}
