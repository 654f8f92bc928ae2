package sample

import (
	"math"
	"math/rand/v2"
	"testing"
)

func randomLogits(seed uint64, n int) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 3)
	}
	return x
}

// must fails t on err and otherwise returns the token.
func must(t testing.TB) func(int32, error) int32 {
	return func(tok int32, err error) int32 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
}

func support(p []float32) int {
	n := 0
	for _, v := range p {
		if v > 0 {
			n++
		}
	}
	return n
}

func TestProbs(t *testing.T) {
	logits := []float32{1, 3, 2, 0, 3}
	cases := []struct {
		name    string
		p       Params
		support int
		top     int32
	}{
		{"greedy", Params{}, 1, 1},
		{"temperature", Params{Temperature: 1}, 5, 1},
		{"top-k 2", Params{Temperature: 1, TopK: 2}, 2, 1},
		{"top-p", Params{Temperature: 1, TopP: 0.5}, 2, 1}, // two tied at 0.42 each
		{"top-p small", Params{Temperature: 1, TopP: 0.3}, 1, 1},
		{"min-p", Params{Temperature: 1, MinP: 0.3}, 3, 1}, // e^-1 = 0.37 keeps logit 2
		{"repeat penalty", Params{RepeatPenalty: 2}, 1, 4},
		{"presence penalty", Params{PresencePenalty: 5}, 1, 4},
	}
	for _, c := range cases {
		s := NewSeeded(c.p)
		p, err := s.Probs(nil, logits, []int32{1})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var sum float64
		for _, v := range p {
			sum += float64(v)
		}
		if math.Abs(sum-1) > 1e-5 {
			t.Errorf("%s: probabilities sum to %v", c.name, sum)
		}
		if got := support(p); got != c.support {
			t.Errorf("%s: %d tokens kept, want %d (%v)", c.name, got, c.support, p)
		}
		if got := Argmax(p); got != c.top {
			t.Errorf("%s: most likely %d, want %d", c.name, got, c.top)
		}
	}
}

// Temperature alone is a plain softmax, on a small vocabulary and on one
// of several chunks (softmaxAll) with tokens that cannot be drawn (-Inf,
// as a grammar's mask leaves them).
func TestTemperatureMatchesSoftmax(t *testing.T) {
	for _, n := range []int{50, 3*softmaxChunk + 17} {
		logits := randomLogits(3, n)
		for i := 5; i < n; i += n / 7 {
			logits[i] = float32(math.Inf(-1))
		}
		p, err := NewSeeded(Params{Temperature: 0.7}).Probs(nil, logits, nil)
		if err != nil {
			t.Fatal(err)
		}
		var z float64
		for _, l := range logits {
			z += math.Exp(float64(l) / 0.7)
		}
		for i, l := range logits {
			if want := math.Exp(float64(l)/0.7) / z; math.Abs(float64(p[i])-want) > 1e-5*want {
				t.Fatalf("%d tokens: p[%d] = %v, want %v", n, i, p[i], want)
			}
		}
	}
}

func TestSeedReproduces(t *testing.T) {
	logits := randomLogits(7, 1000)
	params := Params{Temperature: 0.9, TopK: 40, TopP: 0.95, MinP: 0.05, Seed: 42}
	run := func() []int32 {
		s := NewSeeded(params)
		var out []int32
		for range 50 {
			out = append(out, must(t)(s.Sample(logits, out)))
		}
		return out
	}
	a, b := run(), run()
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("seeded runs differ at %d: %v vs %v", i, a, b)
		}
	}
	params.Seed = 43
	s := NewSeeded(params)
	same := true
	for i := range a {
		if must(t)(s.Sample(logits, a[:i])) != a[i] {
			same = false
		}
	}
	if same {
		t.Error("another seed gave the same 50 tokens")
	}
}

func TestSampleFollowsProbs(t *testing.T) {
	logits := []float32{0, 1, 2}
	s := NewSeeded(Params{Temperature: 1, Seed: 1})
	p, err := s.Probs(nil, logits, nil)
	if err != nil {
		t.Fatal(err)
	}
	counts := make([]int, 3)
	const n = 60000
	for range n {
		counts[must(t)(s.Sample(logits, nil))]++
	}
	for i := range counts {
		got := float64(counts[i]) / n
		if math.Abs(got-float64(p[i])) > 0.01 {
			t.Errorf("token %d drawn %.3f of the time, p = %.3f", i, got, p[i])
		}
	}
}

func BenchmarkProbsQwenVocab(b *testing.B) {
	logits := randomLogits(1, 151936)
	s := NewSeeded(Params{Temperature: 0.8, TopK: 40, TopP: 0.95})
	dst := make([]float32, len(logits))
	b.SetBytes(int64(4 * len(logits)))
	for b.Loop() {
		if _, err := s.Probs(dst, logits, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// A token at temperature alone over a Qwen vocabulary: the target-alone
// step of a sampled request (every token a candidate, softmaxAll).
func BenchmarkSampleQwenVocabTemperature(b *testing.B) {
	logits := randomLogits(1, 151936)
	s := NewSeeded(Params{Temperature: 0.7})
	b.SetBytes(int64(4 * len(logits)))
	for b.Loop() {
		if _, err := s.Sample(logits, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// A verified row's distribution at temperature alone over a Qwen
// vocabulary (speculative verification's Probs, every token a candidate).
func BenchmarkProbsQwenVocabTemperature(b *testing.B) {
	logits := randomLogits(1, 151936)
	s := NewSeeded(Params{Temperature: 0.7})
	dst := make([]float32, len(logits))
	b.SetBytes(int64(4 * len(logits)))
	for b.Loop() {
		if _, err := s.Probs(dst, logits, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// The windowed top-p and heap top-k agree with a plain full sort.
func TestCandidatesMatchFullSort(t *testing.T) {
	for seed := range uint64(20) {
		logits := randomLogits(seed, 3000)
		for _, p := range []Params{
			{Temperature: 1, TopP: 0.9}, {Temperature: 1, TopP: 0.999}, {Temperature: 1, TopK: 50},
			{Temperature: 1, TopK: 100, TopP: 0.5, MinP: 0.01}, {Temperature: 1, MinP: 0.2},
		} {
			got := append([]int32(nil), NewSeeded(p).candidates(append([]float32(nil), logits...))...)
			want := referenceCandidates(logits, p)
			if len(got) != len(want) {
				t.Fatalf("seed %d %+v: %d candidates, want %d", seed, p, len(got), len(want))
			}
			seen := map[int32]bool{}
			for _, id := range got {
				seen[id] = true
			}
			for _, id := range want {
				if !seen[id] {
					t.Fatalf("seed %d %+v: token %d missing", seed, p, id)
				}
			}
		}
	}
}

func referenceCandidates(x []float32, p Params) []int32 {
	ids := make([]int32, len(x))
	for i := range ids {
		ids[i] = int32(i)
	}
	sortDesc(ids, x)
	if p.TopK > 0 {
		ids = ids[:p.TopK]
	}
	maxv := float64(x[ids[0]])
	var total float64
	for _, i := range ids {
		total += math.Exp(float64(x[i]) - maxv)
	}
	if p.TopP > 0 && p.TopP < 1 {
		var acc float64
		for j, i := range ids {
			acc += math.Exp(float64(x[i])-maxv) / total
			if acc >= p.TopP {
				ids = ids[:j+1]
				break
			}
		}
	}
	if p.MinP > 0 {
		var kept []int32
		for _, i := range ids {
			if math.Exp(float64(x[i])-maxv) >= p.MinP {
				kept = append(kept, i)
			}
		}
		ids = kept
	}
	return ids
}
