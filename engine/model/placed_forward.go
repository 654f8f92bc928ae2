package model

import (
	"context"
	"fmt"
	"math"

	"github.com/tandem-run/tandem/kernels"
)

// progKey names one compiled program of a part.
type progKey struct {
	kind  progKind
	block int
	n     int // rows
}

type progKind uint8

const (
	progEmbed  progKind = iota // token lookup
	progStage                  // layer split: all of the part's blocks
	progAttn                   // tensor split: a block's attention, partial output
	progFFN                    // tensor split: a block's FFN, partial output
	progFinish                 // tensor split: the last block's sum into the stream
	progReduce                 // tensor split: a share added to the sum received
	progHead                   // output norm and the part's head rows
)

// Forward is Model.Forward on a placed model: it runs tokens at positions
// pos, pos+1, ... and returns the logits of rows out (nil: the last row).
// A vocabulary-split head's shards are gathered into whole rows.
func (m *Placed) Forward(ctx context.Context, tokens []int32, pos int, out []int) ([]float32, error) {
	n := len(tokens)
	if out == nil {
		out = []int{n - 1}
	}
	if err := checkForward(tokens, pos, out, m.n, m.ctx, m.params.Vocab); err != nil {
		return nil, err
	}
	vocab := m.params.Vocab
	if need := len(out) * vocab; cap(m.logits) < need {
		m.logits = make([]float32, need)
	}
	logits := m.logits[:len(out)*vocab]
	m.n = pos
	done := 0
	for c := 0; c < n; c += m.batch {
		b := min(m.batch, n-c)
		if err := m.body(ctx, tokens[c:c+b], pos+c); err != nil {
			return nil, err
		}
		m.n = pos + c + b
		if err := m.handOver(pos+c, b); err != nil {
			return nil, err
		}
		k := 0
		for done+k < len(out) && out[done+k] < c+b { // at most b rows, so one head pass
			m.outIdx[k] = int32(out[done+k] - c)
			k++
		}
		if k > 0 {
			if err := m.runHead(ctx, k, logits[done*vocab:(done+k)*vocab]); err != nil {
				return nil, err
			}
			done += k
		}
	}
	return logits, nil
}

// body embeds b tokens and runs every block on its devices.
func (m *Placed) body(ctx context.Context, tokens []int32, pos int) error {
	b := len(tokens)
	copy(m.tokens, tokens)
	for i := range b {
		m.positions[i] = int32(pos + i)
	}
	for _, pt := range m.parts {
		if err := pt.be.Write(pt.s.pos.ColSlice(0, b), kernels.I32Bytes(m.positions[:b])); err != nil {
			return fmt.Errorf("model: %w", err)
		}
	}
	local, err := m.embed(ctx, b)
	if err != nil {
		return err
	}
	if m.layered {
		return m.layerBody(ctx, b, local)
	}
	return m.tensorBody(ctx, b, local)
}

// embed looks the tokens up where the embedding is. With one embedding
// device it returns that part, whose x holds the result; with the
// vocabulary split, every shard looks up all tokens (ids outside its rows
// clamped to its first row) and the host keeps each token's own row,
// leaving the stream in hostX and returning nil.
func (m *Placed) embed(ctx context.Context, b int) (*part, error) {
	for _, h := range m.embd {
		pt := m.byDev[h.Device]
		ids := m.outIdx[:b] // free until the head runs
		for i, t := range m.tokens[:b] {
			ids[i] = 0
			if int64(t) >= h.Rows.Lo && int64(t) < h.Rows.Hi {
				ids[i] = t - int32(h.Rows.Lo)
			}
		}
		if err := pt.be.Write(pt.s.tokens.ColSlice(0, b), kernels.I32Bytes(ids)); err != nil {
			return nil, fmt.Errorf("model: %w", err)
		}
		dst := pt.embedDst(b)
		err := pt.run(ctx, progKey{progEmbed, 0, b}, func() []kernels.Op {
			return []kernels.Op{kernels.GetRows{Dst: dst, Src: pt.tokEmbd, Idx: pt.s.tokens.ColSlice(0, b)}}
		})
		if err != nil {
			return nil, err
		}
		if len(m.embd) == 1 {
			return pt, nil
		}
		if err := pt.be.Read(kernels.F32Bytes(m.partial[:b*m.params.Embd]), dst); err != nil {
			return nil, fmt.Errorf("model: embedding: %w", err)
		}
		e := m.params.Embd
		for i, t := range m.tokens[:b] {
			if int64(t) >= h.Rows.Lo && int64(t) < h.Rows.Hi {
				copy(m.hostX[i*e:(i+1)*e], m.partial[i*e:(i+1)*e])
			}
		}
	}
	return nil, nil
}

