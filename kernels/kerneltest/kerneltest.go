// Package kerneltest checks any kernels.Backend op by op against float64
// references written from the op definitions in package kernels, on random
// non-zero inputs at several sizes, and benchmarks the ops that dominate a
// forward pass. The CPU backend's tests run it, and so does every other
// backend's, which is what makes the CPU backend a reference without
// comparing it with itself.
package kerneltest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// Tolerances, relative to the scale each check names. Products are judged
// against sum |w||x| of the exact product with the activations a backend is
// expected to use: float32 for float weights (F16 tensor-core inputs stay
// well inside), and for quantized weights the activations rounded to
// quant.ActivationType, as llama.cpp's CPU backend does — so a 1% error in
// a kernel cannot hide in the noise of 8-bit activations.
const (
	tolElementwise  = 1e-5 // of the largest |output|
	tolDot          = 2e-4 // of sum |w||x|
	tolRope         = 5e-4 // of the largest |x|
	tolAttention    = 1e-4 // of the largest |v|
	tolAttentionF16 = 5e-3 // of the largest |v|, for F16 caches
	tolAttentionQ8  = 1e-2 // of the largest |v|, for a Q8_0 or Q4_0 K (a Q8_0 query)
)

// Check runs every op on be against the references. Ops or weight types be
// does not support are skipped with a note, so the log lists the gaps.
func Check(t *testing.T, be kernels.Backend) {
	for _, c := range cases() {
		t.Run(c.name, func(t *testing.T) {
			h := &harness{t: t, be: be, rng: rand.New(rand.NewPCG(1, uint64(len(c.name))))}
			defer h.free()
			c.run(h)
		})
	}
}

type opCase struct {
	name string
	run  func(h *harness)
}

// harness builds tensors on the backend under test and checks results.
type harness struct {
	t    testing.TB
	be   kernels.Backend
	rng  *rand.Rand
	bufs []kernels.Buffer
}

func (h *harness) free() {
	for _, b := range h.bufs {
		if err := h.be.Free(b); err != nil {
			h.t.Error(err)
		}
	}
}

var testLabel = kernels.Label{Owner: "test", Cat: kernels.Scratch}

// tensor allocates a packed tensor and fills it with data (raw bytes).
func (h *harness) tensor(typ quant.Type, rows, cols int, data []byte) kernels.Tensor {
	h.t.Helper()
	rb, err := typ.RowBytes(int64(cols))
	if err != nil {
		h.t.Fatal(err)
	}
	buf, err := h.be.Alloc(testLabel, int64(rows)*rb)
	if err != nil {
		h.t.Fatal(err)
	}
	h.bufs = append(h.bufs, buf)
	x := kernels.NewTensor(buf, typ, rows, cols, 0)
	if data != nil {
		if err := h.be.Write(x, data); err != nil {
			h.t.Fatal(err)
		}
	}
	return x
}

func (h *harness) f32(rows, cols int, vals []float32) kernels.Tensor {
	return h.tensor(quant.F32, rows, cols, kernels.F32Bytes(vals))
}

func (h *harness) i32(vals []int32) kernels.Tensor {
	return h.tensor(quant.I32, 1, len(vals), kernels.I32Bytes(vals))
}

// run compiles and runs ops, failing the test on error; it returns false
// (after a log line) when the backend does not support one of them.
func (h *harness) run(ops ...kernels.Op) bool {
	h.t.Helper()
	for _, op := range ops {
		if !h.be.Supports(op) {
			h.t.Logf("%s: not supported by %s", describe(op), h.be.Name())
			return false
		}
	}
	p, err := h.be.Compile(ops)
	if err != nil {
		h.t.Fatal(err)
	}
	defer p.Close()
	if err := p.Run(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	if err := h.be.Sync(); err != nil {
		h.t.Fatal(err)
	}
	return true
}

func describe(op kernels.Op) string {
	switch o := op.(type) {
	case kernels.MatMul:
		return fmt.Sprintf("%s %v", o.Name(), o.W.Type)
	case kernels.GetRows:
		return fmt.Sprintf("%s %v", o.Name(), o.Src.Type)
	}
	return op.Name()
}

func (h *harness) readF32(x kernels.Tensor) []float32 {
	h.t.Helper()
	out := make([]float32, x.Elements())
	if err := h.be.Read(kernels.F32Bytes(out), x); err != nil {
		h.t.Fatal(err)
	}
	return out
}

func (h *harness) readI32(x kernels.Tensor) []int32 {
	h.t.Helper()
	out := make([]int32, x.Elements())
	if err := h.be.Read(kernels.I32Bytes(out), x); err != nil {
		h.t.Fatal(err)
	}
	return out
}

// normal is n values from N(0, scale^2), never exactly zero.
func (h *harness) normal(n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		for v[i] == 0 {
			v[i] = float32(h.rng.NormFloat64() * scale)
		}
	}
	return v
}

// closeTo fails when any |got-want| exceeds tol*scale.
func (h *harness) closeTo(what string, got []float32, want []float64, tol, scale float64) {
	h.t.Helper()
	if len(got) != len(want) {
		h.t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	worst, at := 0.0, 0
	for i := range got {
		d := math.Abs(float64(got[i]) - want[i])
		if d != d || d > worst {
			worst, at = d, i
		}
	}
	if !(worst <= tol*scale) {
		h.t.Errorf("%s: |got-want| = %.3g at %d (got %g, want %g), tolerance %.3g", what, worst, at, got[at], want[at], tol*scale)
	}
}

func maxAbs(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, math.Abs(x))
	}
	return m
}

func maxAbs32(v []float32) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, math.Abs(float64(x)))
	}
	return m
}
