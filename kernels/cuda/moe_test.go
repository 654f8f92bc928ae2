package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// moeTolerance is the relative error allowed against the CPU, whose expert
// products read the activations in the weight type's activation type
// (8-bit for the integer types, F16 for F16) where moe.cu reads F32.
func moeTolerance(t quant.Type) float64 {
	switch quant.ActivationType(t) {
	case quant.F32:
		return 1e-5
	case quant.F16:
		return 2e-3
	}
	return 2e-2
}

// MoE of one row (decode) and of batches whose rows share experts (a
// prefill chunk, a verification), renormalised or not, with the expert
// types of F16, Q8_0 and Q4_K_M files; the router F32 as llama.cpp writes
// it, or F16.
func TestMoE(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct {
		wt, down, router    quant.Type
		rows, experts, used int
		n, ff               int
		renorm              bool
	}{
		{quant.F32, quant.F32, quant.F32, 1, 8, 2, 256, 256, true},
		{quant.F16, quant.F16, quant.F16, 1, 8, 2, 256, 512, true},
		{quant.F16, quant.F16, quant.F32, 7, 8, 2, 512, 256, false},
		{quant.Q8_0, quant.Q8_0, quant.F32, 5, 16, 4, 256, 256, true},
		{quant.Q4_K, quant.Q6_K, quant.F32, 1, 16, 4, 512, 256, true},
		{quant.Q4_K, quant.Q4_K, quant.F32, 33, 16, 8, 256, 768, true},
		{quant.Q6_K, quant.Q6_K, quant.F32, 9, 32, 8, 256, 256, false},
		{quant.Q4_K, quant.Q6_K, quant.F32, 64, 8, 2, 256, 256, true}, // more pairs per expert than a warp takes at once
		{quant.Q5_K, quant.Q6_K, quant.BF16, 3, 8, 2, 256, 256, true},
		{quant.Q4_0, quant.Q5_0, quant.F32, 2, 8, 2, 256, 256, true},
		{quant.Q4_1, quant.Q5_1, quant.F16, 2, 8, 2, 256, 256, true},
		{quant.IQ4_NL, quant.Q8_0, quant.F32, 2, 8, 2, 256, 256, true},
	} {
		name := fmt.Sprintf("%v-%v/router%v/b%d/e%d-%d/renorm=%v", c.wt, c.down, c.router, c.rows, c.experts, c.used, c.renorm)
		t.Run(name, func(t *testing.T) {
			h.t = t
			x := h.random(quant.F32, c.rows, c.n)
			router := h.random(c.router, c.experts, c.n)
			// weights of std 0.05: the experts' outputs stay of the inputs' size
			gate := h.scaled(c.wt, c.experts*c.ff, c.n, 0.05)
			up := h.scaled(c.wt, c.experts*c.ff, c.n, 0.05)
			down := h.scaled(c.down, c.experts*c.n, c.ff, 0.05)
			y := h.output(quant.F32, c.rows, c.n)
			h.check(func(side func(*pair) kernels.Tensor) []kernels.Op {
				return []kernels.Op{kernels.MoE{Dst: side(y), X: side(x), Router: side(router), Gate: side(gate),
					Up: side(up), Down: side(down), Experts: c.experts, Used: c.used, Renorm: c.renorm}}
			}, []*pair{x, router, gate, up, down, y}, func(int) { h.expectClose(y, moeTolerance(c.wt), "moe") })
		})
	}
	// In place (Dst = X), as engine/model runs it.
	t.Run("in-place", func(t *testing.T) {
		h.t = t
		x := h.random(quant.F32, 3, 256)
		router := h.random(quant.F32, 8, 256)
		gate, up, down := h.scaled(quant.F16, 8*256, 256, 0.05), h.scaled(quant.F16, 8*256, 256, 0.05), h.scaled(quant.F16, 8*256, 256, 0.05)
		h.check(func(side func(*pair) kernels.Tensor) []kernels.Op {
			return []kernels.Op{kernels.MoE{Dst: side(x), X: side(x), Router: side(router), Gate: side(gate),
				Up: side(up), Down: side(down), Experts: 8, Used: 2, Renorm: true}}
		}, []*pair{x, router, gate, up, down}, func(int) { h.expectClose(x, moeTolerance(quant.F16), "moe") })
	})
}

// A MoE whose types moe.cu lacks is refused by Supports and Compile alike.
func TestMoERefused(t *testing.T) {
	be := openGPU(t)
	probe := kernels.Tensor{Type: quant.F16}
	op := kernels.MoE{Router: probe, Gate: probe, Up: kernels.Tensor{Type: quant.Q8_0}, Down: probe}
	if be.Supports(op) {
		t.Error("gate F16 with up Q8_0 is supported")
	}
	if err := moeSupported(op); err == nil {
		t.Error("moeSupported accepts gate F16 with up Q8_0")
	}
	q3 := kernels.Tensor{Type: quant.Q3_K}
	if be.Supports(kernels.MoE{Router: probe, Gate: q3, Up: q3, Down: q3}) {
		t.Error("Q3_K experts (no dequant1) are supported")
	}
}

