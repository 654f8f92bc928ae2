package model

import (
	"context"
	"errors"
	"fmt"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// Options configure Load. The zero value is a usable default.
type Options struct {
	// Owner labels every allocation for the memory accounting ("target",
	// "draft"); "model" when empty.
	Owner string
	// Context is the KV cache length in tokens; 0 means the training context
	// capped at DefaultContext.
	Context int
	// Batch is the most tokens one pass takes; longer inputs run in chunks.
	// 0 means DefaultBatch (capped at Context).
	Batch int
	// Outputs is the most logit rows one head pass computes; more rows are
	// computed in groups. 0 means DefaultOutputs (capped at Batch).
	Outputs int
	// KVType is the cache element type: quant.F32 (the zero value) or quant.F16.
	KVType quant.Type
	// CaptureLayers lists blocks whose inputs are captured for every
	// processed position (an EAGLE-3 draft reads them); Layers itself names
	// the final hidden state before the output norm.
	CaptureLayers []int
	// OnCapture receives the captured states after each chunk of Forward:
	// hidden is [n, len(CaptureLayers)*Embd] on the model's backend for the
	// positions pos..pos+n-1, layer by layer along the columns. It is valid
	// only during the call.
	OnCapture func(pos int, hidden kernels.Tensor) error
	// Progress, if set, is called after each tensor is placed.
	Progress func(Progress)
}

// Defaults for Options.
const (
	DefaultContext = 4096
	DefaultBatch   = 512
	DefaultOutputs = 64
)

// Model is a loaded decoder with its KV cache. Its methods are called from
// one goroutine at a time.
type Model struct {
	params Params
	opts   Options
	be     kernels.Backend
	w      *weights
	kv     kvCache
	s      scratch
	bufs   []kernels.Buffer

	body   map[int]kernels.Program // by batch size
	head   map[int]kernels.Program // by output rows
	argmax map[int]kernels.Program // the head and each row's argmax, by output rows

	// host staging, sized once
	tokens, positions, outIdx []int32
	logits                    []float32
	ids                       []int32
	last                      [1]int // Forward's default output row
}

// Load reads the hyper-parameters of f, checks every tensor, places the
// weights on be (the CPU backend uses the file mapping in place), and
// allocates the KV cache and scratch. f must stay open while the model lives.
func Load(ctx context.Context, f *gguf.File, be kernels.Backend, opts Options) (_ *Model, err error) {
	p, err := ReadParams(f)
	if err != nil {
		return nil, err
	}
	if err := opts.resolve(p); err != nil {
		return nil, err
	}
	l := &loader{ctx: ctx, f: f, be: be, owner: opts.Owner, progress: opts.Progress}
	defer func() {
		if err != nil {
			for _, b := range l.bufs {
				_ = be.Free(b)
			}
		}
	}()
	w, err := l.loadWeights(p)
	if err != nil {
		return nil, err
	}
	m := &Model{params: p, opts: opts, be: be, w: w,
		body: map[int]kernels.Program{}, head: map[int]kernels.Program{}, argmax: map[int]kernels.Program{}}
	if m.kv, err = newKVCache(l, p, opts); err != nil {
		return nil, err
	}
	if m.s, err = newScratch(l, p, opts); err != nil {
		return nil, err
	}
	m.bufs = l.bufs
	m.tokens = make([]int32, opts.Batch)
	m.positions = make([]int32, opts.Batch)
	m.outIdx = make([]int32, opts.Outputs)
	return m, nil
}

func (o *Options) resolve(p Params) error {
	if o.Owner == "" {
		o.Owner = "model"
	}
	if o.Context <= 0 {
		o.Context = min(p.TrainCtx, DefaultContext)
	}
	if o.Batch <= 0 {
		o.Batch = DefaultBatch
	}
	o.Batch = min(o.Batch, o.Context)
	if o.Outputs <= 0 {
		o.Outputs = DefaultOutputs
	}
	o.Outputs = min(o.Outputs, o.Batch)
	if o.KVType != quant.F32 && o.KVType != quant.F16 {
		return fmt.Errorf("model: KV cache type %v: %w (F32 or F16)", o.KVType, ErrUnsupported)
	}
	for _, l := range o.CaptureLayers {
		if l < 0 || l > p.Layers {
			return fmt.Errorf("model: capture of block %d in a %d-block model: %w", l, p.Layers, ErrBadParam)
		}
	}
	if len(o.CaptureLayers) > 0 && o.OnCapture == nil {
		return fmt.Errorf("model: capture layers without OnCapture: %w", ErrBadParam)
	}
	return nil
}

// Params are the model's hyper-parameters.
func (m *Model) Params() Params { return m.params }

// Context is the KV cache length in tokens.
func (m *Model) Context() int { return m.opts.Context }

// Backend is the device the model runs on.
func (m *Model) Backend() kernels.Backend { return m.be }

// TiedHead reports whether the output head is the token embedding.
func (m *Model) TiedHead() bool { return m.w.tied }

// Len is the number of positions in the KV cache: the next Forward starts
// at Len() or earlier.
func (m *Model) Len() int { return m.kv.n }

// Truncate drops cached positions n and later, so generation resumes at n
// (speculative rollback). n may not exceed Len().
func (m *Model) Truncate(n int) error {
	if n < 0 || n > m.kv.n {
		return fmt.Errorf("model: truncate to %d with %d cached: %w", n, m.kv.n, ErrPosition)
	}
	m.kv.n = n
	return nil
}

// Close releases the programs and device memory. The GGUF file may be
// closed afterwards.
func (m *Model) Close() error {
	var errs []error
	for _, progs := range []map[int]kernels.Program{m.body, m.head, m.argmax} {
		for k, p := range progs {
			errs = append(errs, p.Close())
			delete(progs, k)
		}
	}
	for _, b := range m.bufs {
		errs = append(errs, m.be.Free(b))
	}
	m.bufs = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("model: close: %w", err)
	}
	return nil
}

// weightBytes is the bytes of weights one token's pass reads: every block
// matrix and the head (the embedding is read one row per token).
func (m *Model) weightBytes() int64 {
	n := m.w.output.Bytes()
	for _, b := range m.w.blocks {
		for _, t := range []kernels.Tensor{b.wq, b.wk, b.wv, b.wo, b.gate, b.up, b.down} {
			n += t.Bytes()
		}
	}
	return n
}
