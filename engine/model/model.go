package model

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/kernels"
)

// Model is a decoder placed exactly as a plan.ModelPlan says: on one
// device, or over several, with whole blocks per device (layer split) or
// every block cut across the devices (tensor split), the head on one
// device, replicated, or split by vocabulary rows. Activations cross
// devices straight from one device's memory to the other's where the
// backends allow, else through the host (exchange.go).
//
// It allocates the plan's shards and buffers, and reserves a CUDA
// backend's workspace at the plan's figure, and nothing else of size, so
// each backend's Usage is the plan's per-device budget. Its methods are
// called from one goroutine at a time.
type Model struct {
	params  Params
	role    string
	plan    *plan.Plan
	ctx     int // KV cache length
	batch   int // most tokens per pass, and most logit rows per head pass
	layered bool
	direct  bool // every device copies straight from every other
	// group sums a tensor split's shares on the devices (exchange.go);
	// nil where some device cannot take part.
	group   kernels.ReduceGroup
	parts   []*part // in placement order
	byDev   map[int]*part
	embd    []plan.Holder // where token lookups run
	head    []plan.Holder // where the head's matmul runs
	n       int           // cached positions
	cap     *capture      // block inputs handed to an EAGLE-3 draft (Capture)
	experts *part         // the device of the routed experts when they are apart (experts.go); nil: with their blocks
	// slots are the sequences the KV caches hold, ctx rows each
	// (plan.Plan.Parallel for a target); segs and layout are the
	// sequences of the ForwardSeqs pass being run (nil and "" otherwise).
	slots  int
	segs   []segment
	layout string

	// host staging, sized once
	tokens, positions, outIdx []int32
	cacheRows                 []int32   // a pass over several sequences: each row's row of the caches
	hostX, partial            []float32 // [batch, n_embd]
	rows                      []float32 // [batch, widest head shard]
	logits                    []float32
	ids                       []int32
	top                       []Candidate
	shardIDs                  []int32   // [batch, plan.TopK] one head shard's
	shardLogits               []float32 // [batch, plan.TopK]
	last                      [1]int    // Forward's default output row
	chain                     chainBuffers
}

// part is what one device holds and runs of a model.
type part struct {
	dev   int
	be    kernels.Backend
	bufs  []kernels.Buffer
	w     weights                    // the device's shards; zero tensors where it has none
	dst   map[string]*kernels.Tensor // the field of w each tensor name binds to
	local []localBlock               // by block
	kvK   []kernels.Tensor
	kvV   []kernels.Tensor

	embdRows, headRows plan.Range

	s     scratch
	progs programs
}

// localBlock is a device's share of one block: query and KV heads and FFN
// rows; all of them under a layer split, none when the block is elsewhere.
type localBlock struct {
	heads, kvHeads, ffn int
}

func (l localBlock) present() bool { return l.heads > 0 || l.ffn > 0 }

// scratch are the plan's buffers on one device (plan.BufferRole), viewed
// as [rows, cols] tensors.
type scratch struct {
	tokens, pos, outIdx kernels.Tensor // I32 [1, batch] (plan.RoleInputs)
	x                   kernels.Tensor // [batch, n_embd] residual stream
	xn                  kernels.Tensor // [batch, n_embd] normed input, then a sub-layer's (partial) output
	q, attn             kernels.Tensor // [batch, local heads*head_dim]
	k, v                kernels.Tensor // [batch, local KV heads*head_dim]
	gate, up            kernels.Tensor // [batch, local FFN rows]
	logits              kernels.Tensor // [batch, local vocabulary rows]
	topIDs, topLogits   kernels.Tensor // [batch, plan.TopK or fewer]: each row's best
	recv                kernels.Tensor // [batch, n_embd] activations from other devices
}

