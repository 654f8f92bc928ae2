package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/tandem-run/tandem/engine/model"
	"github.com/tandem-run/tandem/engine/tokenizer"
)

// Forward runs the target alone on tokens at positions pos, pos+1, ... and
// returns the logits of the rows listed in out (nil: the last row): the raw
// pass that benchmarks time. Generation afterwards recomputes what it needs.
func (r *Runner) Forward(ctx context.Context, tokens []int32, pos int, out []int) ([]float32, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.target == nil {
		return nil, errors.New("engine: runner is closed")
	}
	r.target.cached = nil // the cache no longer holds what the sequence remembers
	return r.target.m.Forward(ctx, tokens, pos, out)
}

// Decode is greedy decoding as a chat runs it, without the text: n steps
// from token first at position pos, each running one token and taking the
// argmax of its logits where the head runs (only the id crosses to the
// host), the next step's token. It returns the tokens chosen (valid until
// the next call). This is the decode `tandem bench` times.
func (r *Runner) Decode(ctx context.Context, first int32, pos, n int) ([]int32, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.target == nil {
		return nil, errors.New("engine: runner is closed")
	}
	r.target.cached = nil
	out := make([]int32, 0, n)
	tok := first
	for i := range n {
		ids, err := r.target.m.ForwardArgmax(ctx, []int32{tok}, pos+i, nil)
		if err != nil {
			return out, err
		}
		tok = ids[0]
		out = append(out, tok)
	}
	return out, nil
}

// Perplexity scores text with the target as llama.cpp's perplexity tool
// does (see model.Perplexity); windows of n tokens must fit the context.
func (r *Runner) Perplexity(ctx context.Context, text string, n int, progress func(done, total int)) (model.PerplexityResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.target == nil {
		return model.PerplexityResult{}, errors.New("engine: runner is closed")
	}
	tokens, err := r.tok.Encode(text, tokenizer.EncodeOptions{AddSpecial: r.tok.AddBOS()})
	if err != nil {
		return model.PerplexityResult{}, fmt.Errorf("engine: %w", err)
	}
	r.target.cached = nil
	return model.Perplexity(ctx, r.target.m, tokens, n, progress)
}
