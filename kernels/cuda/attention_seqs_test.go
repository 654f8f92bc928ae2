package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// TestAttentionSeqs: one Attention over the rows of several sequences,
// each in its own slot of the caches (attention_seqs_<type>), is within
// the decode tolerance of the CPU's, and on the GPU has the bits of the
// sequences' own attention ops on their slots, at random positions.
func TestAttentionSeqs(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct {
		kv         quant.Type
		headDim    int
		lens       []int // each sequence's rows; sequence i is in slot i
		nHead, nKV int
		ctx        int
	}{
		{quant.F16, 64, []int{1, 1, 1, 1, 1, 1, 1, 1}, 8, 2, 300},
		{quant.F32, 128, []int{1, 1, 1, 1, 1, 1, 1, 1}, 8, 8, 300},
		{quant.F16, 128, []int{3, 1, 4, 1, 2, 5}, 16, 8, 200},
		{quant.F32, 256, []int{2, 1}, 8, 2, 100},
		{quant.F16, 32, []int{1, 15}, 4, 1, 1024},
	} {
		t.Run(fmt.Sprintf("%v/hd%d/seqs%v/h%d-%d/ctx%d", c.kv, c.headDim, c.lens, c.nHead, c.nKV, c.ctx), func(t *testing.T) {
			h.t = t
			slots, b := len(c.lens), 0
			for _, n := range c.lens {
				b += n
			}
			width := c.nHead * c.headDim
			q := h.random(quant.F32, b, width)
			k := h.random(c.kv, slots*c.ctx, c.nKV*c.headDim)
			v := h.random(c.kv, slots*c.ctx, c.nKV*c.headDim)
			// Each round draws each sequence's first position; rows follow it.
			first := make([]int, slots)
			pos := h.ints(b, func(i int) int32 {
				s, r := seqOf(c.lens, i)
				if r == 0 {
					first[s] = h.rng.IntN(c.ctx - c.lens[s] + 1)
				}
				return int32(first[s] + r)
			})
			rows := h.ints(b, func(i int) int32 {
				s, r := seqOf(c.lens, i)
				return int32(s*c.ctx + first[s] + r)
			})
			y, alone := h.output(quant.F32, b, width), h.output(quant.F32, b, width)
			scale := float32(1 / math.Sqrt(float64(c.headDim)))
			h.check(func(side func(*pair) kernels.Tensor) []kernels.Op {
				ops := []kernels.Op{kernels.Attention{Dst: side(y), Q: side(q), K: side(k), V: side(v), Pos: side(pos),
					Rows: side(rows), Ctx: c.ctx, NHead: c.nHead, NKVHead: c.nKV, HeadDim: c.headDim, Scale: scale}}
				row := 0
				for s, n := range c.lens {
					ops = append(ops, kernels.Attention{Dst: side(alone).RowSlice(row, n), Q: side(q).RowSlice(row, n),
						K: side(k).RowSlice(s*c.ctx, c.ctx), V: side(v).RowSlice(s*c.ctx, c.ctx), Pos: side(pos).ColSlice(row, n),
						NHead: c.nHead, NKVHead: c.nKV, HeadDim: c.headDim, Scale: scale})
					row += n
				}
				return ops
			}, []*pair{q, k, v, pos, rows, y, alone}, func(int) {
				h.expectClose(y, attentionTolerance(c.kv), "attention of several sequences")
				got, want := h.read(h.gpu, y.g), h.read(h.gpu, alone.g)
				for i := range got {
					if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
						t.Fatalf("row %d element %d: %v, the sequence alone %v", i/width, i%width, got[i], want[i])
					}
				}
			})
		})
	}
}

