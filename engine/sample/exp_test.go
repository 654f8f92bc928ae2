package sample

import (
	"math"
	"math/rand/v2"
	"testing"
)

// expNeg agrees with math.Exp over the range a softmax uses, at random
// points and at the edges of its range reduction.
func TestExpNeg(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	check := func(y float64) {
		t.Helper()
		got, want := expNeg(y), math.Exp(y)
		if want == 0 || y < -708 {
			if got != 0 && math.Abs(got-want) > 1e-300 {
				t.Errorf("expNeg(%g) = %g, want %g", y, got, want)
			}
			return
		}
		if rel := math.Abs(got-want) / want; rel > 1e-11 {
			t.Errorf("expNeg(%g) = %.17g, math.Exp %.17g (relative error %.2g)", y, got, want, rel)
		}
	}
	for range 200000 {
		check(-r.Float64() * 120)
	}
	for range 20000 {
		check(-r.ExpFloat64() * 1e-3)
	}
	for n := range 1100 {
		half := (float64(n) + 0.5) * math.Ln2
		for _, d := range []float64{-1e-12, 0, 1e-12} {
			check(-half + d)
		}
	}
	for _, y := range []float64{0, -0.0, -1e-300, -707.9, -708, -708.1, -745, -1e300, math.Inf(-1)} {
		check(y)
	}
	if got := expNeg(math.NaN()); got != 0 {
		t.Errorf("expNeg(NaN) = %g", got)
	}
}

func BenchmarkExpNeg(b *testing.B) {
	ys := make([]float64, 4096)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range ys {
		ys[i] = -r.Float64() * 40
	}
	var s float64
	for b.Loop() {
		for _, y := range ys {
			s += expNeg(y)
		}
	}
	_ = s
}

func BenchmarkMathExp(b *testing.B) {
	ys := make([]float64, 4096)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range ys {
		ys[i] = -r.Float64() * 40
	}
	var s float64
	for b.Loop() {
		for _, y := range ys {
			s += math.Exp(y)
		}
	}
	_ = s
}

// The draw that scans only the chunk its target falls in picks what a scan
// of the whole does, vocabulary after vocabulary (the chunk sums are kept
// per call).
func TestDrawChunkedIsDrawFrom(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	s := NewSeeded(Params{Temperature: 0.7})
	for _, n := range []int{3*softmaxChunk + 100, 8192, 151936, softmaxChunk} {
		x := randomLogits(uint64(n), n)
		e := make([]float32, n)
		sum := s.exps(e, x, x[Argmax(x)])
		for range 2000 {
			target := r.Float64() * sum
			if got, want := s.drawChunked(e, target), drawFrom(e, target); got != want {
				t.Fatalf("vocabulary %d, target %g of %g: chunked draw %d, whole %d", n, target, sum, got, want)
			}
		}
	}
}