func TestGeGLUScale(t *testing.T) {
	h := newHarness(t)
	g, u := h.random(quant.F32, 3, 700), h.random(quant.F32, 3, 700)
	y, s := h.output(quant.F32, 3, 700), h.output(quant.F32, 3, 700)
	h.check(func(side func(*pair) kernels.Tensor) []kernels.Op {
		return []kernels.Op{
			kernels.GeGLU{Dst: side(y), Gate: side(g), Up: side(u)},
			kernels.Scale{Dst: side(s), X: side(g), C: 45.25},
		}
	}, []*pair{g, u, y, s}, func(int) {
		h.expectClose(y, 1e-6, "geglu")
		h.expectClose(s, 1e-7, "scale")
	})
}

// Sliding-window attention: windows shorter and longer than the keys so
// far, one row and several (consecutive positions, and random ones).
func TestWindowAttention(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct {
		k, v                 quant.Type
		headDim, rows, first int
		window, nHead, nKV   int
	}{
		{quant.F32, quant.F32, 64, 1, 0, 5, 8, 2},
		{quant.F32, quant.F32, 128, 1, 250, 5, 8, 2},
		{quant.F16, quant.F16, 128, 1, 299, 64, 8, 4},
		{quant.F16, quant.F16, 256, 5, 40, 17, 8, 2},
		{quant.F16, quant.F16, 128, 9, -1, 32, 16, 8},
		{quant.F32, quant.F16, 96, 3, 100, 512, 4, 4},
		{quant.F16, quant.F32, 32, 2, 10, 1, 4, 1},
	} {
		t.Run(fmt.Sprintf("%v-%v/hd%d/b%d/pos%d/w%d", c.k, c.v, c.headDim, c.rows, c.first, c.window), func(t *testing.T) {
			h.t = t
			const nCtx = 300
			a := h.attention(attnShape{kType: c.k, vType: c.v, headDim: c.headDim, rows: c.rows, nCtx: nCtx, nHead: c.nHead, nKV: c.nKV,
				window: c.window}, h.positions(c.first, nCtx))
			tol := attentionTolerance(c.k)
			if c.v == quant.F16 {
				tol = attentionTolerance(c.v)
			}
			h.check(a.ops, a.pairs(), func(int) { h.expectClose(a.y, tol, "window attention") })
		})
	}
}

// One Qwen3-30B-A3B MoE block (width 2048, 128 experts of 768, 8 a token;
// Q4_K gate/up, Q6_K down as in its Q4_K_M file): decode reads the 8
// chosen experts' slices, a batch of 64 (512 routings) nearly all 128.
// Bytes are the expert weights the routing reads (the router's too), so
// B/s against the H200's ~4.3 TB/s says how near the weights' speed it runs.
func BenchmarkMoE(b *testing.B) {
	gpu := openGPU(b)
	rng := rand.New(rand.NewPCG(1, 9))
	lbl := kernels.Label{Owner: "bench", Cat: kernels.Weights}
	const n, ff, experts, used = 2048, 768, 128, 8
	upload := func(typ quant.Type, rows, cols int, std float64) kernels.Tensor {
		t := deviceTensor(b, gpu, lbl, typ, rows, cols)
		benchFill(b, gpu, rng, std, t)
		return t
	}
	router := upload(quant.F32, experts, n, 0.05)
	gate, up := upload(quant.Q4_K, experts*ff, n, 0.02), upload(quant.Q4_K, experts*ff, n, 0.02)
	down := upload(quant.Q6_K, experts*n, ff, 0.02)
	for _, rows := range []int{1, 4, 64} {
		b.Run(fmt.Sprintf("Q4_K-Q6_K/b%d", rows), func(b *testing.B) {
			x := upload(quant.F32, rows, n, 1)
			y := upload(quant.F32, rows, n, 1)
			perExpert := (gate.Bytes() + up.Bytes() + down.Bytes()) / experts
			// Expected distinct experts of rows*used random picks.
			distinct := experts * (1 - math.Pow(1-1/float64(experts), float64(rows*used)))
			op := kernels.MoE{Dst: y, X: x, Router: router, Gate: gate, Up: up, Down: down, Experts: experts, Used: used, Renorm: true}
			benchProgram(b, gpu, []kernels.Op{op}, router.Bytes()+int64(distinct*float64(perExpert)))
		})
	}
}
