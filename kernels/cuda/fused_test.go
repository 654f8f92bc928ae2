package cuda

import (
	"cmp"
	"fmt"
	"testing"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// A norm feeding an integer product quantizes its output on the way
// (rms_norm_q8, one block per row): rows narrower than a block, of a full
// block, and wider than the values a block keeps in registers (read
// twice), out of place and in place, must match the CPU, and so must the
// product that reads the quantized copy.
func TestNormQuantizes(t *testing.T) {
	h := newHarness(t)
	for _, n := range []int{96, 2048, 5120} {
		for _, inPlace := range []bool{false, true} {
			for _, batch := range []int{1, 3} {
				t.Run(fmt.Sprintf("n%d_b%d_inplace%v", n, batch, inPlace), func(t *testing.T) {
					h.t = t
					x, w := h.random(quant.F32, batch, n), h.random(quant.F32, 1, n)
					wq := h.random(quant.Q8_0, 64, n)
					hn, y := h.output(quant.F32, batch, n), h.output(quant.F32, batch, 64)
					if inPlace {
						hn = x
					}
					h.check(func(s func(*pair) kernels.Tensor) []kernels.Op {
						return []kernels.Op{
							kernels.RMSNorm{Dst: s(hn), X: s(x), W: s(w), Eps: 1e-6},
							kernels.MatMul{Dst: s(y), W: s(wq), X: s(hn)},
						}
					}, []*pair{x, w, wq, hn, y}, func(int) {
						h.expectClose(hn, 1e-5, "rms_norm")
						h.expectClose(y, matMulTolerance(quant.Q8_0, batch), "product")
					})
				})
			}
		}
	}
}

// Gate and up products of one input followed by their SwiGLU, read by an
// integer product, run as one launch (mvq_glu) for every integer weight
// type and batch variant the matrix-vector kernels take (all of them with
// MatVecRows 8), with the SwiGLU written over the gate or to a tensor of
// its own: gate, up, SwiGLU and the next product must match the CPU
// running the ops one by one, and the program must be the input's
// quantization, the fused launch and the down product. Above MatVecRows,
// gate and up are one tensor-core launch of two jobs and the SwiGLU
// quantizes for the down product.
func TestGLU(t *testing.T) {
	t.Run("default", func(t *testing.T) { testGLU(t, newHarness(t)) })
	t.Run("matvec8", func(t *testing.T) {
		testGLU(t, newHarnessWith(t, Options{Kernels: testOptions().Kernels, MatVecRows: 8}))
	})
	t.Run("mma", func(t *testing.T) {
		testGLU(t, newHarnessWith(t, Options{Kernels: testOptions().Kernels, MatVecRows: 1}))
	})
}

func testGLU(t *testing.T, h *harness) {
	const n, ff = 512, 640
	for _, typ := range []quant.Type{quant.Q8_0, quant.Q4_K, quant.Q6_K} {
		for _, batch := range []int{1, 2, 5} {
			for _, own := range []bool{false, true} {
				t.Run(fmt.Sprintf("%v_b%d_own%v", typ, batch, own), func(t *testing.T) {
					h.t = t
					x := h.random(quant.F32, batch, n)
					wg, wu, wd := h.random(typ, ff, n), h.random(typ, ff, n), h.random(quant.Q8_0, n, ff)
					g, u, y := h.output(quant.F32, batch, ff), h.output(quant.F32, batch, ff), h.output(quant.F32, batch, n)
					sw := g
					if own {
						sw = h.output(quant.F32, batch, ff)
					}
					ops := func(s func(*pair) kernels.Tensor) []kernels.Op {
						return []kernels.Op{
							kernels.MatMul{Dst: s(g), W: s(wg), X: s(x)},
							kernels.MatMul{Dst: s(u), W: s(wu), X: s(x)},
							kernels.SwiGLU{Dst: s(sw), Gate: s(g), Up: s(u)},
							kernels.MatMul{Dst: s(y), W: s(wd), X: s(sw)},
						}
					}
					h.check(ops, []*pair{x, wg, wu, wd, g, u, sw, y}, func(int) {
						h.expectClose(u, matMulTolerance(typ, batch), "up")
						h.expectClose(sw, 5e-2, "swiglu")
						h.expectClose(y, 5e-2, "down")
						if own {
							h.expectClose(g, matMulTolerance(typ, batch), "gate")
						}
					})
					names := h.launches(ops)
					// the down product's 640 is no whole number of 256-units (no mmq)
					down := mvKernel("mvq", "q8_0", batch, h.gpu.weightRows(quant.Q8_0, batch))
					if pathOf(kernels.MatMul{Dst: y.g, W: wd.g, X: sw.g}, h.gpu.vecRows) == pathMVX {
						down = "mvx_q8_0_8"
					}
					want := fmt.Sprintf("[quantize_q8 mvq_glu_%s_%d %s]", weightKernels[typ], batchVariant(batch), down)
					switch {
					case pathOf(kernels.MatMul{Dst: g.g, W: wg.g, X: x.g}, h.gpu.vecRows) == pathMVX:
						want = fmt.Sprintf("[quantize_q8 %s swiglu_q8 %s]", h.gpu.mvxKernel(typ, weightKernels[typ], batch), down)
					case batch > cmp.Or(h.gpu.vecRows, defaultVecRows(typ)):
						want = fmt.Sprintf("[quantize_q8 mmq_%s_1x1 swiglu_q8 %s]", weightKernels[typ], down)
					}
					if got := fmt.Sprint(names); got != want {
						t.Errorf("launches %s, want %s", got, want)
					}
				})
			}
		}
	}
}