// LoadPlan loads the model of f as mp (one model of plan p) on backends,
// which maps each device index of mp to its backend. The plan must fit:
// LoadPlan refuses one that does not before allocating anything, and
// checks every tensor the architecture needs (present, shaped as the
// hyper-parameters say, of a type the devices run) before uploading any.
// f must stay open while the model lives.
func LoadPlan(ctx context.Context, f *gguf.File, p *plan.Plan, mp *plan.ModelPlan, backends map[int]kernels.Backend, progress func(Progress)) (_ *Model, err error) {
	if !p.Fits {
		return nil, fmt.Errorf("model: %s: the plan does not fit its devices: %w", mp.Role, ErrBadParam)
	}
	if len(mp.Borrowed) > 0 {
		return nil, fmt.Errorf("model: %s borrows %v from the target: %w on a decoder", mp.Role, mp.Borrowed, ErrUnsupported)
	}
	params, err := ReadParams(f)
	if err != nil {
		return nil, err
	}
	m := &Model{
		params: params, role: string(mp.Role), plan: p, ctx: p.Ctx, batch: p.Batch, slots: 1,
		// One device has nothing to sum across: it runs its blocks whole.
		layered: mp.Placement.Split == plan.SplitLayer || len(mp.Placement.Devices) == 1,
		byDev:   map[int]*part{}, embd: mp.EmbeddingRun, head: mp.HeadRun,
	}
	if !m.layered && (params.arch.postNorms || params.arch.moe) {
		// Norms of a block's output and routed experts act on the whole
		// sum of the devices' shares: a tensor split would apply them to
		// each share.
		return nil, fmt.Errorf("model: %s: %s blocks under a tensor split: %w (use a layer split)", mp.Role, params.Arch, ErrUnsupported)
	}
	devs := mp.Placement.Devices
	apart := mp.Placement.Experts == plan.ExpertsOnDevice
	if apart {
		if !params.arch.moe {
			return nil, fmt.Errorf("model: %s: experts on device %d, but %s blocks have none: %w", mp.Role, mp.Placement.ExpertDevice, params.Arch, ErrBadParam)
		}
		devs = append(slices.Clone(devs), mp.Placement.ExpertDevice)
	}
	var bes []kernels.Backend
	for _, d := range devs {
		be, ok := backends[d]
		if !ok {
			return nil, fmt.Errorf("model: %s: no backend for device %d", mp.Role, d)
		}
		pt := &part{dev: d, be: be, local: make([]localBlock, params.Layers), kvK: make([]kernels.Tensor, params.Layers),
			kvV: make([]kernels.Tensor, params.Layers), progs: newPrograms(be, fmt.Sprintf("device %d", d))}
		pt.dst = map[string]*kernels.Tensor{}
		for _, s := range params.specs(&pt.w) {
			pt.dst[s.name] = s.dst
		}
		m.parts = append(m.parts, pt)
		m.byDev[d] = pt
		bes = append(bes, be)
	}
	if apart {
		m.experts = m.parts[len(m.parts)-1]
		bes = bes[:len(bes)-1]
	}
	if err := params.checkOps(bes); err != nil {
		return nil, err
	}
	if err := m.checkTensors(f, params, bes); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	m.direct = m.allDirect()
	if err := m.assign(mp); err != nil {
		return nil, err
	}
	if err := m.loadTensors(ctx, f, mp, progress); err != nil {
		return nil, err
	}
	if err := m.allocBuffers(p, mp); err != nil {
		return nil, err
	}
	// The plan gives a model a KV cache of the context per sequence it
	// decodes at once (plan.Input.Parallel).
	for _, pt := range m.parts {
		for _, k := range pt.kvK {
			if k.Valid() {
				m.slots = max(1, k.Rows/m.ctx)
			}
		}
	}
	b, embd := m.batch, params.Embd
	m.tokens, m.positions, m.outIdx = make([]int32, b), make([]int32, b), make([]int32, b)
	m.cacheRows = make([]int32, b)
	m.hostX, m.partial = make([]float32, b*embd), make([]float32, b*embd)
	widest := int64(0)
	for _, h := range m.head {
		widest = max(widest, h.Rows.Len())
	}
	m.rows = make([]float32, int64(b)*widest)
	m.shardIDs, m.shardLogits = make([]int32, b*plan.TopK), make([]float32, b*plan.TopK)
	if m.group, err = m.reduceGroup(); err != nil {
		return nil, err
	}
	return m, nil
}

// Options configure Load. The zero value is a usable default.
type Options struct {
	// Device describes the backend for the plan: its kind and memory. The
	// zero value is a CPU device of unbounded memory.
	Device device.Device
	// Context, Batch and KV are the plan's (plan.Input); zero values take
	// the planner's defaults, but for KV, whose zero value is F32.
	Context, Batch int
	KV             plan.KVTypes
	// Parallel is the sequences the KV caches hold (ForwardSeqs); 0: 1.
	Parallel int
	// Progress, if set, is called after each tensor is placed.
	Progress func(Progress)
}

// Load loads f alone on be, as the one-device plan of opts: what tools and
// tests use where the engine's configuration is not needed. It is
// LoadPlan's path; Plan says what was planned.
func Load(ctx context.Context, f *gguf.File, be kernels.Backend, opts Options) (*Model, error) {
	d := opts.Device
	if d.MemoryTotal == 0 {
		d = device.Device{Kind: device.CPU, Name: be.Name(), Physical: -1, Virtual: true, MemoryTotal: math.MaxInt64 / 2}
	}
	p, err := plan.Make(plan.Input{Target: f, Devices: []device.Device{d}, Ctx: opts.Context, Batch: opts.Batch, KV: opts.KV, Parallel: opts.Parallel})
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	return LoadPlan(ctx, f, p, &p.Target, map[int]kernels.Backend{d.Index: be}, opts.Progress)
}

