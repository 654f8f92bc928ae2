package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestSwigluRow: the vector SwiGLU (where this CPU has one) gives the bits
// of swigluGo, the reference, for gates across SiLU's whole range: ordinary
// activations, exp's overflow and underflow edges (|n| > 192, subnormal
// 2^n), zeros and infinities, in rows with and without a tail.
func TestSwigluRow(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	special := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 87.5, -87.5, 88.8, -88.8,
		103.9, -103.9, 126, -126, 140, -140, 200, -200, 1e30, -1e30,
		float32(math.Inf(1)), float32(math.Inf(-1)), 1e-40, -1e-40}
	for _, n := range []int{16, 1024, 1003, 5} {
		for rep := range 64 {
			gate, up := make([]float32, n), make([]float32, n)
			for i := range gate {
				switch {
				case rep == 0:
					gate[i] = special[i%len(special)]
				case rep%4 == 1: // the edges of exp's range
					gate[i] = float32(rng.Float64()*300 - 150)
				default:
					gate[i] = float32(rng.NormFloat64() * 4)
				}
				up[i] = float32(rng.NormFloat64())
			}
			got, want := make([]float32, n), make([]float32, n)
			swigluRow(got, gate, up)
			swigluGo(want, gate, up)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("n=%d: swiglu(%g, %g) = %g, reference %g", n, gate[i], up[i], got[i], want[i])
				}
			}
		}
	}
}

// BenchmarkSwiglu runs one FFN row of the demo target (1024 wide) and a
// prefill's worth; bytes/s counts gate, up and dst (the roofline is L1/L2
// bandwidth, far above what exp costs).
func BenchmarkSwiglu(b *testing.B) {
	rng := rand.New(rand.NewPCG(43, 44))
	for _, n := range []int{1024, 128 * 1024} {
		gate, up, dst := make([]float32, n), make([]float32, n), make([]float32, n)
		for i := range gate {
			gate[i], up[i] = float32(rng.NormFloat64()*4), float32(rng.NormFloat64())
		}
		for _, c := range []struct {
			name string
			fn   func(dst, gate, up []float32)
		}{{"go", swigluGo}, {"best", swigluRow}} {
			b.Run(fmt.Sprintf("%s/%d", c.name, n), func(b *testing.B) {
				b.SetBytes(int64(12 * n))
				for b.Loop() {
					c.fn(dst, gate, up)
				}
			})
		}
	}
}
