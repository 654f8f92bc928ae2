package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestExpApprox holds ggml's exp to its documented accuracy (1.5 ulp plus
// rounding) over the range SiLU meets, and checks the edges.
func TestExpApprox(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 1 << 18 {
		x := float32(rng.Float64()*176 - 88)
		got, want := float64(expApprox(x)), math.Exp(float64(x))
		ulp := float64(math.Nextafter32(float32(want), float32(math.Inf(1)))) - float64(float32(want))
		if want < 0x1p-126 { // subnormal results: absolute ulp
			ulp = 0x1p-149
		}
		if math.Abs(got-want) > 2.5*ulp {
			t.Fatalf("expApprox(%g) = %g, exp %g (%.2f ulp)", x, got, want, math.Abs(got-want)/ulp)
		}
	}
	for _, c := range []struct{ x, want float32 }{{0, 1}, {-200, 0}, {200, float32(math.Inf(1))}} {
		if got := expApprox(c.x); got != c.want {
			t.Errorf("expApprox(%g) = %g, want %g", c.x, got, c.want)
		}
	}
}

func BenchmarkExpApprox(b *testing.B) {
	x := make([]float32, 1024)
	for i := range x {
		x[i] = float32(i)/64 - 8
	}
	b.SetBytes(4 * int64(len(x)))
	var s float32
	for b.Loop() {
		for _, v := range x {
			s += expApprox(v)
		}
	}
	_ = s
}
