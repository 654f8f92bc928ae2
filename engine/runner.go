package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/tandem-run/tandem/engine/chat"
	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/model"
	"github.com/tandem-run/tandem/engine/spec"
	"github.com/tandem-run/tandem/engine/tokenizer"
	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/cpu"
	"github.com/tandem-run/tandem/kernels/cuda"
	"github.com/tandem-run/tandem/kernels/quant"
)

// Defaults for Config.
const (
	DefaultDraftMax  = 8
	DefaultDraftMin  = 1
	DefaultDraftPMin = 0.5
)

// ErrPromptTooLong is a prompt that leaves no room in the context window.
var ErrPromptTooLong = errors.New("prompt does not fit the context")

// Runner is a loaded target (and draft). Generate calls are serialised: one
// generation runs at a time and the others wait their turn.
type Runner struct {
	cfg       Config
	files     []*gguf.File
	backend   kernels.Backend
	tok       *tokenizer.Tokenizer
	template  *chat.Template // nil when the model has no chat template
	target    *sequence
	draft     drafter // nil without drafting
	draftKind spec.DraftKind
	placed    *placed // the devices of a multi-device placement (placement.go)

	mu sync.Mutex
}

// Load opens the target (and the draft, after checking that it can serve
// the target), places their weights and allocates their caches. progress,
// if set, is called as tensors are placed.
func Load(ctx context.Context, cfg Config, progress func(Progress)) (_ *Runner, err error) {
	cfg.applyDefaults()
	r := &Runner{cfg: cfg}
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
	if cfg.Placement != nil {
		if err := r.loadPlaced(ctx, tf, df, progress); err != nil {
			return nil, err
		}
		return r, nil
	}
	if r.backend, err = newBackend(cfg); err != nil {
		return nil, err
	}
	kv, err := kvType(cfg.KVType)
	if err != nil {
		return nil, err
	}
	opts := model.Options{Owner: "target", Context: cfg.Context, KVType: kv, Progress: reporter("target", progress)}
	var eagle *eagle3Drafter
	if df != nil && r.draftKind == spec.DraftEagle3 {
		// The target must capture the hidden states the draft reads.
		if eagle, err = newEagle3Drafter(df, cfg.DraftPMin, &opts); err != nil {
			return nil, fmt.Errorf("engine: draft %s: %w", cfg.Draft, err)
		}
	}
	tm, err := model.Load(ctx, tf, r.backend, opts)
	if err != nil {
		return nil, fmt.Errorf("engine: target %s: %w", cfg.Target, err)
	}
	r.target = &sequence{m: tm}
	switch {
	case eagle != nil:
		if err := eagle.load(ctx, df, r.target, kv, reporter("draft", progress)); err != nil {
			return nil, fmt.Errorf("engine: draft %s: %w", cfg.Draft, err)
		}
		r.draft = eagle
	case df != nil:
		opts := model.Options{Owner: "draft", Context: tm.Context(), KVType: kv, Progress: reporter("draft", progress)}
		dm, err := model.Load(ctx, df, r.backend, opts)
		if err != nil {
			return nil, fmt.Errorf("engine: draft %s: %w", cfg.Draft, err)
		}
		r.draft = &modelDrafter{seq: sequence{m: dm}, pMin: cfg.DraftPMin}
	case cfg.Lookup:
		r.draft = lookupDrafter{spec.NewLookup()}
	}
	return r, nil
}

func (c *Config) applyDefaults() {
	if c.DraftMax <= 0 {
		c.DraftMax = DefaultDraftMax
	}
	if c.DraftMin <= 0 {
		c.DraftMin = DefaultDraftMin
	}
	c.DraftMin = min(c.DraftMin, c.DraftMax)
	if c.DraftPMin == 0 {
		c.DraftPMin = DefaultDraftPMin
	}
}

func (r *Runner) open(path string) (*gguf.File, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	r.files = append(r.files, f)
	return f, nil
}

func newBackend(cfg Config) (kernels.Backend, error) {
	switch strings.ToLower(cfg.Backend) {
	case "", "cpu":
		return cpu.New(cpu.Options{Threads: cfg.Threads}), nil
	case "cuda":
		be, err := cuda.Open(cuda.Options{Ordinal: cfg.GPU})
		if err != nil {
			return nil, fmt.Errorf("engine: %w", err)
		}
		return be, nil
	}
	return nil, fmt.Errorf("engine: backend %q: %w (cpu or cuda)", cfg.Backend, model.ErrUnsupported)
}

func kvType(name string) (quant.Type, error) {
	switch strings.ToLower(name) {
	case "", "f16":
		return quant.F16, nil
	case "f32":
		return quant.F32, nil
	}
	return 0, fmt.Errorf("engine: KV cache type %q: %w (f16 or f32)", name, model.ErrUnsupported)
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
		errs = append(errs, d.seq.close())
	case *eagle3Drafter:
		errs = append(errs, d.m.Close())
	}
	if r.target != nil {
		errs = append(errs, r.target.close())
	}
	if r.backend != nil {
		errs = append(errs, r.backend.Close())
	}
	if r.placed != nil {
		errs = append(errs, r.placed.close())
	}
	for _, f := range r.files {
		errs = append(errs, f.Close())
	}
	r.draft, r.target, r.backend, r.files, r.placed = nil, nil, nil, nil, nil
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
	Usage        kernels.Usage // bytes held on the backend, by owner and category
	// DraftBorrows names the target tensors a head-sharing draft (EAGLE-3)
	// uses in place of its own: "token_embd.weight", "output.weight".
	DraftBorrows []string
}

// Info describes the loaded models and the memory they hold.
func (r *Runner) Info() Info {
	r.mu.Lock()
	defer r.mu.Unlock()
	in := Info{Target: r.files[0].Describe(), Context: r.target.Context(),
		ChatTemplate: r.template != nil, Usage: r.usage(), Lookup: r.cfg.Lookup && r.cfg.Draft == ""}
	if r.cfg.Draft != "" {
		d := r.files[1].Describe()
		in.Draft, in.DraftKind = &d, r.draftKind
		if e, ok := r.draft.(*eagle3Drafter); ok {
			in.DraftBorrows = e.m.Borrowed()
		}
	}
	return in
}

// Tokenizer is the target's tokenizer.
func (r *Runner) Tokenizer() *tokenizer.Tokenizer { return r.tok }
