package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
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
	// Target and Draft are where the models run; no devices means every
	// device for the target and the target's last for the draft
	// (plan.Input.Resolve).
	Target plan.Placement
	Draft  plan.Placement
}

// ErrNoFit is a placement the planner finds too big for its devices.
var ErrNoFit = errors.New("placement does not fit")

// placed is the plan a Runner loaded and the backends of its devices.
type placed struct {
	plan     *plan.Plan
	backends map[int]kernels.Backend
	gpu      *cuda.Worker // the thread all CUDA backends share; nil: none
}

// planInput is what the planner plans for cfg: its placement, or both
// models on the one device of Backend and GPU. The defaults are the
// planner's (plan.Input.Resolve).
func (c Config) planInput(tf, df *gguf.File) (plan.Input, error) {
	kv, err := plan.ParseKVTypes(c.KVType, c.KVTypeV)
	if err != nil {
		return plan.Input{}, fmt.Errorf("engine: %w", err)
	}
	in := plan.Input{Target: tf, Draft: df, Ctx: c.Context, Batch: c.Batch, KV: kv, Parallel: c.Parallel}
	if c.Placement != nil {
		in.Devices, in.TargetPlacement, in.DraftPlacement = c.Placement.Devices, c.Placement.Target, c.Placement.Draft
		return in, nil
	}
	d, err := oneDevice(c)
	if err != nil {
		return in, err
	}
	in.Devices = []device.Device{d}
	return in, nil
}

// oneDevice is the device of Backend and GPU, as the planner sees it: the
// host's memory, or the GPU's as its driver reports it.
func oneDevice(c Config) (device.Device, error) {
	switch strings.ToLower(c.Backend) {
	case "", "cpu":
		d := device.Host()
		if d.MemoryTotal == 0 { // unknown: the plan cannot be checked against it
			d.MemoryTotal = math.MaxInt64
		}
		return d, nil
	case "cuda":
		infos, err := cuda.Devices()
		if err != nil {
			return device.Device{}, fmt.Errorf("engine: %w", err)
		}
		if c.GPU < 0 || c.GPU >= len(infos) {
			return device.Device{}, fmt.Errorf("engine: GPU %d: %d found: %w", c.GPU, len(infos), model.ErrUnsupported)
		}
		info := infos[c.GPU]
		return device.Device{Index: c.GPU, Kind: device.CUDA, Name: info.Name, MemoryTotal: uint64(info.TotalMemory),
			ComputeCapability: fmt.Sprintf("%d.%d", info.ComputeMajor, info.ComputeMinor)}, nil
	}
	return device.Device{}, fmt.Errorf("engine: backend %q: %w (cpu or cuda)", c.Backend, model.ErrUnsupported)
}

// checkPlan refuses a plan that is not of the configured files.
func (c Config) checkPlan(p *plan.Plan) error {
	draft := ""
	if p.Draft != nil {
		draft = p.Draft.Path
	}
	if p.Target.Path != c.Target || draft != c.Draft {
		return fmt.Errorf("engine: the plan is of %q and %q, not of %q and %q: %w", p.Target.Path, draft, c.Target, c.Draft, model.ErrBadParam)
	}
	for _, b := range p.Devices {
		if b.Device.Simulated {
			return fmt.Errorf("engine: the plan is for simulated devices (%s %s): it can be shown, not loaded: %w", b.Device.Label(), b.Device.Name, model.ErrBadParam)
		}
	}
	return nil
}

// loadPlan opens a backend per device of p and loads each model as its
// ModelPlan says.
func (r *Runner) loadPlan(ctx context.Context, p *plan.Plan, tf, df *gguf.File, progress func(Progress)) error {
	r.placed = &placed{plan: p, backends: map[int]kernels.Backend{}}
	for _, b := range p.Devices {
		be, err := r.placed.open(b.Device, r.cfg.Threads)
		if err != nil {
			return err
		}
		r.placed.backends[b.Device.Index] = be
	}
	tm, err := model.LoadPlan(ctx, tf, p, &p.Target, r.placed.backends, reporter("target", progress))
	if err != nil {
		return fmt.Errorf("engine: target %s: %w", r.cfg.Target, err)
	}
	r.target = &sequence{m: tm}
	r.probs = r.probsOnGPU(tm)
	switch {
	case df != nil && r.draftKind == spec.DraftEagle3:
		d, err := model.LoadEagle3(ctx, df, tf, p, p.Draft, tm, r.placed.backends, reporter("draft", progress))
		if err != nil {
			return fmt.Errorf("engine: draft %s: %w", r.cfg.Draft, err)
		}
		r.draft = &eagle3Drafter{m: d, target: r.target, probs: onGPU(d.ProbsOnDevice())}
	case df != nil && r.draftKind == spec.DraftDFlash:
		d, err := model.LoadDFlash(ctx, df, tf, p, p.Draft, tm, r.placed.backends, reporter("draft", progress))
		if err != nil {
			return fmt.Errorf("engine: draft %s: %w", r.cfg.Draft, err)
		}
		r.draft = &dflashDrafter{m: d, target: r.target}
	case df != nil:
		dm, err := model.LoadPlan(ctx, df, p, p.Draft, r.placed.backends, reporter("draft", progress))
		if err != nil {
			return fmt.Errorf("engine: draft %s: %w", r.cfg.Draft, err)
		}
		r.draft = &modelDrafter{seq: sequence{m: dm}, probs: r.probsOnGPU(dm)}
	case r.cfg.Lookup:
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

// probsOnGPU reports whether m's head can compute softmax rows
// (model.ForwardProbs) on a GPU. There a sampled round's distributions
// cost microseconds, where the host's pass of exponentials over a
// vocabulary costs a fifth of a millisecond a row; the CPU backend's
// softmax is no faster than the host sampler's, so a head on the CPU
// leaves the sampling to the host.
func (r *Runner) probsOnGPU(m *model.Model) bool {
	dev, ok := m.ProbsDevice()
	return onGPU(r.placed.backends[dev], ok)
}

// onGPU reports whether a head's softmax can run (ok) on be and be is not
// the CPU's, where the host's own softmax costs the same and is kept.
func onGPU(be kernels.Backend, ok bool) bool {
	_, onCPU := be.(*cpu.Backend)
	return ok && !onCPU
}

// Plan is the memory plan the models were loaded from, one device or many.
func (r *Runner) Plan() *plan.Plan { return r.placed.plan }

// DeviceUsage is what each device holds now, by device index.
func (r *Runner) DeviceUsage() map[int]kernels.Usage {
	out := map[int]kernels.Usage{}
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
