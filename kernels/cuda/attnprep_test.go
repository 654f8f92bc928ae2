package cuda

import (
	"fmt"
	"testing"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// The per-head Q/K norms, the two rotations and the two cache writes of a
// decoder block run as one launch; every output, and the cache rows not
// written, must match the CPU running the ops one by one.
func TestAttnPrep(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct {
		hd, dims, batch int
		norms, neox     bool
		factors         bool
		cache           quant.Type
	}{
		{128, 128, 3, true, true, false, quant.F16},
		{128, 64, 1, true, false, true, quant.F32},
		{64, 64, 2, false, true, false, quant.F32},
		{256, 192, 2, true, true, false, quant.F16},
	} {
		name := fmt.Sprintf("hd%d/dims%d/b%d/norms=%v/neox=%v/%v", c.hd, c.dims, c.batch, c.norms, c.neox, c.cache)
		t.Run(name, func(t *testing.T) {
			h.t = t
			const nq, nkv, ctx = 6, 2, 40
			q, k := h.random(quant.F32, c.batch, nq*c.hd), h.random(quant.F32, c.batch, nkv*c.hd)
			v := h.random(quant.F32, c.batch, nkv*c.hd)
			kc, vc := h.random(c.cache, ctx, nkv*c.hd), h.random(c.cache, ctx, nkv*c.hd)
			qw, kw := h.random(quant.F32, 1, c.hd), h.random(quant.F32, 1, c.hd)
			pos := h.ints(c.batch, func(i int) int32 { return int32(10*i + h.rng.IntN(10)) })
			operands := []*pair{q, k, v, kc, vc, qw, kw, pos}
			var factors *pair
			if c.factors {
				factors = h.ropeFactors(c.dims / 2)
				operands = append(operands, factors)
			}
			build := func(s func(*pair) kernels.Tensor) []kernels.Op {
				rope := func(x kernels.Tensor) kernels.Rope {
					r := kernels.Rope{Dst: x, X: x, Pos: s(pos), HeadDim: c.hd, Dims: c.dims, Base: 1e6, Scale: 1, Neox: c.neox}
					if factors != nil {
						r.Factors = s(factors)
					}
					return r
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
			cacheTol := 1e-4
			if c.cache == quant.F16 {
				cacheTol = 1e-3
			}
			h.check(build, operands, func(int) {
				h.expectClose(q, 1e-4, "q")
				h.expectClose(k, 1e-4, "k")
				h.expectClose(kc, cacheTol, "k cache")
				h.expectEqual(vc, "v cache")
			})
			if n := len(h.launches(build)); n != 1 {
				t.Errorf("norms, rotations and cache writes took %d launches, want 1", n)
			}
		})
	}
}