// embedDst is where a part's token lookup lands: its stream, or its normed
// input buffer on a part without blocks.
func (pt *part) embedDst(b int) kernels.Tensor {
	if pt.s.x.Valid() {
		return pt.s.x.RowSlice(0, b)
	}
	return pt.s.xn.RowSlice(0, b)
}

// layerBody runs each device's blocks in pipeline order, the stream
// crossing to the next device after each.
func (m *Placed) layerBody(ctx context.Context, b int, local *part) error {
	var prev *part
	for _, pt := range m.parts {
		if !pt.hasBlocks() {
			continue
		}
		from := prev
		if from == nil {
			from = local
		}
		received := from != pt
		if received {
			var err error
			switch {
			case from == nil: // a vocabulary-split embedding left the stream in hostX
				err = m.send(pt, b)
			case from == prev:
				err = m.spread(from, from.s.x.RowSlice(0, b), []*part{pt})
			default:
				err = m.spread(from, from.embedDst(b), []*part{pt})
			}
			if err != nil {
				return err
			}
		}
		// A captured block starts a program of its own, its input read
		// first: from the receive buffer when it has just arrived.
		for i, seg := range m.segments(pt) {
			first := i == 0 && received
			in := pt.s.x.RowSlice(0, b)
			if first {
				in = pt.s.recv.RowSlice(0, b)
			}
			if err := m.keepFrom(pt, seg[0], in); err != nil {
				return err
			}
			err := pt.run(ctx, progKey{progStage, seg[0], b}, func() []kernels.Op {
				var ops []kernels.Op
				if first {
					ops = append(ops, kernels.Copy{Dst: pt.s.x.RowSlice(0, b), Src: pt.s.recv.RowSlice(0, b)})
				}
				for l := seg[0]; l < seg[1]; l++ {
					x, out := pt.s.x.RowSlice(0, b), pt.s.xn.RowSlice(0, b)
					ops = append(ops, m.attnOps(pt, l, b)...)
					ops = append(ops, kernels.Add{Dst: x, A: x, B: out})
					ops = append(ops, m.ffnOps(pt, l, b)...)
					ops = append(ops, kernels.Add{Dst: x, A: x, B: out})
				}
				return ops
			})
			if err != nil {
				return err
			}
		}
		prev = pt
	}
	if err := m.keepFrom(prev, m.params.Layers, prev.s.x.RowSlice(0, b)); err != nil {
		return err
	}
	// The stream goes on to head devices other than the last block's.
	var to []*part
	for _, pt := range m.parts {
		if pt != prev && pt.headRows.Len() > 0 {
			to = append(to, pt)
		}
	}
	return m.spread(prev, prev.s.x.RowSlice(0, b), to)
}

// tensorBody runs every block on all devices at once: each computes its
// heads' and FFN rows' share of the block's output, and the shares are
// summed in device order, so every run adds alike (exchange.go), and the
// sum reaches every device, which adds it to its copy of the stream.
func (m *Placed) tensorBody(ctx context.Context, b int, local *part) error {
	if local == nil {
		if err := m.sendAll(b, func(*part) bool { return true }); err != nil {
			return err
		}
	} else {
		var to []*part
		for _, pt := range m.parts {
			if pt != local {
				to = append(to, pt)
			}
		}
		if err := m.spread(local, local.embedDst(b), to); err != nil {
			return err
		}
	}
	for l := range m.params.Layers {
		for _, kind := range []progKind{progAttn, progFFN} {
			for _, pt := range m.parts {
				err := pt.run(ctx, progKey{kind, l, b}, func() []kernels.Op {
					x, recv := pt.s.x.RowSlice(0, b), pt.s.recv.RowSlice(0, b)
					var ops []kernels.Op
					switch {
					case kind == progAttn && l == 0 && pt != local:
						ops = append(ops, kernels.Copy{Dst: x, Src: recv})
					case kind == progFFN || l > 0:
						ops = append(ops, kernels.Add{Dst: x, A: x, B: recv})
					}
					if kind == progAttn && pt.local[l].heads > 0 {
						return append(ops, m.attnOps(pt, l, b)...)
					}
					if kind == progFFN && pt.local[l].ffn > 0 {
						return append(ops, m.ffnOps(pt, l, b)...)
					}
					return ops
				})
				if err != nil {
					return err
				}
			}
			if kind == progAttn {
				// Every device's stream is block l's input now.
				if err := m.keepFrom(m.parts[0], l, m.parts[0].s.x.RowSlice(0, b)); err != nil {
					return err
				}
			}
			if err := m.sumShares(ctx, b, l, kind); err != nil {
				return err
			}
		}
	}
	for _, h := range m.head {
		pt := m.byDev[h.Device]
		err := pt.run(ctx, progKey{progFinish, 0, b}, func() []kernels.Op {
			x := pt.s.x.RowSlice(0, b)
			return []kernels.Op{kernels.Add{Dst: x, A: x, B: pt.s.recv.RowSlice(0, b)}}
		})
		if err != nil {
			return err
		}
	}
	pt := m.byDev[m.head[0].Device]
	return m.keepFrom(pt, m.params.Layers, pt.s.x.RowSlice(0, b))
}

