package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tandem-run/tandem/engine/chat"
	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/model"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/engine/spec"
	"github.com/tandem-run/tandem/engine/tokenizer"
	"github.com/tandem-run/tandem/kernels"
)

// ErrPromptTooLong is a prompt that leaves no room in the context window.
var ErrPromptTooLong = errors.New("prompt does not fit the context")

// Runner is a loaded target (and draft). Generate calls are serialised: one
// generation runs at a time and the others wait their turn; with
// Config.Parallel > 1, up to that many are decoded together (batch.go).
type Runner struct {
	cfg       Config
	files     []*gguf.File
	tok       *tokenizer.Tokenizer
	template  *chat.Template // nil when the model has no chat template
	target    *sequence
	draft     drafter // nil without drafting
	draftKind spec.DraftKind
	placed    *placed // the plan and the backends of its devices (placement.go)
	now       func() time.Time
	// choosers choose the draft length of the pair as loaded, learning
	// its costs and acceptance across requests: one for greedy drafting
	// (on the device, accepted by equality) and one for sampled,
	// penalised or constrained drafting (logits to the host, masked or
	// accepted by chance), which differ in both.
	choosers map[bool]*spec.Chooser
	grammars grammars
	// probs says whether the target's head computes a sampled round's
	// distributions (model.ForwardProbs: on a GPU, see probsOnGPU).
	probs bool
	// batch decodes concurrent generations together when the target holds
	// several sequences (Config.Parallel); nil: one at a time.
	batch *batch

	mu sync.Mutex
}

// maxDraft is the longest draft the choosers consider; a request's Max
// above it drafts that many only when fixed.
const maxDraft = 16

// chooser is the draft length's state for requests like req.
func (r *Runner) chooser(req Request) *spec.Chooser {
	greedy := onDevice(req)
	ch := r.choosers[greedy]
	if ch == nil {
		o := spec.CostOptions{MaxK: maxDraft, Now: r.now}
		if b, ok := r.draft.(blockDrafter); ok {
			// A block drafter's call is one pass: the chooser picks the
			// block's length from that pass's cost, up to the longest
			// block the draft makes.
			o.Block, o.MaxK = true, min(maxDraft, max(1, b.blockMax()))
		}
		ch = spec.NewChooser(o)
		r.choosers[greedy] = ch
	}
	return ch
}

// onDevice reports whether req's drafts and verification pick by argmax on
// the device (Model.Chain, runArgmax): greedy, unpenalised, unconstrained.
func onDevice(req Request) bool {
	p := req.Sampling
	return p.Greedy() && !p.Penalised() && req.Constraint == nil
}

