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
	placed *model.Placed // instead of m when the model spans devices (placement.go)
	cached []int32
}

// run makes the cache hold tokens and returns the logits of its last rows
// tokens, row after row (valid until the next call).
func (s *sequence) run(ctx context.Context, tokens []int32, rows int) ([]float32, error) {
	c := min(commonPrefix(s.cached, tokens), len(tokens)-rows) // the wanted rows must be computed
	out := make([]int, rows)
	for i := range out {
		out[i] = len(tokens) - rows - c + i
	}
	s.cached = s.cached[:min(c, len(s.cached))]
	logits, err := s.Forward(ctx, tokens[c:], c, out)
	if err != nil {
		return nil, err // the cache keeps tokens[:c]; nothing after it is trusted
	}
	s.cached = append(s.cached, tokens[c:]...)
	return logits, nil
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
