package app

import (
	"context"

	"github.com/tandem-run/tandem/engine"
)

// The window talks to the engine through these two small interfaces, so its
// controllers are tested with fakes and the chat can switch between the
// local engine and a remote server (serve.Remote has the same Generate).

// generator streams one completion, synchronously, on the caller's goroutine.
type generator interface {
	Generate(ctx context.Context, req engine.Request, emit func(engine.Event)) (engine.Stats, error)
}

// loadedModel is a local target (and draft) in memory.
type loadedModel interface {
	generator
	Close() error
}

// loadFunc loads models; engineLoad in the app.
type loadFunc func(ctx context.Context, cfg engine.Config, progress func(engine.Progress)) (loadedModel, error)

func engineLoad(ctx context.Context, cfg engine.Config, progress func(engine.Progress)) (loadedModel, error) {
	r, err := engine.Load(ctx, cfg, progress)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return r, nil
}