// runHead computes logits for the first k entries of m.outIdx into dst,
// each head device its vocabulary rows.
func (m *Placed) runHead(ctx context.Context, k int, dst []float32) error {
	vocab := m.params.Vocab
	for _, h := range m.head {
		pt := m.byDev[h.Device]
		src := pt.s.x
		if m.layered && !m.lastStage(pt) {
			src = pt.s.recv
		}
		if err := pt.be.Write(pt.s.outIdx.ColSlice(0, k), kernels.I32Bytes(m.outIdx[:k])); err != nil {
			return fmt.Errorf("model: %w", err)
		}
		err := pt.run(ctx, progKey{progHead, 0, k}, func() []kernels.Op {
			sel := pt.s.xn.RowSlice(0, k)
			return []kernels.Op{
				kernels.GetRows{Dst: sel, Src: src, Idx: pt.s.outIdx.ColSlice(0, k)},
				kernels.RMSNorm{Dst: sel, X: sel, W: pt.outNorm, Eps: m.params.NormEps},
				kernels.MatMul{Dst: pt.s.logits.RowSlice(0, k), W: pt.output, X: sel},
			}
		})
		if err != nil {
			return err
		}
		w := int(h.Rows.Len())
		if w == vocab {
			if err := pt.be.Read(kernels.F32Bytes(dst[:k*vocab]), pt.s.logits.RowSlice(0, k)); err != nil {
				return fmt.Errorf("model: logits: %w", err)
			}
			continue
		}
		rows := m.rows[:k*w]
		if err := pt.be.Read(kernels.F32Bytes(rows), pt.s.logits.RowSlice(0, k)); err != nil {
			return fmt.Errorf("model: logits: %w", err)
		}
		for r := range k {
			copy(dst[r*vocab+int(h.Rows.Lo):r*vocab+int(h.Rows.Hi)], rows[r*w:(r+1)*w])
		}
	}
	return nil
}

// lastStage reports whether pt runs the last block of a layer split.
func (m *Placed) lastStage(pt *part) bool {
	return pt.local[len(pt.local)-1].present()
}

func (pt *part) hasBlocks() bool {
	for _, l := range pt.local {
		if l.present() {
			return true
		}
	}
	return false
}

