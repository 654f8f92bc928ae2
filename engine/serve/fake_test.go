package serve

import (
	"context"
	"strings"
	"sync"

	"github.com/tandem-run/tandem/engine"
)

// echo is a deterministic Generator: it answers with the words of the last
// message (or of the prompt), one word per token, and counts two drafted
// and one accepted token per step. Gate, when set, makes every token wait
// for a receive, so tests control its pace.
type echo struct {
	gate chan struct{}

	mu      sync.Mutex
	reqs    []engine.Request
	running int // generations now in Generate
	most    int // the most ever running at once
	started chan string
}

func (g *echo) Generate(ctx context.Context, req engine.Request, emit func(engine.Event)) (engine.Stats, error) {
	g.mu.Lock()
	g.reqs = append(g.reqs, req)
	g.running++
	g.most = max(g.most, g.running)
	started := g.started
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.running--
		g.mu.Unlock()
	}()
	text := req.Prompt
	if n := len(req.Messages); n > 0 {
		text = req.Messages[n-1].Content
	}
	if started != nil {
		started <- text
	}
	words := strings.SplitAfter(text, " ")
	st := engine.Stats{PromptTokens: len(words) + 3, PrefillSeconds: 0.5}
	for i, w := range words {
		if req.MaxTokens > 0 && i == req.MaxTokens {
			st.FinishReason = "length"
			return st, nil
		}
		if g.gate != nil {
			select {
			case <-g.gate:
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			st.FinishReason = "cancelled"
			return st, ctx.Err()
		}
		st.GeneratedTokens++
		st.Steps++
		st.Drafted += 2
		st.Accepted++
		st.DecodeSeconds += 0.25
		emit(engine.Event{Kind: engine.EventToken, Text: w, IDs: []int32{int32(i)}, Stats: st})
		emit(engine.Event{Kind: engine.EventStep, Stats: st})
	}
	st.FinishReason = "stop"
	return st, nil
}

// lastRequest is the last request the generator was given.
func (g *echo) lastRequest() engine.Request {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.reqs[len(g.reqs)-1]
}

// pieces is a Generator that emits fixed pieces of text.
type pieces []string

func (p pieces) Generate(ctx context.Context, req engine.Request, emit func(engine.Event)) (engine.Stats, error) {
	st := engine.Stats{PromptTokens: 1}
	for _, s := range p {
		if ctx.Err() != nil {
			st.FinishReason = "cancelled"
			return st, ctx.Err()
		}
		st.GeneratedTokens++
		emit(engine.Event{Kind: engine.EventToken, Text: s, Stats: st})
	}
	st.FinishReason = "stop"
	return st, nil
}

// failing is a Generator that emits its pieces, then fails with err.
type failing struct {
	pieces []string
	err    error
}

func (f failing) Generate(ctx context.Context, req engine.Request, emit func(engine.Event)) (engine.Stats, error) {
	st := engine.Stats{PromptTokens: 1}
	for _, p := range f.pieces {
		st.GeneratedTokens++
		emit(engine.Event{Kind: engine.EventToken, Text: p, Stats: st})
	}
	return st, f.err
}
