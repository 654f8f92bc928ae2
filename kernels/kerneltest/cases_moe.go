package kerneltest

import (
	"math"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// Tolerances of the MoE case, of the largest |output|. The reference
// rounds the activations of quantized experts as their products do (the
// input, then the SwiGLU output), but from its own float64 values, so an
// element may land one 8-bit step away from the backend's.
const (
	tolMoEFloat = 1e-4
	tolMoEQuant = 2e-3
)

// moeCase checks kernels.MoE on one row (decode) and a batch whose rows
// share some experts, with and without renormalised weights.
func moeCase(h *harness, wt quant.Type) {
	const n, ff, experts, used = 256, 256, 8, 2
	for _, s := range []struct {
		b      int
		renorm bool
	}{{1, true}, {7, true}, {5, false}} {
		_, router := h.randomRows(quant.F32, experts, n)
		gData, gate := h.randomRows(wt, experts*ff, n)
		uData, up := h.randomRows(wt, experts*ff, n)
		dData, down := h.randomRows(wt, experts*n, ff)
		x := h.normal(s.b*n, 1)
		op := kernels.MoE{
			Dst: h.tensor(quant.F32, s.b, n, nil), X: h.f32(s.b, n, x),
			Router: h.f32(experts, n, narrow(router)), Gate: h.tensor(wt, experts*ff, n, gData),
			Up: h.tensor(wt, experts*ff, n, uData), Down: h.tensor(wt, experts*n, ff, dData),
			Experts: experts, Used: used, Renorm: s.renorm,
		}
		if !h.run(op) {
			return
		}
		round := func(v []float64) []float64 { return h.activations(wt, narrow(v)) }
		want := refMoE(widen(x), round, router, gate, up, down, s.b, n, ff, experts, used, s.renorm)
		tol := tolMoEFloat
		if quant.ActivationType(wt) != quant.F32 {
			tol = tolMoEQuant
		}
		h.closeTo("moe", h.readF32(op.Dst), want, tol, maxAbs(want))
	}
}

func narrow(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// refMoE is kernels.MoE in float64, from its definition; round is what
// the experts' products do to their activations.
func refMoE(x []float64, round func([]float64) []float64, router, gate, up, down []float64, b, n, ff, experts, used int, renorm bool) []float64 {
	dot := func(w, v []float64) float64 {
		var s float64
		for i := range v {
			s += w[i] * v[i]
		}
		return s
	}
	out := make([]float64, b*n)
	for r := range b {
		xr, xq := x[r*n:(r+1)*n], round(x[r*n:(r+1)*n])
		probs := make([]float64, experts)
		var top, sum float64 = math.Inf(-1), 0
		for e := range probs {
			probs[e] = dot(router[e*n:(e+1)*n], xr)
			top = max(top, probs[e])
		}
		for e := range probs {
			probs[e] = math.Exp(probs[e] - top)
			sum += probs[e]
		}
		chosen := make([]int, 0, used)
		for range used {
			best := -1
			for e := range probs {
				taken := false
				for _, c := range chosen {
					taken = taken || c == e
				}
				if !taken && (best < 0 || probs[e] > probs[best]) {
					best = e
				}
			}
			chosen = append(chosen, best)
		}
		total := 0.0
		for _, e := range chosen {
			total += probs[e] / sum
		}
		for _, e := range chosen {
			wt := probs[e] / sum
			if renorm {
				wt /= total
			}
			act := make([]float64, ff)
			for j := range act {
				g := dot(gate[(e*ff+j)*n:(e*ff+j+1)*n], xq)
				u := dot(up[(e*ff+j)*n:(e*ff+j+1)*n], xq)
				act[j] = g / (1 + math.Exp(-g)) * u
			}
			act = round(act)
			for j := range n {
				out[r*n+j] += wt * dot(down[(e*n+j)*ff:(e*n+j+1)*ff], act)
			}
		}
	}
	return out
}
