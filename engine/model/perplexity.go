package model

import (
	"context"
	"fmt"
	"math"
)

// PerplexityResult is the outcome of Perplexity.
type PerplexityResult struct {
	PPL     float64 // exp(mean negative log-likelihood)
	NLL     float64 // mean negative log-likelihood, nats per token
	Scored  int     // tokens scored
	Windows int
}

// Perplexity scores tokens the way llama.cpp's perplexity tool does, so the
// numbers compare: whole windows of n tokens from the start (a partial last
// window is dropped), each run from an empty cache, and in each only the
// second half scored — the logits at positions n/2 .. n-2 predict tokens
// n/2+1 .. n-1. progress, if set, is called after each window.
func Perplexity(ctx context.Context, m *Model, tokens []int32, n int, progress func(done, total int)) (PerplexityResult, error) {
	if n < 4 || n > m.Context() {
		return PerplexityResult{}, fmt.Errorf("model: perplexity window %d (context %d): %w", n, m.Context(), ErrBadParam)
	}
	windows := len(tokens) / n
	if windows == 0 {
		return PerplexityResult{}, fmt.Errorf("model: perplexity: %d tokens, fewer than one %d-token window: %w", len(tokens), n, ErrBadParam)
	}
	first := n / 2
	rows := make([]int, n-1-first)
	for i := range rows {
		rows[i] = first + i
	}
	var nll float64
	scored := 0
	for w := range windows {
		win := tokens[w*n : (w+1)*n]
		logits, err := m.Forward(ctx, win, 0, rows)
		if err != nil {
			return PerplexityResult{}, err
		}
		vocab := len(logits) / len(rows)
		for i, r := range rows {
			nll -= logSoftmaxAt(logits[i*vocab:(i+1)*vocab], win[r+1])
		}
		scored += len(rows)
		if progress != nil {
			progress(w+1, windows)
		}
	}
	mean := nll / float64(scored)
	return PerplexityResult{PPL: math.Exp(mean), NLL: mean, Scored: scored, Windows: windows}, nil
}

// logSoftmaxAt is log(softmax(logits)[id]), in float64.
func logSoftmaxAt(logits []float32, id int32) float64 {
	m := logits[0]
	for _, v := range logits[1:] {
		m = max(m, v)
	}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v - m))
	}
	return float64(logits[id]-m) - math.Log(sum)
}
