package sample

import (
	"math"
	"math/rand/v2"
	"testing"
)

// seqDraw is the inverse-CDF draw written out plainly: the reference for
// Draw's chunked one.
func seqDraw(w []float64, u float64) int32 {
	var sum float64
	for _, v := range w {
		sum += max(v, 0)
	}
	target, acc, last := u*sum, 0.0, int32(-1)
	for i, v := range w {
		if v > 0 {
			acc += v
			last = int32(i)
			if target < acc {
				return last
			}
		}
	}
	return last
}

// probRow is a distribution over n tokens, peaked as a sampled model's is
// (softmax of random logits at temperature 0.7), with some exact zeros.
func probRow(seed uint64, n int) []float32 {
	x := randomLogits(seed, n)
	p := make([]float32, n)
	var sum float64
	for i, v := range x {
		if i%97 == 5 {
			continue
		}
		e := math.Exp(float64(v) / 0.7)
		p[i] = float32(e)
		sum += e
	}
	for i := range p {
		p[i] = float32(float64(p[i]) / sum)
	}
	return p
}

func widen(p []float32) []float64 {
	w := make([]float64, len(p))
	for i, v := range p {
		w[i] = float64(v)
	}
	return w
}

// Draw (chunked over a Qwen vocabulary, plain below a chunk) gives the
// plain inverse-CDF draw's token, for draws spread over [0, 1) and at its
// ends.
func TestDrawMatchesSequential(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{3, 1000, softmaxChunk + 1, 151936} {
		p := probRow(uint64(n), n)
		w := widen(p)
		us := []float64{0, 1 - 1e-16, 0.5}
		for range 300 {
			us = append(us, r.Float64())
		}
		for _, u := range us {
			if got, want := Draw(p, u), seqDraw(w, u); got != want {
				t.Errorf("n=%d u=%v: Draw %d, sequential %d", n, u, got, want)
			}
		}
	}
}

// DrawExcess draws from max(0, p - q) normalised, q shorter than p
// included (the tokens past it count whole), and reports no mass when q
// covers p.
func TestDrawExcessMatchesSequential(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{5, 2000, 151936} {
		p := probRow(uint64(n), n)
		for _, qn := range []int{n, n - n/3} {
			q := probRow(uint64(n)+1, qn)
			w := make([]float64, n)
			for i := range w {
				w[i] = float64(p[i])
				if i < qn {
					w[i] -= float64(q[i])
				}
			}
			for range 200 {
				u := r.Float64()
				got, ok := DrawExcess(p, q, u)
				if want := seqDraw(w, u); !ok || got != want {
					t.Errorf("n=%d, q of %d, u=%v: DrawExcess %d (%v), sequential %d", n, qn, u, got, ok, want)
				}
			}
		}
		if got, ok := DrawExcess(p, p, 0.3); ok {
			t.Errorf("n=%d: DrawExcess(p, p) = %d, want no mass", n, got)
		}
	}
}

// The draws land as often as their probabilities say (a coarse check that
// the chunk scan adds the right offsets): three heavy tokens placed in
// different chunks of a Qwen-sized row.
func TestDrawChunkOffsets(t *testing.T) {
	p := make([]float32, 151936)
	heavy := map[int]float64{10: 0.2, 70000: 0.5, 151935: 0.3}
	for i, v := range heavy {
		p[i] = float32(v)
	}
	r := rand.New(rand.NewPCG(3, 4))
	counts := map[int32]int{}
	const n = 20000
	for range n {
		counts[Draw(p, r.Float64())]++
	}
	for i, v := range heavy {
		if got := float64(counts[int32(i)]) / n; math.Abs(got-v) > 0.015 {
			t.Errorf("token %d drawn %.3f of the time, p = %.2f", i, got, v)
		}
	}
	if len(counts) != len(heavy) {
		t.Errorf("drew %d distinct tokens, want %d", len(counts), len(heavy))
	}
}

// A draw over a Qwen vocabulary's probabilities: a sampled draft's step
// once the softmax ran where the logits are (model.ForwardProbs).
func BenchmarkDrawQwenVocab(b *testing.B) {
	p := probRow(1, 151936)
	r := rand.New(rand.NewPCG(1, 2))
	b.SetBytes(int64(4 * len(p)))
	for b.Loop() {
		Draw(p, r.Float64())
	}
}

// The residual's draw over a Qwen vocabulary: a rejected round's.
func BenchmarkDrawExcessQwenVocab(b *testing.B) {
	p, q := probRow(1, 151936), probRow(2, 151936)
	r := rand.New(rand.NewPCG(1, 2))
	b.SetBytes(int64(8 * len(p)))
	for b.Loop() {
		DrawExcess(p, q, r.Float64())
	}
}