// attnOps is block l's attention on pt's heads for b tokens: the output
// (pt's share of it, under a tensor split) ends in xn.
func (m *Placed) attnOps(pt *part, l, b int) []kernels.Op {
	p, s, w, lb := m.params, pt.s, pt.blk[l], pt.local[l]
	pos := s.pos.ColSlice(0, b)
	x, h := s.x.RowSlice(0, b), s.xn.RowSlice(0, b)
	q, attn := packed(s.q, b, lb.heads*p.HeadDim), packed(s.attn, b, lb.heads*p.HeadDim)
	k, v := packed(s.k, b, lb.kvHeads*p.HeadDim), packed(s.v, b, lb.kvHeads*p.HeadDim)
	rope := func(t kernels.Tensor) kernels.Rope {
		return kernels.Rope{Dst: t, X: t, Pos: pos, HeadDim: p.HeadDim, Dims: p.RopeDims,
			Base: p.RopeBase, Scale: p.RopeScale, Neox: p.arch.neox, Factors: pt.ropeFreqs}
	}
	ops := []kernels.Op{
		kernels.RMSNorm{Dst: h, X: x, W: w.attnNorm, Eps: p.NormEps},
		kernels.MatMul{Dst: q, W: w.wq, X: h},
		kernels.MatMul{Dst: k, W: w.wk, X: h},
		kernels.MatMul{Dst: v, W: w.wv, X: h},
	}
	for _, bias := range []struct{ t, b kernels.Tensor }{{q, w.bq}, {k, w.bk}, {v, w.bv}} {
		if bias.b.Valid() {
			ops = append(ops, kernels.Add{Dst: bias.t, A: bias.t, B: bias.b})
		}
	}
	if p.arch.qkNorm {
		qh, kh := q.Reshape(b*lb.heads, p.HeadDim), k.Reshape(b*lb.kvHeads, p.HeadDim)
		ops = append(ops,
			kernels.RMSNorm{Dst: qh, X: qh, W: w.qNorm, Eps: p.NormEps},
			kernels.RMSNorm{Dst: kh, X: kh, W: w.kNorm, Eps: p.NormEps},
		)
	}
	return append(ops,
		rope(q), rope(k),
		kernels.SetRows{Dst: pt.kvK[l], Src: k, Idx: pos},
		kernels.SetRows{Dst: pt.kvV[l], Src: v, Idx: pos},
		kernels.Attention{Dst: attn, Q: q, K: pt.kvK[l], V: pt.kvV[l], Pos: pos,
			NHead: lb.heads, NKVHead: lb.kvHeads, HeadDim: p.HeadDim,
			Scale: float32(1 / math.Sqrt(float64(p.HeadDim)))},
		kernels.MatMul{Dst: h, W: w.wo, X: attn},
	)
}

// ffnOps is block l's SwiGLU FFN on pt's rows for b tokens: the output (or
// pt's share) ends in xn.
func (m *Placed) ffnOps(pt *part, l, b int) []kernels.Op {
	s, w, lb := pt.s, pt.blk[l], pt.local[l]
	x, h := s.x.RowSlice(0, b), s.xn.RowSlice(0, b)
	gate, up := packed(s.gate, b, lb.ffn), packed(s.up, b, lb.ffn)
	return []kernels.Op{
		kernels.RMSNorm{Dst: h, X: x, W: w.ffnNorm, Eps: m.params.NormEps},
		kernels.MatMul{Dst: gate, W: w.gate, X: h},
		kernels.MatMul{Dst: up, W: w.up, X: h},
		kernels.SwiGLU{Dst: gate, Gate: gate, Up: up},
		kernels.MatMul{Dst: h, W: w.down, X: gate},
	}
}

// packed is a [rows, cols] view at the start of t's buffer space: blocks
// with fewer local heads or FFN rows than the widest use a prefix of it.
func packed(t kernels.Tensor, rows, cols int) kernels.Tensor {
	return kernels.NewTensor(t.Buf, t.Type, rows, cols, t.Off)
}

// run runs pt's program key, compiling it with ops on first use.
func (pt *part) run(ctx context.Context, key progKey, ops func() []kernels.Op) error {
	prog, ok := pt.progs[key]
	if !ok {
		list := ops()
		if len(list) == 0 {
			return nil
		}
		var err error
		if prog, err = pt.be.Compile(list); err != nil {
			return fmt.Errorf("model: device %d: compile for %d rows: %w", pt.dev, key.n, err)
		}
		pt.evict(key.n)
		pt.progs[key] = prog
	}
	if err := prog.Run(ctx); err != nil {
		return fmt.Errorf("model: device %d: %w", pt.dev, err)
	}
	return nil
}

// evict bounds the program cache as Model.program does: when more than
// maxPrograms batch sizes are cached, the programs of one size other than
// 1 (decode) and n go.
func (pt *part) evict(n int) {
	sizes := map[int]bool{}
	for k := range pt.progs {
		sizes[k.n] = true
	}
	if len(sizes) < maxPrograms {
		return
	}
	for size := range sizes {
		if size == 1 || size == n {
			continue
		}
		for k, p := range pt.progs {
			if k.n == size {
				_ = p.Close()
				delete(pt.progs, k)
			}
		}
		return
	}
}
