package cuda

import (
	"errors"
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

// matMulTolerance is for a product compared with the CPU's, which reads
// activations unrounded (F16 weights) or quantized its own way (integer
// weights): the integer kernels quantize activations to 8 bits per 32
// (about 0.4% per element, averaging down over a row, more where random
// Q4_K weights cancel); the F16 tensor-core kernels (batches above one)
// round activations to F16 (2^-11); the others sum in F32.
func matMulTolerance(t quant.Type, batch int) float64 {
	switch {
	case t == quant.Q8_0 || t == quant.Q4_K || t == quant.Q6_K:
		return 2.5e-2
	case t == quant.F16 && batch > 1:
		return 1e-3
	}
	return 1e-4
}

// seenOperands are the weights and activations (rows of n) of a product
// of nb rows of typ on path, as its kernels read them: the prefill tiles
// (mmt, shape 0x0) round both to F16; else the integer paths quantize
// activations per 32 as quantize_group does (d = max|v|/127 in float32, q
// = v/d rounded to even), the F16 tensor-core path rounds them to F16,
// and the rest read them as they are. Against a float64 product of these,
// every path sums to within 1e-4 whatever the data (1e-3 for the F16
// tiles, whose inputs round twice). The cp.async tiles (mmtc) read the F16
// copy of the activations for every weight type.
func seenOperands(t testing.TB, be *Backend, path mvPath, o kernels.MatMul, w, x []float64) (sw, sx []float64, tol float64) {
	typ, nb, rows := o.W.Type, o.X.Rows, o.W.Rows
	if path == pathMMQ || path == pathMMF16 {
		if mt, nt := be.mmaShape(typ, nb, rows); mt == 0 && mmtType(typ) {
			if be.mmtQ8(typ) && be.mmtcStages([]kernels.MatMul{o}, nt) == 0 {
				x = seenActivations(t, pathMMQ, x)
			}
			return seenActivations(t, pathMMF16, w), seenActivations(t, pathMMF16, x), 1e-3
		}
	}
	return w, seenActivations(t, path, x), 1e-4
}

// productWant is the float64 product of o's weights w and activations x
// as path's kernels read them (seenOperands), and the relative error
// allowed against it.
func productWant(t testing.TB, be *Backend, path mvPath, o kernels.MatMul, w, x []float64) (want []float64, tol float64) {
	w, x, tol = seenOperands(t, be, path, o, w, x)
	return product(w, x, o.W.Rows, o.W.Cols, o.X.Rows), tol
}

// product is the float64 product [batch][rows] of weights w [rows][n]
// and activations x [batch][n].
func product(w, x []float64, rows, n, batch int) []float64 {
	y := make([]float64, batch*rows)
	for b := 0; b < batch; b++ {
		for r := 0; r < rows; r++ {
			var sum float64
			for i := 0; i < n; i++ {
				sum += w[r*n+i] * x[b*n+i]
			}
			y[b*rows+r] = sum
		}
	}
	return y
}

// seenActivations is x as the matrix-vector and mma kernels of path read
// it (see seenOperands).
func seenActivations(t testing.TB, path mvPath, x []float64) []float64 {
	out := make([]float64, len(x))
	switch path {
	case pathQ8, pathMMQ, pathMVX:
		for g := 0; g+32 <= len(x); g += 32 {
			var amax float32
			for _, v := range x[g : g+32] {
				amax = max(amax, float32(math.Abs(v)))
			}
			d := amax / 127
			for i, v := range x[g : g+32] {
				if amax > 0 {
					out[g+i] = math.RoundToEven(float64(float32(v)/d)) * float64(d)
				}
			}
		}
	case pathMMF16:
		f := make([]float32, len(x))
		for i, v := range x {
			f[i] = float32(v)
		}
		h := make([]byte, 2*len(f))
		if err := quant.Quantize(quant.F16, f, h); err != nil {
			t.Fatal(err)
		}
		if err := quant.Dequantize(quant.F16, h, f); err != nil {
			t.Fatal(err)
		}
		for i, v := range f {
			out[i] = float64(v)
		}
	default:
		copy(out, x)
	}
	return out
}

// matMulShapes take each kernel: matrix-vector (one row), tensor cores
// (one and several tiles of rows and batch rows, partial ones, widths
// that are and are not whole units of 256), tiled (other types above 8
// rows), with activations both aligned and not.
var matMulShapes = []struct{ rows, n, batch, xOff int }{
	{67, 256, 1, 0}, {300, 512, 3, 0}, {128, 1024, 8, 1}, {200, 768, 37, 0}, {70, 512, 5, 3},
	{33, 256, 2, 0}, {500, 1024, 16, 0}, {100, 768, 130, 0}, {90, 96, 20, 0}, {75, 1024, 4, 0},
	{41, 2048, 6, 2},
}

// MatMul is checked against a float64 product of the dequantized weights.
func TestMatMul(t *testing.T) { testMatMul(t, newHarness(t)) }

// With MatVecRows 8 the integer and F16 products of 2 to 8 rows run on
// the matrix-vector kernels, reading the same activation layout, with one
// weight row a warp or two (odd row counts leave a warp half a pair);
// with MatVecRows 1 every batch above one row runs on tensor cores.
func TestMatMulMatVecRows(t *testing.T) {
	for _, o := range []struct{ vec, wr int }{{8, 1}, {8, 2}, {1, 2}} {
		t.Run(fmt.Sprintf("vec%d_wr%d", o.vec, o.wr), func(t *testing.T) {
			testMatMul(t, newHarnessWith(t, Options{Kernels: testOptions().Kernels, MatVecRows: o.vec, MatVecWeightRows: o.wr}))
		})
	}
}

// An out-of-range MatVecRows, MatVecWeightRows, PrefillWGMMA,
// MVXBlockRows or MVXPairRows is refused before the driver is asked.
func TestMatVecRowsRange(t *testing.T) {
	for _, n := range []int{-1, 9} {
		if _, err := Open(Options{MatVecRows: n}); !errors.Is(err, ErrBadOption) {
			t.Errorf("MatVecRows %d: %v, want ErrBadOption", n, err)
		}
	}
	for _, n := range []int{-1, 3} {
		if _, err := Open(Options{MatVecWeightRows: n}); !errors.Is(err, ErrBadOption) {
			t.Errorf("MatVecWeightRows %d: %v, want ErrBadOption", n, err)
		}
	}
	for _, n := range []int{-2, 3, 7} {
		if _, err := Open(Options{PrefillWGMMA: n}); !errors.Is(err, ErrBadOption) {
			t.Errorf("PrefillWGMMA %d: %v, want ErrBadOption", n, err)
		}
	}
	for _, n := range []int{-1, 8, 64} {
		if _, err := Open(Options{MVXBlockRows: n}); !errors.Is(err, ErrBadOption) {
			t.Errorf("MVXBlockRows %d: %v, want ErrBadOption", n, err)
		}
	}
	for _, n := range []int{-2, 3, 16} {
		if _, err := Open(Options{MVXPairRows: n}); !errors.Is(err, ErrBadOption) {
			t.Errorf("MVXPairRows %d: %v, want ErrBadOption", n, err)
		}
	}
}

func testMatMul(t *testing.T, h *harness) {
	for _, typ := range weightTypes {
		for _, s := range matMulShapes {
			if s.n%typ.BlockSize() != 0 {
				continue
			}
			t.Run(fmt.Sprintf("%v/%dx%d/b%d/off%d", typ, s.rows, s.n, s.batch, s.xOff), func(t *testing.T) {
				h.t = t
				w := h.random(typ, s.rows, s.n)
				xbuf := h.random(quant.F32, s.batch, s.n+s.xOff)
				y := h.output(quant.F32, s.batch, s.rows)
				x := func(p kernels.Tensor) kernels.Tensor { return p.ColSlice(s.xOff, s.n) }
				path := pathOf(kernels.MatMul{Dst: y.g, W: w.g, X: x(xbuf.g)}, h.gpu.vecRows)
				h.check(func(side func(*pair) kernels.Tensor) []kernels.Op {
					return []kernels.Op{kernels.MatMul{Dst: side(y), W: side(w), X: x(side(xbuf))}}
				}, []*pair{w, xbuf, y}, func(round int) {
					wv := h.read(h.cpu, w.c)
					xall := h.read(h.cpu, xbuf.c)
					xv := make([]float64, 0, s.batch*s.n)
					for b := 0; b < s.batch; b++ {
						xv = append(xv, xall[b*(s.n+s.xOff)+s.xOff:][:s.n]...)
					}
					want, tol := productWant(t, h.gpu, path, kernels.MatMul{Dst: y.g, W: w.g, X: x(xbuf.g)}, wv, xv)
					if e := relErr(h.read(h.gpu, y.g), want); !(e <= tol) {
						t.Errorf("round %d (path %d): relative error %.3g, tolerance %.0e", round, path, e, tol)
					}
				})
			})
		}
	}
}

// Where the wgmma tiles load, an F16 product whose 128x64 tiles make
// mmtwBlocks blocks, too few for the mma.sync tiles, runs on the wgmma
// 128x64 tile by default (not a forced shape), against the float64
// product.
func TestMatMulWGMMADefault(t *testing.T) {
	h := newHarness(t)
	if !h.gpu.wgmma {
		t.Skip("no sm_90a kernels on this GPU")
	}
	const batch, rows, n = 256, 4096, 256
	if mt, nt := h.gpu.mmaShape(quant.F16, batch, rows); mt != 0 || nt != 8 || mmaShapeFree(batch, rows) {
		t.Fatalf("shape %dx%d for %d rows of %d weight rows: want 0x8, where mmaShape alone would not pick it", mt, nt, batch, rows)
	}
	w := h.random(quant.F16, rows, n)
	x := h.random(quant.F32, batch, n)
	y := h.output(quant.F32, batch, rows)
	h.check(func(side func(*pair) kernels.Tensor) []kernels.Op {
		return []kernels.Op{kernels.MatMul{Dst: side(y), W: side(w), X: side(x)}}
	}, []*pair{w, x, y}, func(round int) {
		wv := seenActivations(t, pathMMF16, h.read(h.cpu, w.c))
		xv := seenActivations(t, pathMMF16, h.read(h.cpu, x.c))
		if e := relErr(h.read(h.gpu, y.g), product(wv, xv, rows, n, batch)); !(e <= 1e-3) {
			t.Errorf("round %d: relative error %.3g, tolerance 1e-3", round, e)
		}
	})
}

// mmaShapeFree reports whether mmaShape by itself puts an F16 product of
// batch rows and rows weight rows on a prefill tile.
func mmaShapeFree(batch, rows int) bool {
	mt, _ := mmaShape(quant.F16, batch, rows)
	return mt == 0
}

// Every tensor-core tile shape, forced, on batches and weight rows that
// leave partial tiles (one block of rows and several), against the
// float64 product.
func TestMatMulTileShapes(t *testing.T) {
	h := newHarnessWith(t, Options{Kernels: testOptions().Kernels, MatVecRows: 1})
	defer func() { h.gpu.shape, h.gpu.pF32, h.gpu.pDepth, h.gpu.pRing, h.gpu.pWG = nil, false, 0, 0, 0 }()
	for _, typ := range []quant.Type{quant.Q8_0, quant.Q4_K, quant.Q6_K, quant.F16} {
		for _, sh := range mmaShapes {
			// the prefill tiles read 8-bit (integer weights) or F16 copies
			// of the activations, loading 2 to 4 steps ahead into
			// registers (ring -1), or F32 ones; those of F16, Q4_K and
			// Q6_K through 3 or 4 cp.async stages (ring), where rows are
			// 16-byte aligned (Q6_K: n 2048); F16 on compute capability
			// 9.0 through the wgmma tiles of 4 to 6 stages (wg)
			type variant struct {
				f32             bool
				depth, ring, wg int
			}
			vars := []variant{{false, 0, 0, 0}}
			if sh[0] == 0 {
				vars = []variant{{false, 2, -1, 0}, {false, 3, -1, 0}, {false, 4, -1, 0}, {true, 0, 0, 0}}
				vars = append(vars, variant{false, 0, 3, 0}, variant{false, 0, 4, 0})
				if typ == quant.F16 && h.gpu.wgmma {
					vars = append(vars, variant{false, 0, 0, 4}, variant{false, 0, 0, 5}, variant{false, 0, 0, 6})
				}
			}
			for _, v := range vars {
				for _, c := range []struct{ batch, rows, n int }{{3, 75, 512}, {16, 75, 512}, {70, 75, 512}, {130, 300, 512}, {257, 130, 512}, {40, 75, 96}, {200, 140, 256}, {130, 140, 2048}} {
					batch, rows, n := c.batch, c.rows, c.n
					if n%typ.BlockSize() != 0 {
						continue
					}
					name := fmt.Sprintf("%v/%dx%d/b%d/r%d/n%d", typ, sh[0], sh[1], batch, rows, n)
					if v.f32 {
						name += "/f32"
					}
					if v.depth > 0 {
						name += fmt.Sprintf("/d%d", v.depth)
					}
					if v.ring > 0 {
						name += fmt.Sprintf("/ring%d", v.ring)
					}
					if v.wg > 0 {
						name += fmt.Sprintf("/wg%d", v.wg)
					}
					t.Run(name, func(t *testing.T) {
						h.t = t
						h.gpu.shape = func(int) (int, int) { return sh[0], sh[1] }
						h.gpu.pF32, h.gpu.pDepth, h.gpu.pRing, h.gpu.pWG = v.f32, v.depth, v.ring, v.wg
						w := h.random(typ, rows, n)
						x := h.random(quant.F32, batch, n)
						y := h.output(quant.F32, batch, rows)
						path := pathOf(kernels.MatMul{Dst: y.g, W: w.g, X: x.g}, h.gpu.vecRows)
						h.check(func(side func(*pair) kernels.Tensor) []kernels.Op {
							return []kernels.Op{kernels.MatMul{Dst: side(y), W: side(w), X: side(x)}}
						}, []*pair{w, x, y}, func(round int) {
							want, tol := productWant(t, h.gpu, path, kernels.MatMul{Dst: y.g, W: w.g, X: x.g}, h.read(h.cpu, w.c), h.read(h.cpu, x.c))
							if e := relErr(h.read(h.gpu, y.g), want); !(e <= tol) {
								t.Errorf("round %d: relative error %.3g, tolerance %.0e", round, e, tol)
							}
						})
					})
				}
			}
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
				factors = h.ropeFactors(c.dims / 2)
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

// ropeFactors is an F32 input [1, n] of rotation frequency factors
// (Rope.Factors), drawn from [1, 4) per round.
func (h *harness) ropeFactors(n int) *pair {
	return h.tensor(quant.F32, 1, n, func() []byte {
		f := make([]float32, n)
		for i := range f {
			f[i] = 1 + 3*float32(h.rng.Float64())
		}
		return append([]byte(nil), kernels.F32Bytes(f)...)
	})
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

// attnShape is an attention's shape: rows query rows of nHead heads of
// headDim against K and V caches (of kType and vType) of nCtx rows of nKV
// heads, and a sliding window of that many keys (0: none).
type attnShape struct {
	kType, vType        quant.Type
	headDim, rows, nCtx int
	nHead, nKV, window  int
}

// attnOperands are an attention's operands on both sides: random queries
// and caches, positions drawn by pos, and the output y.
type attnOperands struct {
	attnShape
	q, k, v, pos, y *pair
}

// attention makes the operands of an attention of shape s.
func (h *harness) attention(s attnShape, pos func(i int) int32) *attnOperands {
	return &attnOperands{attnShape: s,
		q:   h.random(quant.F32, s.rows, s.nHead*s.headDim),
		k:   h.random(s.kType, s.nCtx, s.nKV*s.headDim),
		v:   h.random(s.vType, s.nCtx, s.nKV*s.headDim),
		pos: h.ints(s.rows, pos),
		y:   h.output(quant.F32, s.rows, s.nHead*s.headDim),
	}
}

// ops is the attention on side s, scaled by 1/sqrt(headDim).
func (a *attnOperands) ops(s func(*pair) kernels.Tensor) []kernels.Op {
	return []kernels.Op{kernels.Attention{Dst: s(a.y), Q: s(a.q), K: s(a.k), V: s(a.v), Pos: s(a.pos),
		NHead: a.nHead, NKVHead: a.nKV, HeadDim: a.headDim, Scale: float32(1 / math.Sqrt(float64(a.headDim))),
		Window: a.window}}
}

func (a *attnOperands) pairs() []*pair { return []*pair{a.q, a.k, a.v, a.pos, a.y} }

// positions draws row i's position: first + i, or for first < 0 one at
// random below nCtx.
func (h *harness) positions(first, nCtx int) func(i int) int32 {
	return func(i int) int32 {
		if first < 0 {
			return int32(h.rng.IntN(nCtx))
		}
		return int32(first + i)
	}
}

// Attention of one row (decode) and of several (verification, prefill:
// KV groups of 1 to 32 query heads, row tiles, key slices, 16- and 32-key
// tiles); firstPos -1 draws every row's position at random.
func TestAttention(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct {
		kv         quant.Type
		headDim    int
		batch      int
		firstPos   int
		nHead, nKV int
	}{
		{quant.F32, 64, 1, 0, 8, 2}, {quant.F16, 128, 1, 250, 8, 2}, {quant.F16, 64, 5, 17, 8, 2}, {quant.F32, 128, 9, 100, 8, 2},
		{quant.F16, 256, 1, 299, 8, 2}, {quant.F32, 256, 2, 150, 8, 2}, {quant.F32, 96, 2, 40, 8, 2}, {quant.F16, 32, 1, 299, 8, 2},
		{quant.F16, 128, 16, 280, 16, 8}, {quant.F16, 128, 5, 290, 32, 8}, {quant.F32, 64, 64, 200, 4, 4},
		{quant.F16, 64, 7, 3, 6, 2}, {quant.F16, 128, 3, 100, 64, 2}, {quant.F32, 256, 5, 50, 8, 2},
		{quant.F16, 256, 4, 250, 8, 2}, {quant.F16, 128, 33, -1, 8, 2}, {quant.F32, 128, 100, 0, 4, 2},
		{quant.F16, 128, 130, 0, 8, 2}, {quant.F16, 64, 70, 150, 16, 16},
	} {
		t.Run(fmt.Sprintf("%v/hd%d/b%d/pos%d/h%d-%d", c.kv, c.headDim, c.batch, c.firstPos, c.nHead, c.nKV), func(t *testing.T) {
			h.t = t
			const nCtx = 300
			a := h.attention(attnShape{kType: c.kv, vType: c.kv, headDim: c.headDim, rows: c.batch, nCtx: nCtx, nHead: c.nHead, nKV: c.nKV},
				h.positions(c.firstPos, nCtx))
			h.check(a.ops, a.pairs(), func(int) { h.expectClose(a.y, attentionTolerance(c.kv), "attention") })
		})
	}
}

// Attention followed by an integer product of its output quantizes the
// output in the attention launch; both results must match the CPU's.
func TestAttentionQuantized(t *testing.T) {
	h := newHarness(t)
	for _, batch := range []int{1, 2, 5, 16} {
		t.Run(fmt.Sprintf("b%d", batch), func(t *testing.T) {
			h.t = t
			const nHead, nKV, hd, nCtx = 8, 2, 64, 300 // scale 1/sqrt(64) = 0.125
			a := h.attention(attnShape{kType: quant.F16, vType: quant.F16, headDim: hd, rows: batch, nCtx: nCtx, nHead: nHead, nKV: nKV},
				h.positions(200, nCtx))
			wo := h.random(quant.Q8_0, 256, nHead*hd)
			out := h.output(quant.F32, batch, 256)
			h.check(func(s func(*pair) kernels.Tensor) []kernels.Op {
				return append(a.ops(s), kernels.MatMul{Dst: s(out), W: s(wo), X: s(a.y)})
			}, append(a.pairs(), wo, out), func(int) {
				h.expectClose(a.y, attentionTolerance(quant.F16), "attention")
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
			x := h.tensor(quant.F32, 2, vocab, func() []byte {
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
	for _, batch := range []int{1, 3, 5, 16, 40} {
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
					h.expectClose(o.p, 5e-2, o.name)
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
	if n := len(h.launches(func(s func(*pair) kernels.Tensor) []kernels.Op {
		return []kernels.Op{kernels.SetRows{Dst: s(kc), Src: s(k), Idx: s(pos)}, kernels.SetRows{Dst: s(vc), Src: s(v), Idx: s(pos)}}
	})); n != 1 {
		t.Errorf("K and V writes took %d launches, want 1", n)
	}
}
