package cuda

import (
	"fmt"
	"math"
	"testing"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// weightTypes are the weight types the kernels take.
var weightTypes = []quant.Type{quant.F32, quant.F16, quant.BF16, quant.Q4_0, quant.Q4_1,
	quant.Q5_0, quant.Q5_1, quant.Q8_0, quant.IQ4_NL, quant.Q2_K, quant.Q3_K, quant.Q4_K,
	quant.Q5_K, quant.Q6_K, quant.IQ4_XS}

// matMulTolerance: the integer kernels quantize activations to 8 bits
// (about 0.4% per element, averaging down over a row); the others sum in
// F32.
func matMulTolerance(t quant.Type, batch int) float64 {
	if batch <= mvMaxBatch && (t == quant.Q8_0 || t == quant.Q4_K || t == quant.Q6_K) {
		return 1.5e-2
	}
	return 1e-4
}

// MatMul is checked against a float64 product of the dequantized weights,
// at batch sizes that take each kernel (matrix-vector 1..8, tiled above),
// with activations both aligned and not.
func TestMatMul(t *testing.T) {
	h := newHarness(t)
	shapes := []struct{ rows, n, batch, xOff int }{
		{67, 256, 1, 0}, {300, 512, 3, 0}, {128, 1024, 8, 1}, {200, 768, 37, 0}, {70, 512, 5, 3},
	}
	for _, typ := range weightTypes {
		for _, s := range shapes {
			t.Run(fmt.Sprintf("%v/%dx%d/b%d/off%d", typ, s.rows, s.n, s.batch, s.xOff), func(t *testing.T) {
				h.t = t
				w := h.random(typ, s.rows, s.n)
				xbuf := h.random(quant.F32, s.batch, s.n+s.xOff)
				y := h.output(quant.F32, s.batch, s.rows)
				x := func(p kernels.Tensor) kernels.Tensor { return p.ColSlice(s.xOff, s.n) }
				h.check(func(side func(*pair) kernels.Tensor) []kernels.Op {
					return []kernels.Op{kernels.MatMul{Dst: side(y), W: side(w), X: x(side(xbuf))}}
				}, []*pair{w, xbuf, y}, func(round int) {
					wv := h.read(h.cpu, w.c)
					xv := h.read(h.cpu, xbuf.c)
					want := make([]float64, s.batch*s.rows)
					for b := 0; b < s.batch; b++ {
						for o := 0; o < s.rows; o++ {
							var sum float64
							for i := 0; i < s.n; i++ {
								sum += wv[o*s.n+i] * xv[b*(s.n+s.xOff)+s.xOff+i]
							}
							want[b*s.rows+o] = sum
						}
					}
					got := h.read(h.gpu, y.g)
					if e, tol := relErr(got, want), matMulTolerance(typ, s.batch); !(e <= tol) {
						t.Errorf("round %d: relative error %.3g, tolerance %.1g", round, e, tol)
					}
				})
			})
		}
	}
}

func TestGetRows(t *testing.T) {
	h := newHarness(t)
	for _, typ := range weightTypes {
		t.Run(typ.String(), func(t *testing.T) {
			h.t = t
			src := h.random(typ, 50, 512)
			idx := h.ints(5, func(i int) int32 { return int32(h.rng.IntN(50)) })
			dst := h.output(quant.F32, 5, 512)
			h.check(func(side func(*pair) kernels.Tensor) []kernels.Op {
				return []kernels.Op{kernels.GetRows{Dst: side(dst), Src: side(src), Idx: side(idx)}}
			}, []*pair{src, idx, dst}, func(int) { h.expectClose(dst, 1e-6, "rows") })
		})
	}
	t.Run("F32/odd-width", func(t *testing.T) {
		h.t = t
		src := h.random(quant.F32, 9, 37)
		idx := h.ints(3, func(i int) int32 { return int32(h.rng.IntN(9)) })
		dst := h.output(quant.F32, 3, 37)
		h.check(func(side func(*pair) kernels.Tensor) []kernels.Op {
			return []kernels.Op{kernels.GetRows{Dst: side(dst), Src: side(src), Idx: side(idx)}}
		}, []*pair{src, idx, dst}, func(int) { h.expectEqual(dst, "rows") })
	})
}

func TestSetRows(t *testing.T) {
	h := newHarness(t)
	for _, typ := range []quant.Type{quant.F32, quant.F16} {
		t.Run(typ.String(), func(t *testing.T) {
			h.t = t
			dst := h.random(typ, 20, 192) // rows not written must survive
			src := h.random(quant.F32, 3, 192)
			idx := h.ints(3, func(i int) int32 { return int32(3*i + h.rng.IntN(3)) })
			h.check(func(side func(*pair) kernels.Tensor) []kernels.Op {
				return []kernels.Op{kernels.SetRows{Dst: side(dst), Src: side(src), Idx: side(idx)}}
			}, []*pair{dst, src, idx}, func(int) { h.expectEqual(dst, "cache") })
		})
	}
}

func TestRMSNorm(t *testing.T) {
	h := newHarness(t)
	x := h.random(quant.F32, 5, 1000)
	w := h.random(quant.F32, 1, 1000)
	y := h.output(quant.F32, 5, 1000)
	h.check(func(side func(*pair) kernels.Tensor) []kernels.Op {
		return []kernels.Op{kernels.RMSNorm{Dst: side(y), X: side(x), W: side(w), Eps: 1e-6}}
	}, []*pair{x, w, y}, func(int) { h.expectClose(y, 1e-5, "rms_norm") })
}

func TestElementwise(t *testing.T) {
	h := newHarness(t)
	for _, bcast := range []bool{false, true} {
		t.Run(fmt.Sprintf("broadcast=%v", bcast), func(t *testing.T) {
			h.t = t
			brows := 4
			if bcast {
				brows = 1
			}
			a := h.random(quant.F32, 4, 333)
			b := h.random(quant.F32, brows, 333)
			sum, prod := h.output(quant.F32, 4, 333), h.output(quant.F32, 4, 333)
			h.check(func(side func(*pair) kernels.Tensor) []kernels.Op {
				return []kernels.Op{
					kernels.Add{Dst: side(sum), A: side(a), B: side(b)},
					kernels.Mul{Dst: side(prod), A: side(a), B: side(b)},
				}
			}, []*pair{a, b, sum, prod}, func(int) {
				h.expectClose(sum, 1e-7, "add")
				h.expectClose(prod, 1e-7, "mul")
			})
		})
	}
	t.Run("swiglu", func(t *testing.T) {
		h.t = t
		g, u := h.random(quant.F32, 3, 700), h.random(quant.F32, 3, 700)
		y := h.output(quant.F32, 3, 700)
		h.check(func(side func(*pair) kernels.Tensor) []kernels.Op {
			return []kernels.Op{kernels.SwiGLU{Dst: side(y), Gate: side(g), Up: side(u)}}
		}, []*pair{g, u, y}, func(int) { h.expectClose(y, 1e-5, "swiglu") })
	})
}

func TestCopy(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct{ from, to quant.Type }{
		{quant.F32, quant.F32}, {quant.F32, quant.F16}, {quant.F16, quant.F32}, {quant.F16, quant.F16},
	} {
		t.Run(fmt.Sprintf("%v-%v", c.from, c.to), func(t *testing.T) {
			h.t = t
			src := h.random(c.from, 6, 100)
			dst := h.output(c.to, 6, 130) // written into columns 10..110
			h.check(func(side func(*pair) kernels.Tensor) []kernels.Op {
				return []kernels.Op{kernels.Copy{Dst: side(dst).ColSlice(10, 100), Src: side(src)}}
			}, []*pair{src, dst}, func(int) {
				cv, gv := h.floats(dst)
				for r := 0; r < 6; r++ {
					for c := 10; c < 110; c++ {
						if i := r*130 + c; cv[i] != gv[i] {
							t.Fatalf("[%d][%d] is %v on the GPU, %v on the CPU", r, c, gv[i], cv[i])
						}
					}
				}
			})
		})
	}
}

func TestRope(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct {
		headDim, dims int
		neox, inPlace bool
		factors       bool
	}{
		{64, 64, true, true, false}, {128, 128, false, false, false}, {64, 32, true, false, true}, {128, 96, false, true, false},
	} {
		t.Run(fmt.Sprintf("hd%d/dims%d/neox=%v/inplace=%v", c.headDim, c.dims, c.neox, c.inPlace), func(t *testing.T) {
			h.t = t
			x := h.random(quant.F32, 4, 3*c.headDim)
			pos := h.ints(4, func(int) int32 { return int32(h.rng.IntN(1000)) })
			y := x
			ops := []*pair{x, pos}
			if !c.inPlace {
				y = h.output(quant.F32, 4, 3*c.headDim)
				ops = append(ops, y)
			}
			var factors *pair
			if c.factors {
				factors = h.tensor(quant.F32, 1, c.dims/2, func() []byte {
					f := make([]float32, c.dims/2)
					for i := range f {
						f[i] = 1 + 3*float32(h.rng.Float64())
					}
					return append([]byte(nil), kernels.F32Bytes(f)...)
				})
				ops = append(ops, factors)
			}
			h.check(func(side func(*pair) kernels.Tensor) []kernels.Op {
				op := kernels.Rope{Dst: side(y), X: side(x), Pos: side(pos), HeadDim: c.headDim, Dims: c.dims,
					Base: 1e4, Scale: 1, Neox: c.neox}
				if factors != nil {
					op.Factors = side(factors)
				}
				return []kernels.Op{op}
			}, ops, func(int) { h.expectClose(y, 5e-5, "rope") })
		})
	}
}

// attentionTolerance: the CPU backend attends F16 caches with F16 queries
// and an F16 accumulator, as llama.cpp's CPU flash attention does; the
// kernels keep both in F32.
func attentionTolerance(kv quant.Type) float64 {
	if kv == quant.F16 {
		return 5e-3
	}
	return 1e-5
}

func TestAttention(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct {
		kv       quant.Type
		headDim  int
		batch    int
		firstPos int
	}{
		{quant.F32, 64, 1, 0}, {quant.F16, 128, 1, 250}, {quant.F16, 64, 5, 17}, {quant.F32, 128, 9, 100},
		{quant.F16, 256, 1, 299}, {quant.F32, 256, 2, 150}, {quant.F32, 96, 2, 40}, {quant.F16, 32, 1, 299},
	} {
		t.Run(fmt.Sprintf("%v/hd%d/b%d/pos%d", c.kv, c.headDim, c.batch, c.firstPos), func(t *testing.T) {
			h.t = t
			const nHead, nKV, nCtx = 8, 2, 300
			q := h.random(quant.F32, c.batch, nHead*c.headDim)
			k := h.random(c.kv, nCtx, nKV*c.headDim)
			v := h.random(c.kv, nCtx, nKV*c.headDim)
			pos := h.ints(c.batch, func(i int) int32 { return int32(c.firstPos + i) })
			y := h.output(quant.F32, c.batch, nHead*c.headDim)
			h.check(func(side func(*pair) kernels.Tensor) []kernels.Op {
				return []kernels.Op{kernels.Attention{Dst: side(y), Q: side(q), K: side(k), V: side(v), Pos: side(pos),
					NHead: nHead, NKVHead: nKV, HeadDim: c.headDim, Scale: float32(1 / math.Sqrt(float64(c.headDim)))}}
			}, []*pair{q, k, v, pos, y}, func(int) { h.expectClose(y, attentionTolerance(c.kv), "attention") })
		})
	}
}

// Attention followed by an integer product of its output quantizes the
// output in the attention launch; both results must match the CPU's.
func TestAttentionQuantized(t *testing.T) {
	h := newHarness(t)
	for _, batch := range []int{1, 2} {
		t.Run(fmt.Sprintf("b%d", batch), func(t *testing.T) {
			h.t = t
			const nHead, nKV, hd, nCtx = 8, 2, 64, 300
			q := h.random(quant.F32, batch, nHead*hd)
			k := h.random(quant.F16, nCtx, nKV*hd)
			v := h.random(quant.F16, nCtx, nKV*hd)
			pos := h.ints(batch, func(i int) int32 { return int32(200 + i) })
			y := h.output(quant.F32, batch, nHead*hd)
			wo := h.random(quant.Q8_0, 256, nHead*hd)
			out := h.output(quant.F32, batch, 256)
			h.check(func(s func(*pair) kernels.Tensor) []kernels.Op {
				return []kernels.Op{
					kernels.Attention{Dst: s(y), Q: s(q), K: s(k), V: s(v), Pos: s(pos),
						NHead: nHead, NKVHead: nKV, HeadDim: hd, Scale: 0.125},
					kernels.MatMul{Dst: s(out), W: s(wo), X: s(y)},
				}
			}, []*pair{q, k, v, pos, y, wo, out}, func(int) {
				h.expectClose(y, attentionTolerance(quant.F16), "attention")
				h.expectClose(out, matMulTolerance(quant.Q8_0, batch), "o-projection")
			})
		})
	}
}

func TestSoftmax(t *testing.T) {
	h := newHarness(t)
	x := h.random(quant.F32, 3, 5000)
	y := h.output(quant.F32, 3, 5000)
	h.check(func(side func(*pair) kernels.Tensor) []kernels.Op {
		return []kernels.Op{kernels.Softmax{Dst: side(y), X: side(x)}}
	}, []*pair{x, y}, func(int) { h.expectClose(y, 1e-5, "softmax") })
}

func TestArgmaxTopK(t *testing.T) {
	h := newHarness(t)
	// 151936: Qwen3's vocabulary, rows 16-byte aligned; 8195: the second
	// row starts unaligned and the first ends in a partial vector.
	for _, c := range []struct {
		vocab int
		ties  bool
	}{{151936, false}, {151936, true}, {8195, false}, {8195, true}} {
		vocab, ties := c.vocab, c.ties
		t.Run(fmt.Sprintf("n=%d,ties=%v", vocab, ties), func(t *testing.T) {
			h.t = t
			var x *pair
			x = h.tensor(quant.F32, 2, vocab, func() []byte {
				v := make([]float32, 2*vocab)
				for i := range v {
					v[i] = float32(h.rng.NormFloat64())
					if ties { // few distinct values: ties everywhere
						v[i] = float32(h.rng.IntN(20))
					}
				}
				return append([]byte(nil), kernels.F32Bytes(v)...)
			})
			am := h.output(quant.I32, 1, 2)
			ids, vals := h.output(quant.I32, 2, 40), h.output(quant.F32, 2, 40)
			h.check(func(side func(*pair) kernels.Tensor) []kernels.Op {
				return []kernels.Op{
					kernels.Argmax{Dst: side(am), X: side(x)},
					kernels.TopK{Ids: side(ids), Vals: side(vals), X: side(x)},
				}
			}, []*pair{x, am, ids, vals}, func(int) {
				h.expectEqual(am, "argmax")
				h.expectEqual(ids, "top-k ids")
				h.expectEqual(vals, "top-k values")
			})
		})
	}
}

// A decoder-block-shaped program exercises the compiler's fusions: the
// norm that quantizes for the products after it, Q/K/V in one launch
// (split by weight type), a product folded into its residual add (its
// output is overwritten before it is read), and SwiGLU quantizing for the
// down projection. Every output must match the CPU running the ops one by
// one.
func TestFusedBlock(t *testing.T) {
	h := newHarness(t)
	for _, batch := range []int{1, 3} {
		t.Run(fmt.Sprintf("b%d", batch), func(t *testing.T) {
			h.t = t
			const n, ff = 512, 768
			x := h.random(quant.F32, batch, n)
			norm := h.random(quant.F32, 1, n)
			wq, wk, wv := h.random(quant.Q4_K, n, n), h.random(quant.Q4_K, 256, n), h.random(quant.Q6_K, 256, n)
			wo := h.random(quant.Q8_0, n, n)
			wg, wu, wd := h.random(quant.Q4_K, ff, n), h.random(quant.Q4_K, ff, n), h.random(quant.Q6_K, n, ff)
			hn, tmp := h.output(quant.F32, batch, n), h.output(quant.F32, batch, n)
			q, k, v := h.output(quant.F32, batch, n), h.output(quant.F32, batch, 256), h.output(quant.F32, batch, 256)
			g, u := h.output(quant.F32, batch, ff), h.output(quant.F32, batch, ff)
			h.check(func(s func(*pair) kernels.Tensor) []kernels.Op {
				return []kernels.Op{
					kernels.RMSNorm{Dst: s(hn), X: s(x), W: s(norm), Eps: 1e-6},
					kernels.MatMul{Dst: s(q), W: s(wq), X: s(hn)},
					kernels.MatMul{Dst: s(k), W: s(wk), X: s(hn)},
					kernels.MatMul{Dst: s(v), W: s(wv), X: s(hn)},
					kernels.MatMul{Dst: s(tmp), W: s(wo), X: s(q)},
					kernels.Add{Dst: s(x), A: s(x), B: s(tmp)},
					kernels.RMSNorm{Dst: s(hn), X: s(x), W: s(norm), Eps: 1e-6},
					kernels.MatMul{Dst: s(g), W: s(wg), X: s(hn)},
					kernels.MatMul{Dst: s(u), W: s(wu), X: s(hn)},
					kernels.SwiGLU{Dst: s(g), Gate: s(g), Up: s(u)},
					kernels.MatMul{Dst: s(tmp), W: s(wd), X: s(g)},
					kernels.Add{Dst: s(x), A: s(x), B: s(tmp)},
				}
			}, []*pair{x, norm, wq, wk, wv, wo, wg, wu, wd, hn, tmp, q, k, v, g, u}, func(int) {
				for _, o := range []struct {
					p    *pair
					name string
				}{{q, "q"}, {k, "k"}, {v, "v"}, {u, "up"}, {g, "swiglu"}, {x, "residual"}} {
					h.expectClose(o.p, 3e-2, o.name)
				}
			})
		})
	}
}

// Q and K rotations, and the K and V cache writes, each run as one launch
// of two jobs; the results must be those of the four ops.
func TestPairedRopeSetRows(t *testing.T) {
	h := newHarness(t)
	const hd, nq, nkv, ctx, batch = 128, 4, 2, 40, 3
	q, k := h.random(quant.F32, batch, nq*hd), h.random(quant.F32, batch, nkv*hd)
	v := h.random(quant.F32, batch, nkv*hd)
	kc, vc := h.random(quant.F16, ctx, nkv*hd), h.random(quant.F16, ctx, nkv*hd)
	pos := h.ints(batch, func(i int) int32 { return int32(10*i + h.rng.IntN(10)) })
	h.check(func(s func(*pair) kernels.Tensor) []kernels.Op {
		rope := func(x kernels.Tensor) kernels.Rope {
			return kernels.Rope{Dst: x, X: x, Pos: s(pos), HeadDim: hd, Dims: hd, Base: 1e6, Scale: 1, Neox: true}
		}
		return []kernels.Op{
			rope(s(q)), rope(s(k)),
			kernels.SetRows{Dst: s(kc), Src: s(k), Idx: s(pos)},
			kernels.SetRows{Dst: s(vc), Src: s(v), Idx: s(pos)},
		}
	}, []*pair{q, k, v, kc, vc, pos}, func(int) {
		h.expectClose(q, 5e-5, "q")
		h.expectClose(k, 5e-5, "k")
		h.expectClose(kc, 1e-3, "k cache")
		h.expectEqual(vc, "v cache")
	})
	if p, err := h.gpu.Compile([]kernels.Op{
		kernels.SetRows{Dst: kc.g, Src: k.g, Idx: pos.g}, kernels.SetRows{Dst: vc.g, Src: v.g, Idx: pos.g},
	}); err != nil {
		t.Fatal(err)
	} else if n := len(p.(*program).steps); n != 1 {
		t.Errorf("K and V writes took %d launches, want 1", n)
	}
}