// assign records each device's share of every block, and where the
// embedding and head rows are.
func (m *Model) assign(mp *plan.ModelPlan) error {
	p := m.params
	group := p.Heads / p.KVHeads
	if m.layered {
		if mp.BlockDevice != nil && len(mp.BlockDevice) != p.Layers {
			return fmt.Errorf("model: plan has %d blocks, the model %d: %w", len(mp.BlockDevice), p.Layers, ErrShape)
		}
		for b := range p.Layers {
			d := mp.Placement.Devices[0]
			if mp.BlockDevice != nil {
				d = mp.BlockDevice[b]
			}
			m.byDev[d].local[b] = localBlock{heads: p.Heads, kvHeads: p.KVHeads, ffn: p.FF}
		}
	} else {
		if len(mp.KVHeads) != p.Layers || len(mp.FFNRows) != p.Layers {
			return fmt.Errorf("model: plan cuts %d blocks, the model has %d: %w", len(mp.KVHeads), p.Layers, ErrShape)
		}
		for b := range p.Layers {
			for i, pt := range m.parts {
				kv := int(mp.KVHeads[b][i].Len())
				pt.local[b] = localBlock{heads: kv * group, kvHeads: kv, ffn: int(mp.FFNRows[b][i].Len())}
			}
		}
	}
	for _, h := range mp.EmbeddingRun {
		if m.byDev[h.Device] == nil {
			return fmt.Errorf("model: %s: embedding on device %d, not one of the model's: %w", mp.Role, h.Device, ErrUnsupported)
		}
		m.byDev[h.Device].embdRows = h.Rows
	}
	for _, h := range mp.HeadRun {
		if m.byDev[h.Device] == nil {
			return fmt.Errorf("model: %s: head on device %d, not one of the model's: %w", mp.Role, h.Device, ErrUnsupported)
		}
		m.byDev[h.Device].headRows = h.Rows
	}
	return nil
}

// Params are the model's hyper-parameters.
func (m *Model) Params() Params { return m.params }

// Plan is the plan the model was loaded from.
func (m *Model) Plan() *plan.Plan { return m.plan }

// Context is the KV cache length in tokens.
func (m *Model) Context() int { return m.ctx }

// TiedHead reports whether the output head is the token embedding.
func (m *Model) TiedHead() bool {
	for _, pt := range m.parts {
		if pt.w.output.Valid() {
			return pt.w.output.Buf == pt.w.tokEmbd.Buf
		}
	}
	return false
}

// Len is the number of positions in the KV cache: the next Forward starts
// at Len() or earlier.
func (m *Model) Len() int { return m.n }

// Truncate drops cached positions n and later, so generation resumes at n
// (speculative rollback). n may not exceed Len().
func (m *Model) Truncate(n int) error {
	if n < 0 || n > m.n {
		return fmt.Errorf("model: truncate to %d with %d cached: %w", n, m.n, ErrPosition)
	}
	m.n = n
	return nil
}

// Usage is what the model holds on each device, by device index.
func (m *Model) Usage() map[int]kernels.Usage {
	out := make(map[int]kernels.Usage, len(m.parts))
	for _, pt := range m.parts {
		u := kernels.Usage{}
		for _, b := range pt.bufs {
			u[b.Label()] += b.Size()
		}
		out[pt.dev] = u
	}
	return out
}

// weightBytes is the bytes of weights one token's pass reads: every block
// matrix and the head (the embedding is read one row per token).
func (m *Model) weightBytes() int64 {
	var n int64
	for _, pt := range m.parts {
		if pt.headRows.Len() > 0 {
			n += pt.w.output.Bytes()
		}
		for _, b := range pt.w.blocks {
			for _, t := range []kernels.Tensor{b.wq, b.wk, b.wv, b.wo, b.gate, b.up, b.down} {
				n += t.Bytes()
			}
		}
	}
	return n
}

// Close releases the programs and device memory of every part; the
// backends themselves stay open (their owner closes them).
func (m *Model) Close() error {
	var errs []error
	for _, pt := range m.parts {
		errs = append(errs, pt.progs.close())
		for _, b := range pt.bufs {
			errs = append(errs, pt.be.Free(b))
		}
		pt.bufs = nil
	}
	if m.group != nil {
		errs = append(errs, m.group.Close())
		m.group = nil
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("model: close: %w", err)
	}
	return nil
}
