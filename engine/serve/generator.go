package serve

import (
	"context"

	"github.com/tandem-run/tandem/engine"
)

// Generator runs one generation, synchronously, emitting text as it is
// accepted; it stops promptly when ctx is cancelled. *engine.Runner and
// *Remote implement it, so a caller can swap the local engine for a remote
// one.
type Generator interface {
	Generate(ctx context.Context, req engine.Request, emit func(engine.Event)) (engine.Stats, error)
}
