package engine

import (
	"context"

	"github.com/tandem-run/tandem/engine/model"
)

// sequence is a model together with the tokens its KV cache holds, so that
// running it on a new token list only computes what differs: after a
// speculative step the cache rolls back to the longest common prefix.
type sequence struct {
	m      *model.Model
	cached []int32
}

// run makes the cache hold tokens and returns the logits of its last rows
// tokens, row after row (valid until the next call).
func (s *sequence) run(ctx context.Context, tokens []int32, rows int) ([]float32, error) {
	return runOn(s, tokens, rows, func(tokens []int32, pos int, out []int) ([]float32, error) {
		return s.m.Forward(ctx, tokens, pos, out)
	})
}

// runArgmax is run for greedy decoding: it returns the index of the largest
// logit of each of the last rows tokens (valid until the next call), taken
// where the head runs, so only token ids cross to the host.
func (s *sequence) runArgmax(ctx context.Context, tokens []int32, rows int) ([]int32, error) {
	return runOn(s, tokens, rows, func(tokens []int32, pos int, out []int) ([]int32, error) {
		return s.m.ForwardArgmax(ctx, tokens, pos, out)
	})
}

// runProbs is run for sampling at temperature temp from every token
// (model.ForwardProbs): the softmax of the last rows tokens' logits,
// computed where the head runs, into dst (grown as needed).
func (s *sequence) runProbs(ctx context.Context, tokens []int32, rows int, temp float64, dst []float32) ([]float32, error) {
	return runOn(s, tokens, rows, func(tokens []int32, pos int, out []int) ([]float32, error) {
		return s.m.ForwardProbs(ctx, tokens, pos, out, temp, dst)
	})
}

// chain drafts greedily after tokens (Model.Chain): it runs what the cache
// lacks of them, at least the last, and n steps on, each on the argmax
// before, returning the argmaxes (and, with pMin > 0, their
// probabilities; valid until the next call).
func (s *sequence) chain(ctx context.Context, tokens []int32, n int, pMin float64) ([]int32, []float32, error) {
	c := min(commonPrefix(s.cached, tokens), len(tokens)-1)
	s.cached = s.cached[:c]
	ids, probs, err := s.m.Chain(ctx, tokens[c:], c, n, pMin)
	if err != nil {
		return nil, nil, err // the cache keeps tokens[:c]
	}
	s.cached = append(append(s.cached, tokens[c:]...), ids[:len(ids)-1]...)
	return ids, probs, nil
}

// runOn makes s's cache hold tokens, computing only what differs from what
// it held, with forward (a Forward of the model) run on the rest; out are
// the indices of the last rows tokens in what forward runs.
func runOn[T any](s *sequence, tokens []int32, rows int, forward func(tokens []int32, pos int, out []int) (T, error)) (T, error) {
	c := min(commonPrefix(s.cached, tokens), len(tokens)-rows) // the wanted rows must be computed
	out := make([]int, rows)
	for i := range out {
		out[i] = len(tokens) - rows - c + i
	}
	s.cached = s.cached[:min(c, len(s.cached))]
	res, err := forward(tokens[c:], c, out)
	if err != nil {
		var zero T
		return zero, err // the cache keeps tokens[:c]; nothing after it is trusted
	}
	s.cached = append(s.cached, tokens[c:]...)
	return res, nil
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
