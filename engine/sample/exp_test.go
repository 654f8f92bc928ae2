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
	for _, y := range []float64{0, math.Copysign(0, -1), -1e-300, -707.9, -708, -708.1, -745, -1e300, math.Inf(-1)} {
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
			if got, want := drawInChunks(e, s.sums, target), drawFrom(e, target); got != want {
				t.Fatalf("vocabulary %d, target %g of %g: chunked draw %d, whole %d", n, target, sum, got, want)
			}
		}
	}
}

// Pick gives what Probs gives, that distribution's largest probability,
// and, on the same randomness, the token Draw picks from it.
func TestPickIsProbsAndDraw(t *testing.T) {
	for _, p := range []Params{{Temperature: 0.7, Seed: 5}, {Temperature: 1.3, TopK: 40, TopP: 0.9, Seed: 6}, {Temperature: 0.8, RepeatPenalty: 1.3, Seed: 7}} {
		a, b := NewSeeded(p), NewSeeded(p)
		history := []int32{3, 17, 17, 40000}
		for i := range 40 {
			logits := randomLogits(uint64(100+i), 151936)
			got, tok, top, err := a.Pick(nil, logits, history)
			if err != nil {
				t.Fatal(err)
			}
			want, err := b.Probs(nil, logits, history)
			if err != nil {
				t.Fatal(err)
			}
			for j := range want {
				if got[j] != want[j] {
					t.Fatalf("%+v: p[%d] = %g, Probs %g", p, j, got[j], want[j])
				}
			}
			if w := want[Argmax(want)]; top != float64(w) {
				t.Errorf("%+v: top %g, want %g", p, top, w)
			}
			if w := Draw(want, b.Uniform()); tok != w {
				t.Errorf("%+v: drew %d, Draw %d", p, tok, w)
			}
		}
	}
}

// A sampled draft's step over a Qwen vocabulary: the token, its
// distribution and the draft's confidence.
func BenchmarkPickQwenVocabTemperature(b *testing.B) {
	logits := randomLogits(1, 151936)
	s := NewSeeded(Params{Temperature: 0.7})
	dst := make([]float32, len(logits))
	b.SetBytes(int64(4 * len(logits)))
	for b.Loop() {
		if _, _, _, err := s.Pick(dst, logits, nil); err != nil {
			b.Fatal(err)
		}
	}
}
