package engine

import (
	"context"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/model"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/kernels"
)

// loadPlacedEagle3 loads an EAGLE-3 draft where plan p puts it, beside the
// placed target, which is set to hand over the block inputs the draft
// reads: they cross to the draft's device through the host.
func loadPlacedEagle3(ctx context.Context, df, tf *gguf.File, p *plan.Plan, backends map[int]kernels.Backend, target *sequence, pMin float64, progress func(model.Progress)) (*eagle3Drafter, error) {
	e, err := model.ReadEagle3Params(df)
	if err != nil {
		return nil, err
	}
	d := &eagle3Drafter{pMin: pMin, target: target}
	err = target.placed.Capture(e.TargetLayers, func(pos int, hidden []float32) error {
		// This runs inside the target's pass, which checks its context
		// between chunks; fusing a chunk is one matrix product.
		return d.m.EncodeHost(context.Background(), pos, hidden)
	})
	if err != nil {
		return nil, err
	}
	if d.m, err = model.LoadEagle3Placed(ctx, df, tf, p, p.Draft, target.placed, backends, progress); err != nil {
		return nil, err
	}
	return d, nil
}
