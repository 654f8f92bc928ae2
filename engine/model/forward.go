package model

import (
	"context"
	"fmt"
	"math"

	"github.com/tandem-run/tandem/kernels"
)

// Forward runs tokens at positions pos, pos+1, ... and returns the logits of
// the rows listed in out (indices into tokens, ascending) as
// len(out)*Vocab floats, row after row; a nil out means the last row only.
// Positions from pos on are overwritten, so pos may be below Len()
// (speculative rollback) but not above it. Inputs longer than the batch run
// in chunks. The returned slice is reused by the next call.
func (m *Model) Forward(ctx context.Context, tokens []int32, pos int, out []int) ([]float32, error) {
	out = m.outputs(tokens, out)
	vocab := m.params.Vocab
	if need := len(out) * vocab; cap(m.logits) < need {
		m.logits = make([]float32, need)
	}
	logits := m.logits[:len(out)*vocab]
	err := m.forward(ctx, tokens, pos, out, func(done, k int) error {
		if err := m.runHead(ctx, m.head, k, m.headOps); err != nil {
			return err
		}
		if err := m.be.Read(kernels.F32Bytes(logits[done*vocab:(done+k)*vocab]), m.s.logits.RowSlice(0, k)); err != nil {
			return fmt.Errorf("model: logits: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return logits, nil
}

// ForwardArgmax is Forward for greedy decoding: it returns the index of the
// largest logit of each row in out (the lowest on ties), found where the
// head runs, so that only the token ids cross to the host, not the
// logits. The returned slice is reused by the next call.
func (m *Model) ForwardArgmax(ctx context.Context, tokens []int32, pos int, out []int) ([]int32, error) {
	out = m.outputs(tokens, out)
	if cap(m.ids) < len(out) {
		m.ids = make([]int32, len(out))
	}
	ids := m.ids[:len(out)]
	err := m.forward(ctx, tokens, pos, out, func(done, k int) error {
		if err := m.runHead(ctx, m.argmax, k, m.argmaxOps); err != nil {
			return err
		}
		if err := m.be.Read(kernels.I32Bytes(ids[done:done+k]), m.s.ids.ColSlice(0, k)); err != nil {
			return fmt.Errorf("model: token ids: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// outputs is out, or the last row of tokens when out is nil.
func (m *Model) outputs(tokens []int32, out []int) []int {
	if out != nil {
		return out
	}
	m.last[0] = len(tokens) - 1
	return m.last[:]
}

// forward runs the body over tokens in chunks of the batch and, after each
// chunk, calls head(done, k) for the next k rows of out that the chunk
// holds, in groups of at most Options.Outputs, with their indices in the
// chunk staged in outIdx; done counts the rows of out handled before.
func (m *Model) forward(ctx context.Context, tokens []int32, pos int, out []int, head func(done, k int) error) error {
	n := len(tokens)
	if err := checkForward(tokens, pos, out, m.kv.n, m.opts.Context, m.params.Vocab); err != nil {
		return err
	}
	m.kv.n = pos
	done := 0 // rows of out finished
	for c := 0; c < n; c += m.opts.Batch {
		b := min(m.opts.Batch, n-c)
		if err := m.runBody(ctx, tokens[c:c+b], pos+c); err != nil {
			return err
		}
		m.kv.n = pos + c + b
		if m.opts.OnCapture != nil {
			if err := m.opts.OnCapture(pos+c, m.s.hidden.RowSlice(0, b)); err != nil {
				return fmt.Errorf("model: capture: %w", err)
			}
		}
		for done < len(out) && out[done] < c+b {
			k := 0
			for done+k < len(out) && out[done+k] < c+b && k < m.opts.Outputs {
				m.outIdx[k] = int32(out[done+k] - c)
				k++
			}
			if err := head(done, k); err != nil {
				return err
			}
			done += k
		}
	}
	return nil
}

// checkForward checks a Forward call's arguments against a model with
// cached positions in its cache, a context of ctx and a vocabulary of vocab:
// tokens to run at pos, and out, the ascending rows whose logits are wanted.
func checkForward(tokens []int32, pos int, out []int, cached, ctx, vocab int) error {
	n := len(tokens)
	switch {
	case n == 0:
		return fmt.Errorf("model: forward: no tokens: %w", ErrBadParam)
	case pos < 0 || pos > cached:
		return fmt.Errorf("model: forward at %d with %d cached: %w", pos, cached, ErrPosition)
	case pos+n > ctx:
		return fmt.Errorf("model: %d tokens at %d in a %d-token context: %w", n, pos, ctx, ErrContext)
	}
	for i, t := range tokens {
		if t < 0 || int(t) >= vocab {
			return fmt.Errorf("model: token %d at %d: %w (vocabulary %d)", t, i, ErrToken, vocab)
		}
	}
	for i, r := range out {
		if r < 0 || r >= n || i > 0 && r <= out[i-1] {
			return fmt.Errorf("model: output rows %v of %d tokens: %w", out, n, ErrBadParam)
		}
	}
	return nil
}

// runBody embeds b tokens and runs every block, leaving the final hidden
// states in s.x and the keys and values in the cache.
func (m *Model) runBody(ctx context.Context, tokens []int32, pos int) error {
	b := len(tokens)
	copy(m.tokens, tokens)
	for i := range b {
		m.positions[i] = int32(pos + i)
	}
	if err := m.be.Write(m.s.tokens.ColSlice(0, b), kernels.I32Bytes(m.tokens[:b])); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	if err := m.be.Write(m.s.pos.ColSlice(0, b), kernels.I32Bytes(m.positions[:b])); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	prog, err := m.program(m.body, b, m.bodyOps)
	if err != nil {
		return err
	}
	if err := prog.Run(ctx); err != nil {
		return fmt.Errorf("model: forward: %w", err)
	}
	return nil
}

// runHead runs the head program for the first k entries of m.outIdx,
// compiled with ops into cache.
func (m *Model) runHead(ctx context.Context, cache map[int]kernels.Program, k int, ops func(int) []kernels.Op) error {
	if err := m.be.Write(m.s.outIdx.ColSlice(0, k), kernels.I32Bytes(m.outIdx[:k])); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	prog, err := m.program(cache, k, ops)
	if err != nil {
		return err
	}
	if err := prog.Run(ctx); err != nil {
		return fmt.Errorf("model: head: %w", err)
	}
	return nil
}

// maxPrograms bounds each program cache; prompts of many lengths would
// otherwise keep one compiled program per length.
const maxPrograms = 16

// program returns the compiled program for size n from cache, building it
// with ops when missing.
func (m *Model) program(cache map[int]kernels.Program, n int, ops func(int) []kernels.Op) (kernels.Program, error) {
	if p, ok := cache[n]; ok {
		return p, nil
	}
	p, err := m.be.Compile(ops(n))
	if err != nil {
		return nil, fmt.Errorf("model: compile for %d rows: %w", n, err)
	}
	if len(cache) >= maxPrograms {
		for k, old := range cache {
			if k != 1 { // keep the decode program
				_ = old.Close()
				delete(cache, k)
				break
			}
		}
	}
	cache[n] = p
	return p, nil
}

// bodyOps is the decoder for a batch of b tokens: embedding, then per block
// pre-norm attention and a pre-norm SwiGLU FFN, each added to the residual.
func (m *Model) bodyOps(b int) []kernels.Op {
	p, s, w := m.params, m.s, m.w
	tokens, pos := s.tokens.ColSlice(0, b), s.pos.ColSlice(0, b)
	x, h, tmp := s.x.RowSlice(0, b), s.h.RowSlice(0, b), s.tmp.RowSlice(0, b)
	q, k, v, attn := s.q.RowSlice(0, b), s.k.RowSlice(0, b), s.v.RowSlice(0, b), s.attn.RowSlice(0, b)
	gate, up := s.gate.RowSlice(0, b), s.up.RowSlice(0, b)
	rope := func(t kernels.Tensor) kernels.Rope {
		return kernels.Rope{Dst: t, X: t, Pos: pos, HeadDim: p.HeadDim, Dims: p.RopeDims,
			Base: p.RopeBase, Scale: p.RopeScale, Neox: p.arch.neox, Factors: w.ropeFreqs}
	}

	ops := []kernels.Op{kernels.GetRows{Dst: x, Src: w.tokEmbd, Idx: tokens}}
	for l, blk := range w.blocks {
		ops = append(ops, m.captureOps(l, x)...)

		// attention
		ops = append(ops,
			kernels.RMSNorm{Dst: h, X: x, W: blk.attnNorm, Eps: p.NormEps},
			kernels.MatMul{Dst: q, W: blk.wq, X: h},
			kernels.MatMul{Dst: k, W: blk.wk, X: h},
			kernels.MatMul{Dst: v, W: blk.wv, X: h},
		)
		for _, bias := range []struct{ t, b kernels.Tensor }{{q, blk.bq}, {k, blk.bk}, {v, blk.bv}} {
			if bias.b.Valid() {
				ops = append(ops, kernels.Add{Dst: bias.t, A: bias.t, B: bias.b})
			}
		}
		if p.arch.qkNorm {
			qh, kh := q.Reshape(b*p.Heads, p.HeadDim), k.Reshape(b*p.KVHeads, p.HeadDim)
			ops = append(ops,
				kernels.RMSNorm{Dst: qh, X: qh, W: blk.qNorm, Eps: p.NormEps},
				kernels.RMSNorm{Dst: kh, X: kh, W: blk.kNorm, Eps: p.NormEps},
			)
		}
		ops = append(ops,
			rope(q), rope(k),
			kernels.SetRows{Dst: m.kv.k[l], Src: k, Idx: pos},
			kernels.SetRows{Dst: m.kv.v[l], Src: v, Idx: pos},
			kernels.Attention{Dst: attn, Q: q, K: m.kv.k[l], V: m.kv.v[l], Pos: pos,
				NHead: p.Heads, NKVHead: p.KVHeads, HeadDim: p.HeadDim,
				Scale: float32(1 / math.Sqrt(float64(p.HeadDim)))},
			kernels.MatMul{Dst: tmp, W: blk.wo, X: attn},
			kernels.Add{Dst: x, A: x, B: tmp},
		)

		// feed-forward
		ops = append(ops,
			kernels.RMSNorm{Dst: h, X: x, W: blk.ffnNorm, Eps: p.NormEps},
			kernels.MatMul{Dst: gate, W: blk.gate, X: h},
			kernels.MatMul{Dst: up, W: blk.up, X: h},
			kernels.SwiGLU{Dst: gate, Gate: gate, Up: up},
			kernels.MatMul{Dst: tmp, W: blk.down, X: gate},
			kernels.Add{Dst: x, A: x, B: tmp},
		)
	}
	return append(ops, m.captureOps(p.Layers, x)...)
}

// captureOps copies the input of block l into its column slice of the
// capture buffer when l is one of Options.CaptureLayers.
func (m *Model) captureOps(l int, x kernels.Tensor) []kernels.Op {
	var ops []kernels.Op
	for i, c := range m.opts.CaptureLayers {
		if c == l {
			dst := m.s.hidden.RowSlice(0, x.Rows).ColSlice(i*m.params.Embd, m.params.Embd)
			ops = append(ops, kernels.Copy{Dst: dst, Src: x})
		}
	}
	return ops
}

// headOps computes logits for k rows of the last pass: pick the rows,
// apply the output norm, multiply by the head.
func (m *Model) headOps(k int) []kernels.Op {
	s := m.s
	sel := s.sel.RowSlice(0, k)
	return []kernels.Op{
		kernels.GetRows{Dst: sel, Src: s.x, Idx: s.outIdx.ColSlice(0, k)},
		kernels.RMSNorm{Dst: sel, X: sel, W: m.w.outNorm, Eps: m.params.NormEps},
		kernels.MatMul{Dst: s.logits.RowSlice(0, k), W: m.w.output, X: sel},
	}
}

// argmaxOps is headOps followed by each row's argmax into s.ids.
func (m *Model) argmaxOps(k int) []kernels.Op {
	return append(m.headOps(k), kernels.Argmax{Dst: m.s.ids.ColSlice(0, k), X: m.s.logits.RowSlice(0, k)})
}
