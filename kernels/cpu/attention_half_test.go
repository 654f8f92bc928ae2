package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tandem-run/tandem/kernels/quant"
)

// TestAccumulateHalf: the attention's F16 value accumulation and rescaling
// give the bits of their Go versions (the rounding llama.cpp's CPU flash
// attention makes), on random rows with subnormal and overflowing results
// mixed in, for lengths with and without a tail.
func TestAccumulateHalf(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{64, 128, 72, 13, 3} {
		for trial := range 200 {
			acc := make([]float32, n)
			v := make([]byte, 2*n)
			x := make([]float32, n)
			for i := range acc {
				scale := []float64{1, 1e-6, 3e4}[trial%3] // normal, subnormal, overflowing halves
				acc[i] = roundHalf(float32(rng.NormFloat64() * scale))
				x[i] = float32(rng.NormFloat64() * []float64{1, 1e-6}[rng.IntN(2)])
			}
			if err := quant.Quantize(quant.F16, x, v); err != nil {
				t.Fatal(err)
			}
			vs := float32(rng.Float64())
			want := append([]float32(nil), acc...)
			accumulateHalfGo(want, v, vs)
			got := append([]float32(nil), acc...)
			accumulateHalf(got, v, vs)
			sameBits(t, "accumulateHalf", n, got, want)

			ms := float32(rng.Float64())
			copy(want, acc)
			scaleHalfGo(want, ms)
			copy(got, acc)
			scaleHalf(got, ms)
			sameBits(t, "scaleHalf", n, got, want)
		}
	}
}

func sameBits(t *testing.T, what string, n int, got, want []float32) {
	t.Helper()
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s n=%d: element %d = %g, Go version %g", what, n, i, got[i], want[i])
		}
	}
}

// BenchmarkAccumulateHalf adds one 128-element F16 value row to the
// accumulator, as attention does per head and position.
func BenchmarkAccumulateHalf(b *testing.B) {
	const n = 128
	acc, v := make([]float32, n), make([]byte, 2*n)
	for i := range acc {
		h := halfBitsOf(float32(i) / n)
		v[2*i], v[2*i+1] = byte(h), byte(h>>8)
	}
	b.SetBytes(int64(len(v) + 8*n))
	for b.Loop() {
		accumulateHalf(acc, v, 0.5)
	}
}

// TestMadQuantized: the fused dequantize-and-accumulate of Q8_0 and Q4_0
// value rows gives the bits of quant.Dequantize followed by madF32.
func TestMadQuantized(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, typ := range []quant.Type{quant.Q8_0, quant.Q4_0} {
		for trial := range 100 {
			n := 32 * (1 + trial%4)
			x := make([]float32, n)
			acc := make([]float32, n)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
				acc[i] = float32(rng.NormFloat64())
			}
			rb, _ := typ.RowBytes(int64(n))
			v := make([]byte, rb)
			if err := quant.Quantize(typ, x, v); err != nil {
				t.Fatal(err)
			}
			vs := float32(rng.Float64())
			want := append([]float32(nil), acc...)
			row := make([]float32, n)
			if err := quant.Dequantize(typ, v, row); err != nil {
				t.Fatal(err)
			}
			madF32(want, row, vs)
			got := append([]float32(nil), acc...)
			if typ == quant.Q8_0 {
				madQ8_0(got, v, vs)
			} else {
				madQ4_0(got, v, vs)
			}
			sameBits(t, "mad "+typ.String(), n, got, want)
		}
	}
}
