package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/model"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/engine/spec"
	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/cpu"
	"github.com/tandem-run/tandem/kernels/cuda"
)

// Placement spreads the target, and puts the draft, over several devices,
// as the memory planner lays them out. The planner's numbers are what gets
// allocated: a placement that does not fit is refused before anything loads.
type Placement struct {
	// Devices are the inventory Target and Draft index into: GPUs from
	// device.Probe, or virtual devices from device.ParseVirtual (each a
	// backend of its own, capped at its size).
	Devices []device.Device
	Target  plan.Placement
	// Draft is where a draft model runs; no devices means the target's last.
	Draft plan.Placement
	// Batch is the most tokens per forward pass; 0 is model.DefaultBatch.
	Batch int
}

// ErrNoFit is a placement the planner finds too big for its devices.
var ErrNoFit = errors.New("placement does not fit")

// placed is what a Runner holds when its models span devices.
type placed struct {
	plan     *plan.Plan
	backends map[int]kernels.Backend
	gpu      *cuda.Worker // the thread all CUDA backends share; nil: none
}

// loadPlaced plans cfg.Placement for the target tf and draft df, refuses a
// plan that does not fit, opens a backend per device in use and loads each
// model as its ModelPlan says.
func (r *Runner) loadPlaced(ctx context.Context, tf, df *gguf.File, progress func(Progress)) error {
	pl := r.cfg.Placement
	kv, err := kvType(r.cfg.KVType)
	if err != nil {
		return err
	}
	in := plan.Input{Target: tf, Draft: df, Devices: pl.Devices, TargetPlacement: pl.Target,
		DraftPlacement: pl.Draft, Ctx: r.cfg.Context, Batch: pl.Batch, KVType: kv}
	if in.Ctx <= 0 {
		p, err := model.ReadParams(tf)
		if err != nil {
			return fmt.Errorf("engine: %w", err)
		}
		in.Ctx = min(p.TrainCtx, model.DefaultContext)
	}
	if in.Batch <= 0 {
		in.Batch = model.DefaultBatch
	}
	in.Batch = min(in.Batch, in.Ctx)
	if df != nil && len(in.DraftPlacement.Devices) == 0 && len(pl.Target.Devices) > 0 {
		in.DraftPlacement.Devices = pl.Target.Devices[len(pl.Target.Devices)-1:]
	}
	p, err := plan.Make(in)
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	if !p.Fits {
		return noFit(p)
	}
	r.placed = &placed{plan: p, backends: map[int]kernels.Backend{}}
	for _, b := range p.Devices {
		be, err := r.placed.open(b.Device, r.cfg.Threads)
		if err != nil {
			return err
		}
		r.placed.backends[b.Device.Index] = be
	}
	tm, err := model.LoadPlaced(ctx, tf, p, &p.Target, r.placed.backends, reporter("target", progress))
	if err != nil {
		return fmt.Errorf("engine: target %s: %w", r.cfg.Target, err)
	}
	r.target = &sequence{placed: tm}
	if df != nil && r.draftKind == spec.DraftEagle3 {
		d, err := loadPlacedEagle3(ctx, df, tf, p, r.placed.backends, r.target, r.cfg.DraftPMin, reporter("draft", progress))
		if err != nil {
			return fmt.Errorf("engine: draft %s: %w", r.cfg.Draft, err)
		}
		r.draft = d
		return nil
	}
	if df != nil {
		dm, err := model.LoadPlaced(ctx, df, p, p.Draft, r.placed.backends, reporter("draft", progress))
		if err != nil {
			return fmt.Errorf("engine: draft %s: %w", r.cfg.Draft, err)
		}
		r.draft = &modelDrafter{seq: sequence{placed: dm}, pMin: r.cfg.DraftPMin}
	} else if r.cfg.Lookup {
		r.draft = lookupDrafter{spec.NewLookup()}
	}
	return nil
}

// noFit is the planner's verdict per device over budget, and its fixes.
func noFit(p *plan.Plan) error {
	var why []string
	for _, b := range p.Devices {
		if !b.Fits() {
			why = append(why, fmt.Sprintf("device %d (%s) %s", b.Device.Index, b.Device.Name, b.Verdict()))
		}
	}
	msg := strings.Join(why, "; ")
	for i, s := range p.Suggestions {
		if i == 0 {
			msg += "; try: "
		} else {
			msg += ", or "
		}
		msg += s.Text
	}
	return fmt.Errorf("engine: %w: %s", ErrNoFit, msg)
}

// open opens the backend of one device; a virtual one is capped at its
// size. The CUDA devices share one driver thread (cuda.Worker), so that
// activations crossing between them wait on no hand-off between threads.
func (p *placed) open(d device.Device, threads int) (kernels.Backend, error) {
	var limit int64
	if d.Virtual {
		limit = int64(d.Capacity())
	}
	name := fmt.Sprintf("dev%d", d.Index)
	if d.Kind == device.CPU {
		return cpu.New(cpu.Options{Name: name, Threads: threads, MemoryLimit: limit}), nil
	}
	ordinal := d.Index
	if d.Virtual {
		ordinal = d.Physical
	}
	if p.gpu == nil {
		w, err := cuda.NewWorker()
		if err != nil {
			return nil, fmt.Errorf("engine: device %d: %w", d.Index, err)
		}
		p.gpu = w
	}
	be, err := cuda.Open(cuda.Options{Ordinal: ordinal, Name: name, MemoryLimit: limit, Worker: p.gpu})
	if err != nil {
		return nil, fmt.Errorf("engine: device %d: %w", d.Index, err)
	}
	return be, nil
}

// Plan is the memory plan the models were loaded from; nil on one device.
func (r *Runner) Plan() *plan.Plan {
	if r.placed == nil {
		return nil
	}
	return r.placed.plan
}

// DeviceUsage is what each device holds now, by device index.
func (r *Runner) DeviceUsage() map[int]kernels.Usage {
	out := map[int]kernels.Usage{}
	if r.placed == nil {
		if r.backend != nil {
			out[r.cfg.GPU] = r.backend.Usage()
		}
		return out
	}
	for d, be := range r.placed.backends {
		out[d] = be.Usage()
	}
	return out
}

// usage is everything held, summed over devices.
func (r *Runner) usage() kernels.Usage {
	sum := kernels.Usage{}
	for _, u := range r.DeviceUsage() {
		for l, n := range u {
			sum[l] += n
		}
	}
	return sum
}

// close releases the device backends of a placement, then their thread.
func (p *placed) close() error {
	var errs []error
	for _, be := range p.backends {
		errs = append(errs, be.Close())
	}
	if p.gpu != nil {
		errs = append(errs, p.gpu.Close())
	}
	return errors.Join(errs...)
}

// Forward runs the sequence's model, whichever kind it is (a sequence is a
// model.Batcher).
func (s *sequence) Forward(ctx context.Context, tokens []int32, pos int, out []int) ([]float32, error) {
	if s.placed != nil {
		return s.placed.Forward(ctx, tokens, pos, out)
	}
	return s.m.Forward(ctx, tokens, pos, out)
}

// Context is the model's KV cache length.
func (s *sequence) Context() int {
	if s.placed != nil {
		return s.placed.Context()
	}
	return s.m.Context()
}

// close releases the model.
func (s *sequence) close() error {
	if s.placed != nil {
		return s.placed.Close()
	}
	return s.m.Close()
}