// Attention of several sequences followed by an integer product of its
// output quantizes the output in its launch, as decode's does; both
// results must match the CPU's.
func TestAttentionSeqsQuantized(t *testing.T) {
	h := newHarness(t)
	const seqs, nHead, nKV, hd, ctx = 8, 8, 2, 64, 128
	q := h.random(quant.F32, seqs, nHead*hd)
	k := h.random(quant.F16, seqs*ctx, nKV*hd)
	v := h.random(quant.F16, seqs*ctx, nKV*hd)
	first := make([]int32, seqs)
	pos := h.ints(seqs, func(i int) int32 {
		first[i] = int32(h.rng.IntN(ctx))
		return first[i]
	})
	rows := h.ints(seqs, func(i int) int32 { return int32(i*ctx) + first[i] })
	y := h.output(quant.F32, seqs, nHead*hd)
	wo := h.random(quant.Q8_0, 256, nHead*hd)
	out := h.output(quant.F32, seqs, 256)
	h.check(func(s func(*pair) kernels.Tensor) []kernels.Op {
		return []kernels.Op{
			kernels.Attention{Dst: s(y), Q: s(q), K: s(k), V: s(v), Pos: s(pos), Rows: s(rows), Ctx: ctx,
				NHead: nHead, NKVHead: nKV, HeadDim: hd, Scale: 0.125},
			kernels.MatMul{Dst: s(out), W: s(wo), X: s(y)},
		}
	}, []*pair{q, k, v, pos, rows, y, wo, out}, func(int) {
		h.expectClose(y, attentionTolerance(quant.F16), "attention")
		h.expectClose(out, matMulTolerance(quant.Q8_0, seqs), "o-projection")
	})
}

// seqOf is the sequence of row i of sequences of lens rows, and the row's
// index in it.
func seqOf(lens []int, i int) (s, r int) {
	for s, n := range lens {
		if i < n {
			return s, i
		}
		i -= n
	}
	return -1, -1
}

// A --parallel decode step's attention (8 sequences of one row, the
// demo target's heads, F16 caches of 1024 rows a slot, 500 keys each):
// one attention_seqs launch against one decode launch a sequence;
// bytes = the K/V rows read.
func BenchmarkAttentionSeqs(b *testing.B) {
	gpu := openGPU(b)
	lbl := kernels.Label{Owner: "bench", Cat: kernels.KV}
	const seqs, nHead, nKV, hd, ctxLen, keys = 8, 8, 2, 64, 1024, 500
	alloc := func(t quant.Type, rows, cols int) kernels.Tensor { return deviceTensor(b, gpu, lbl, t, rows, cols) }
	k, v := alloc(quant.F16, seqs*ctxLen, nKV*hd), alloc(quant.F16, seqs*ctxLen, nKV*hd)
	q, y := alloc(quant.F32, seqs, nHead*hd), alloc(quant.F32, seqs, nHead*hd)
	pos, rows := alloc(quant.I32, 1, seqs), alloc(quant.I32, 1, seqs)
	benchFill(b, gpu, rand.New(rand.NewPCG(6, 6)), 1, k, v, q)
	p, r := make([]int32, seqs), make([]int32, seqs)
	for i := range p {
		p[i], r[i] = keys-1, int32(i*ctxLen+keys-1)
	}
	if err := gpu.Write(pos, kernels.I32Bytes(p)); err != nil {
		b.Fatal(err)
	}
	if err := gpu.Write(rows, kernels.I32Bytes(r)); err != nil {
		b.Fatal(err)
	}
	bytes := int64(seqs) * 2 * 2 * keys * nKV * hd
	b.Run("one", func(b *testing.B) {
		op := kernels.Attention{Dst: y, Q: q, K: k, V: v, Pos: pos, Rows: rows, Ctx: ctxLen,
			NHead: nHead, NKVHead: nKV, HeadDim: hd, Scale: 0.125}
		benchProgram(b, gpu, []kernels.Op{op}, bytes)
	})
	b.Run("per-sequence", func(b *testing.B) {
		var ops []kernels.Op
		for s := range seqs {
			ops = append(ops, kernels.Attention{Dst: y.RowSlice(s, 1), Q: q.RowSlice(s, 1),
				K: k.RowSlice(s*ctxLen, ctxLen), V: v.RowSlice(s*ctxLen, ctxLen), Pos: pos.ColSlice(s, 1),
				NHead: nHead, NKVHead: nKV, HeadDim: hd, Scale: 0.125})
		}
		benchProgram(b, gpu, ops, bytes)
	})
}