// Load opens the target (and the draft, after checking that it can serve
// the target), plans where everything goes (or takes cfg.Plan), refuses a
// plan that does not fit, opens a backend per device of the plan, places
// the weights and allocates the caches as the plan says. One device is a
// one-device plan. progress, if set, is called as tensors are placed and
// as the pair warms up (Config.WarmUp).
func Load(ctx context.Context, cfg Config, progress func(Progress)) (_ *Runner, err error) {
	r := &Runner{cfg: cfg, now: cfg.Clock, choosers: map[bool]*spec.Chooser{}}
	if r.now == nil {
		r.now = time.Now
	}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	tf, err := r.open(cfg.Target)
	if err != nil {
		return nil, err
	}
	var df *gguf.File
	if cfg.Draft != "" {
		if df, err = r.open(cfg.Draft); err != nil {
			return nil, err
		}
		if r.draftKind, err = spec.Compatible(tf, df); err != nil {
			return nil, fmt.Errorf("engine: %s: %w", cfg.Draft, err)
		}
	}
	if r.tok, err = tokenizer.FromGGUF(tf); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	if src, ok := tf.String("tokenizer.chat_template"); ok && src != "" {
		if r.template, err = chat.FromGGUF(tf); err != nil {
			return nil, fmt.Errorf("engine: %w", err)
		}
	}
	p := cfg.Plan
	if p == nil {
		in, err := cfg.planInput(tf, df)
		if err != nil {
			return nil, err
		}
		if p, err = plan.Make(in); err != nil {
			return nil, fmt.Errorf("engine: %w", err)
		}
	} else if err := cfg.checkPlan(p); err != nil {
		return nil, err
	}
	if !p.Fits {
		return nil, noFit(p)
	}
	if err := r.loadPlan(ctx, p, tf, df, progress); err != nil {
		return nil, err
	}
	if n := r.target.m.Slots(); n > 1 {
		if r.sharesHead() {
			return nil, fmt.Errorf("engine: %d parallel sequences with a %s draft, which reads the target's states of one sequence: %w", n, r.draftKind, model.ErrUnsupported)
		}
		// The plan gave the draft a KV slot a sequence where the batch
		// drafts, on CPUs only (plan.BatchOnGPU).
		devs := make([]device.Device, len(p.Devices))
		places := []plan.Placement{p.Target.Placement}
		for i, b := range p.Devices {
			devs[i] = b.Device
		}
		if p.Draft != nil {
			places = append(places, p.Draft.Placement)
		}
		gpu := plan.BatchOnGPU(devs, places...)
		r.batch = newBatch(n, gpu || cfg.padBatch, gpu)
	}
	if budget := cfg.WarmUp; budget >= 0 {
		if budget == 0 {
			budget = warmBudget
		}
		if err := r.warmUp(ctx, budget, progress); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (r *Runner) open(path string) (*gguf.File, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	r.files = append(r.files, f)
	return f, nil
}

func reporter(owner string, progress func(Progress)) func(model.Progress) {
	if progress == nil {
		return nil
	}
	n := 0
	return func(p model.Progress) {
		n++
		progress(Progress{Model: owner, BytesDone: p.Done, BytesTotal: p.Total, TensorsDone: n})
	}
}

// Close releases the models, the backend and the file mappings.
func (r *Runner) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	switch d := r.draft.(type) {
	case *modelDrafter:
		errs = append(errs, d.seq.m.Close())
	case *eagle3Drafter:
		errs = append(errs, d.m.Close())
	case *dflashDrafter:
		errs = append(errs, d.m.Close())
	}
	if r.target != nil {
		errs = append(errs, r.target.m.Close())
	}
	if r.placed != nil {
		errs = append(errs, r.placed.close())
	}
	for _, f := range r.files {
		errs = append(errs, f.Close())
	}
	r.draft, r.target, r.files, r.placed = nil, nil, nil, nil
	return errors.Join(errs...)
}

// Info describes what is loaded.
type Info struct {
	Target       gguf.Description
	Draft        *gguf.Description // nil without a draft model
	DraftKind    spec.DraftKind    // "" without a draft model
	Lookup       bool
	Context      int
	ChatTemplate bool
	Usage        kernels.Usage // bytes held on the devices, by owner and category
	// DraftBorrows names the target tensors a head-sharing draft (EAGLE-3, DFlash)
	// uses in place of its own: "token_embd.weight", "output.weight".
	DraftBorrows []string
}

// Info describes the loaded models and the memory they hold.
func (r *Runner) Info() Info {
	r.mu.Lock()
	defer r.mu.Unlock()
	in := Info{Target: r.files[0].Describe(), Context: r.target.m.Context(),
		ChatTemplate: r.template != nil, Usage: r.usage(), Lookup: r.cfg.Lookup && r.cfg.Draft == ""}
	if r.cfg.Draft != "" {
		d := r.files[1].Describe()
		in.Draft, in.DraftKind = &d, r.draftKind
		switch e := r.draft.(type) {
		case *eagle3Drafter:
			in.DraftBorrows = e.m.Borrowed()
		case *dflashDrafter:
			in.DraftBorrows = e.m.Borrowed()
		}
	}
	return in
}

// Tokenizer is the target's tokenizer.
func (r *Runner) Tokenizer() *tokenizer.Tokenizer { return r.tok }
