package sample

import (
	"errors"
	"math"
	"testing"
	"time"
)

// within runs f and fails t if it has not returned after a generous
// deadline: the bugs these tests guard against were endless loops.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: still running after 30 s", what)
	}
}

// Hostile settings are clamped into ranges where the arithmetic stays
// finite: every call returns a token in the vocabulary, and the
// distribution sums to one.
func TestHostileSettingsStayFinite(t *testing.T) {
	logits := randomLogits(3, 500)
	history := []int32{1, 2, 3, 4, 5, 7, 9}
	inf, nan := math.Inf(1), math.NaN()
	for _, c := range []struct {
		name string
		p    Params
	}{
		{"repeat penalty 1e-40 with top-p", Params{Temperature: 1, RepeatPenalty: 1e-40, TopP: 0.9}},
		{"repeat penalty 1e40 with top-p", Params{Temperature: 1, RepeatPenalty: 1e40, TopP: 0.9}},
		{"repeat penalty NaN", Params{Temperature: 1, RepeatPenalty: nan, TopP: 0.9}},
		{"repeat penalty -Inf", Params{Temperature: 1, RepeatPenalty: math.Inf(-1), TopK: 5}},
		{"presence penalty Inf", Params{Temperature: 1, PresencePenalty: inf, TopP: 0.5}},
		{"frequency penalty -1e300", Params{Temperature: 1, FrequencyPenalty: -1e300, TopP: 0.5}},
		{"presence penalty NaN", Params{Temperature: 1, PresencePenalty: nan, MinP: 0.1}},
		{"temperature Inf", Params{Temperature: inf, TopP: 0.9}},
		{"temperature NaN", Params{Temperature: nan, TopP: 0.9}},
		{"temperature 5e-324", Params{Temperature: 5e-324, TopP: 0.9}},
		{"top-p NaN", Params{Temperature: 1, TopP: nan}},
		{"top-p 1-1e-16", Params{Temperature: 1, TopP: 1 - 1e-16}},
		{"min-p Inf", Params{Temperature: 1, MinP: inf}},
		{"min-p NaN with top-p", Params{Temperature: 1, MinP: nan, TopP: 0.3}},
		{"top-k negative", Params{Temperature: 1, TopK: -5, TopP: 0.9}},
		{"penalty window negative", Params{Temperature: 1, RepeatPenalty: 1.3, PenaltyLastN: -1}},
	} {
		within(t, c.name, func() {
			s := NewSeeded(c.p)
			for range 20 {
				tok, err := s.Sample(logits, history)
				if err != nil {
					t.Errorf("%s: %v", c.name, err)
					return
				}
				if tok < 0 || int(tok) >= len(logits) {
					t.Errorf("%s: token %d outside the vocabulary", c.name, tok)
					return
				}
				history = append(history, tok)
			}
			p, err := s.Probs(nil, logits, history)
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
				return
			}
			var sum float64
			for _, v := range p {
				if v != v || v < 0 {
					t.Errorf("%s: probability %v", c.name, v)
					return
				}
				sum += float64(v)
			}
			if math.Abs(sum-1) > 1e-4 {
				t.Errorf("%s: probabilities sum to %v", c.name, sum)
			}
		})
	}
}

// Logits with NaN or +Inf (a model whose weights overflow) are an error for
// that call, under every setting; the same sampler then works on good logits.
func TestNonFiniteLogitsAreAnError(t *testing.T) {
	good := randomLogits(5, 300)
	bad := func(at int, v float32) []float32 {
		x := append([]float32(nil), good...)
		x[at] = v
		return x
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	allNegInf := make([]float32, 300)
	for i := range allNegInf {
		allNegInf[i] = float32(math.Inf(-1))
	}
	allNaN := make([]float32, 300)
	for i := range allNaN {
		allNaN[i] = nan
	}
	settings := []Params{
		{}, {RepeatPenalty: 1.2},
		{Temperature: 1}, {Temperature: 1, TopP: 0.9}, {Temperature: 1, TopK: 40},
		{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05}, {Temperature: 1, MinP: 0.1},
	}
	for _, p := range settings {
		for name, logits := range map[string][]float32{
			"NaN first": bad(0, nan), "NaN in the middle": bad(150, nan), "+Inf": bad(7, inf),
			"all NaN": allNaN, "all -Inf": allNegInf,
		} {
			within(t, name, func() {
				s := NewSeeded(p)
				if tok, err := s.Sample(logits, []int32{1, 2}); !errors.Is(err, ErrNonFinite) {
					t.Errorf("%+v, %s: Sample gave %d, %v; want ErrNonFinite", p, name, tok, err)
				}
				if _, err := s.Probs(nil, logits, nil); !errors.Is(err, ErrNonFinite) {
					t.Errorf("%+v, %s: Probs gave %v; want ErrNonFinite", p, name, err)
				}
				if _, err := s.Sample(good, []int32{1, 2}); err != nil {
					t.Errorf("%+v, %s: the sampler is broken afterwards: %v", p, name, err)
				}
			})
		}
	}
}

// -Inf marks a token that cannot be drawn; the others still can.
func TestNegativeInfinityIsNeverDrawn(t *testing.T) {
	logits := randomLogits(9, 64)
	for i := range logits {
		if i%2 == 1 {
			logits[i] = float32(math.Inf(-1))
		}
	}
	for _, p := range []Params{{Temperature: 1}, {Temperature: 1, TopP: 0.99}, {Temperature: 1, TopK: 60}, {Temperature: 2, MinP: 0.001}} {
		s := NewSeeded(p)
		for range 200 {
			tok := must(t)(s.Sample(logits, []int32{1, 3, 5}))
			if tok%2 == 1 {
				t.Fatalf("%+v: drew token %d with logit -Inf", p, tok)
			}
		}
	}
}

// A vanishing temperature is greedy: every draw is the argmax (it once drew
// the last token of the vocabulary, 1/T having overflowed).
func TestTinyTemperatureIsGreedy(t *testing.T) {
	logits := randomLogits(3, 50)
	want := Argmax(logits)
	for _, temp := range []float64{1e-300, 5e-324, 1e-30, 1e-6} {
		for _, p := range []Params{{Temperature: temp}, {Temperature: temp, TopP: 0.9}, {Temperature: temp, TopK: 10, MinP: 0.05}} {
			s := NewSeeded(p)
			for range 20 {
				if got := must(t)(s.Sample(logits, nil)); got != want {
					t.Fatalf("%+v: drew %d, the argmax is %d", p, got, want)
				}
			}
		}
	}
}
