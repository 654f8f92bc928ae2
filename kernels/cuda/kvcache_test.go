package cuda

import (
	"fmt"
	"math"
	"testing"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// KV caches of every type, K and V independently (llama.cpp's -ctk and
// -ctv): the writes (set_rows_kv, attn_prep_kv) and the attention that
// reads them (attention_kv.cu), each against the CPU backend.

// kvTolerance is attention's against the CPU: F16 K or V as
// attentionTolerance says; a quantized K multiplies a query quantized as
// the CPU quantizes it (the same bytes), so what is left is the order of
// float sums.
func kvTolerance(k, v quant.Type) float64 {
	if k == quant.F16 || v == quant.F16 {
		return attentionTolerance(quant.F16)
	}
	return 1e-4
}

// expectBytes requires p's two sides to hold the same bytes.
func (h *harness) expectBytes(p *pair, what string) {
	h.t.Helper()
	c, g := make([]byte, p.c.Bytes()), make([]byte, p.g.Bytes())
	if err := h.cpu.Read(c, p.c); err != nil {
		h.t.Fatal(err)
	}
	if err := h.gpu.Read(g, p.g); err != nil {
		h.t.Fatal(err)
	}
	for i := range c {
		if c[i] != g[i] {
			h.t.Errorf("%s: byte %d is %#02x on the GPU, %#02x on the CPU", what, i, g[i], c[i])
			return
		}
	}
}

// kvSource is F32 rows to write into caches: random normal values, and
// in row 0 groups that test the quantizers' corners: all zeros (a -0
// first), a tie of largest magnitudes of both signs (the first one sets
// Q4_0's scale), values at half steps of the Q8_0 and Q4_0 grids (ties
// to even, truncation), and one tiny value among zeros.
func (h *harness) kvSource(rows, cols int) *pair {
	return h.tensor(quant.F32, rows, cols, func() []byte {
		v := make([]float32, rows*cols)
		for i := range v {
			v[i] = float32(h.rng.NormFloat64())
		}
		corner := [][32]float32{}
		var z, tie, half8, half4, tiny [32]float32
		z[0] = float32(math.Copysign(0, -1))
		for j := range tie {
			tie[j] = float32(j%7) * 0.25
		}
		tie[3], tie[9] = -2, 2
		for j := range half8 { // amax 127: x*id = x, halves round to even
			half8[j] = float32(j) - 15.5
		}
		half8[31] = 127
		for j := range half4 { // d = -1 (peak 8 first): x*id + 8.5 on whole and half numbers
			half4[j] = float32(j%17)*0.5 - 4
		}
		half4[0] = 8
		tiny[17] = 1e-30
		corner = append(corner, z, tie, half8, half4, tiny)
		for g, c := range corner {
			if 32*(g+1) <= cols {
				copy(v[32*g:], c[:])
			}
		}
		return append([]byte(nil), kernels.F32Bytes(v)...)
	})
}

// SetRows into Q8_0 and Q4_0 caches stores the bytes kernels/quant's
// quantizers store (the contract of kernels.SetRows); K and V of
// different types share one launch.
func TestSetRowsKV(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct {
		k, v quant.Type
		cols int
	}{
		{quant.Q8_0, quant.Q8_0, 192}, {quant.Q4_0, quant.Q4_0, 192}, {quant.Q8_0, quant.Q4_0, 256},
		{quant.F16, quant.Q8_0, 160}, {quant.Q4_0, quant.F32, 96}, {quant.Q8_0, quant.F16, 32},
	} {
		t.Run(fmt.Sprintf("%v-%v/%d", c.k, c.v, c.cols), func(t *testing.T) {
			h.t = t
			kc, vc := h.random(c.k, 20, c.cols), h.random(c.v, 20, c.cols) // rows not written must survive
			k, v := h.kvSource(3, c.cols), h.kvSource(3, c.cols)
			idx := h.ints(3, func(i int) int32 { return int32(3*i + h.rng.IntN(3)) })
			build := func(s func(*pair) kernels.Tensor) []kernels.Op {
				return []kernels.Op{
					kernels.SetRows{Dst: s(kc), Src: s(k), Idx: s(idx)},
					kernels.SetRows{Dst: s(vc), Src: s(v), Idx: s(idx)},
				}
			}
			h.check(build, []*pair{kc, vc, k, v, idx}, func(int) {
				h.expectBytes(kc, "K cache")
				h.expectBytes(vc, "V cache")
			})
			if n := len(h.launches(build)); n != 1 {
				t.Errorf("K and V writes took %d launches, want 1", n)
			}
		})
	}
}

// kvAttentionCases cover the decode kernel (one row) and the several-row
// one over every pair of types, with heads of 32 to 256 (rows whose
// blocks start at every even offset modulo 16: 34- and 18-byte heads,
// three KV heads of 68 bytes), GQA groups of 1 to 32, row tiles, key
// slices, and the 16-key tiles of F32 heads of 256.
var kvAttentionCases = []struct {
	k, v       quant.Type
	headDim    int
	batch      int
	firstPos   int // -1: every row's position at random
	nHead, nKV int
}{
	{quant.Q8_0, quant.Q8_0, 128, 1, 250, 8, 2}, {quant.Q4_0, quant.Q4_0, 64, 1, 299, 8, 2},
	{quant.Q8_0, quant.Q4_0, 32, 1, 120, 4, 1}, {quant.F16, quant.Q8_0, 128, 1, 17, 16, 8},
	{quant.Q4_0, quant.F16, 256, 1, 280, 8, 2}, {quant.F32, quant.Q8_0, 96, 1, 200, 6, 3},
	{quant.Q8_0, quant.F32, 256, 1, 299, 4, 2}, {quant.F16, quant.F32, 128, 1, 60, 8, 8},
	{quant.F32, quant.F16, 256, 1, 150, 8, 2}, {quant.Q4_0, quant.Q8_0, 160, 1, 0, 8, 2},
	{quant.Q8_0, quant.Q8_0, 64, 1, 299, 3, 3}, {quant.F32, quant.Q4_0, 32, 1, 77, 2, 1},
	{quant.Q8_0, quant.Q8_0, 128, 5, 290, 32, 8}, {quant.Q4_0, quant.Q4_0, 128, 16, 280, 16, 8},
	{quant.Q8_0, quant.Q4_0, 64, 7, 3, 6, 2}, {quant.F16, quant.Q8_0, 64, 33, -1, 8, 2},
	{quant.Q4_0, quant.F16, 256, 4, 250, 8, 2}, {quant.F32, quant.Q4_0, 256, 3, 100, 8, 2},
	{quant.F32, quant.F16, 256, 2, 150, 8, 2}, {quant.Q8_0, quant.F32, 128, 9, 100, 8, 2},
	{quant.Q8_0, quant.Q8_0, 32, 64, 200, 4, 4}, {quant.Q4_0, quant.Q8_0, 96, 130, 0, 8, 2},
	{quant.Q8_0, quant.Q8_0, 128, 70, 150, 64, 2}, {quant.F16, quant.F32, 64, 5, 40, 6, 3},
	{quant.Q4_0, quant.Q4_0, 32, 5, 295, 2, 1},
}

// Attention reads Q8_0 and Q4_0 caches (and every mix of cache types) as
// stored.
func TestAttentionKV(t *testing.T) {
	h := newHarness(t)
	for _, c := range kvAttentionCases {
		t.Run(fmt.Sprintf("%v-%v/hd%d/b%d/pos%d/h%d-%d", c.k, c.v, c.headDim, c.batch, c.firstPos, c.nHead, c.nKV), func(t *testing.T) {
			h.t = t
			const nCtx = 300
			a := h.attention(attnShape{kType: c.k, vType: c.v, headDim: c.headDim, rows: c.batch, nCtx: nCtx, nHead: c.nHead, nKV: c.nKV},
				h.positions(c.firstPos, nCtx))
			h.check(a.ops, a.pairs(), func(int) { h.expectClose(a.y, kvTolerance(c.k, c.v), "attention") })
		})
	}
}

// A cache view that starts off a 16-byte boundary (a row slice of a
// 36-byte-row Q4_0 cache, a column slice of a Q8_0 one) is read where it
// is; so is one whose output an integer product reads next, which the
// attention quantizes on the way.
func TestAttentionKVViews(t *testing.T) {
	h := newHarness(t)
	for _, batch := range []int{1, 4} {
		t.Run(fmt.Sprintf("b%d", batch), func(t *testing.T) {
			h.t = t
			const nHead, nKV, hd, nCtx = 6, 2, 32, 120
			q := h.random(quant.F32, batch, nHead*hd)
			k := h.random(quant.Q4_0, nCtx+1, nKV*hd)   // rows 1.. are the cache: offset 36
			v := h.random(quant.Q8_0, nCtx, (nKV+1)*hd) // heads 1.. are the cache: offset 34
			pos := h.ints(batch, func(i int) int32 { return int32(100 + i) })
			y := h.output(quant.F32, batch, nHead*hd)
			wo := h.random(quant.Q8_0, 64, nHead*hd)
			out := h.output(quant.F32, batch, 64)
			h.check(func(s func(*pair) kernels.Tensor) []kernels.Op {
				return []kernels.Op{
					kernels.Attention{Dst: s(y), Q: s(q), K: s(k).RowSlice(1, nCtx), V: s(v).ColSlice(hd, nKV*hd), Pos: s(pos),
						NHead: nHead, NKVHead: nKV, HeadDim: hd, Scale: 0.17},
					kernels.MatMul{Dst: s(out), W: s(wo), X: s(y)},
				}
			}, []*pair{q, k, v, pos, y, wo, out}, func(int) {
				h.expectClose(y, kvTolerance(quant.Q4_0, quant.Q8_0), "attention")
				h.expectClose(out, matMulTolerance(quant.Q8_0, batch), "o-projection")
			})
		})
	}
}

// The cache writes, then attention over what they wrote, as a decoder
// block runs them: the GPU reads its own quantized rows.
func TestKVCacheRoundTrip(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct {
		k, v  quant.Type
		batch int
	}{{quant.Q8_0, quant.Q8_0, 1}, {quant.Q4_0, quant.Q4_0, 5}, {quant.Q8_0, quant.Q4_0, 3}, {quant.F16, quant.Q4_0, 1}} {
		t.Run(fmt.Sprintf("%v-%v/b%d", c.k, c.v, c.batch), func(t *testing.T) {
			h.t = t
			const nHead, nKV, hd, nCtx = 8, 2, 128, 200
			q := h.random(quant.F32, c.batch, nHead*hd)
			k, v := h.kvSource(c.batch, nKV*hd), h.kvSource(c.batch, nKV*hd)
			kc, vc := h.random(c.k, nCtx, nKV*hd), h.random(c.v, nCtx, nKV*hd)
			pos := h.ints(c.batch, func(i int) int32 { return int32(150 + i) })
			y := h.output(quant.F32, c.batch, nHead*hd)
			h.check(func(s func(*pair) kernels.Tensor) []kernels.Op {
				return []kernels.Op{
					kernels.SetRows{Dst: s(kc), Src: s(k), Idx: s(pos)},
					kernels.SetRows{Dst: s(vc), Src: s(v), Idx: s(pos)},
					kernels.Attention{Dst: s(y), Q: s(q), K: s(kc), V: s(vc), Pos: s(pos),
						NHead: nHead, NKVHead: nKV, HeadDim: hd, Scale: 0.088},
				}
			}, []*pair{q, k, v, kc, vc, pos, y}, func(int) {
				h.expectBytes(kc, "K cache")
				h.expectBytes(vc, "V cache")
				h.expectClose(y, kvTolerance(c.k, c.v), "attention")
			})
		})
	}
}

// The fused step between the Q/K/V products and attention writes
// quantized and mixed caches too, in one launch: V bytes as the CPU
// quantizes them, K (rotated on the GPU, within rounding of the CPU's
// rotation) within a few quantization steps' worth of error.
func TestAttnPrepKV(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct {
		hd, batch int
		norms     bool
		k, v      quant.Type
	}{
		{128, 1, true, quant.Q8_0, quant.Q8_0}, {128, 3, true, quant.Q4_0, quant.Q4_0},
		{64, 2, false, quant.Q8_0, quant.Q4_0}, {256, 1, true, quant.F16, quant.Q8_0},
		{128, 2, true, quant.Q4_0, quant.F16}, {64, 1, true, quant.F32, quant.F16},
	} {
		t.Run(fmt.Sprintf("hd%d/b%d/norms=%v/%v-%v", c.hd, c.batch, c.norms, c.k, c.v), func(t *testing.T) {
			h.t = t
			const nq, nkv, ctx = 6, 2, 40
			q, k := h.random(quant.F32, c.batch, nq*c.hd), h.random(quant.F32, c.batch, nkv*c.hd)
			v := h.kvSource(c.batch, nkv*c.hd)
			kc, vc := h.random(c.k, ctx, nkv*c.hd), h.random(c.v, ctx, nkv*c.hd)
			qw, kw := h.random(quant.F32, 1, c.hd), h.random(quant.F32, 1, c.hd)
			pos := h.ints(c.batch, func(i int) int32 { return int32(10*i + h.rng.IntN(10)) })
			build := func(s func(*pair) kernels.Tensor) []kernels.Op {
				rope := func(x kernels.Tensor) kernels.Rope {
					return kernels.Rope{Dst: x, X: x, Pos: s(pos), HeadDim: c.hd, Dims: c.hd, Base: 1e6, Scale: 1, Neox: true}
				}
				var ops []kernels.Op
				if c.norms {
					qh, kh := s(q).Reshape(c.batch*nq, c.hd), s(k).Reshape(c.batch*nkv, c.hd)
					ops = append(ops,
						kernels.RMSNorm{Dst: qh, X: qh, W: s(qw), Eps: 1e-6},
						kernels.RMSNorm{Dst: kh, X: kh, W: s(kw), Eps: 1e-5})
				}
				return append(ops, rope(s(q)), rope(s(k)),
					kernels.SetRows{Dst: s(kc), Src: s(k), Idx: s(pos)},
					kernels.SetRows{Dst: s(vc), Src: s(v), Idx: s(pos)})
			}
			// a flipped Q8_0 quant is ~2e-4 of these caches' norm, a
			// Q4_0 one ~4e-3; F16 and F32 round as rope's outputs do
			cacheTol := map[quant.Type]float64{quant.F32: 1e-4, quant.F16: 1e-3, quant.Q8_0: 2e-3, quant.Q4_0: 1e-2}[c.k]
			h.check(build, []*pair{q, k, v, kc, vc, qw, kw, pos}, func(int) {
				h.expectClose(q, 1e-4, "q")
				h.expectClose(k, 1e-4, "k")
				h.expectClose(kc, cacheTol, "k cache")
				h.expectBytes(vc, "v cache")
			})
			if n := len(h.launches(build)); n != 1 {
				t.Errorf("norms, rotations and cache writes took %d launches, want 1", n)
			}
		})
	}
}
