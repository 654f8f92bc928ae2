package model

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// Placed is a decoder spread over several backends exactly as a
// plan.ModelPlan says: whole blocks per device (layer split) or every block
// cut across the devices (tensor split), the head on one device, replicated,
// or split by vocabulary rows. Activations cross devices straight from
// one device's memory to the other's where the backends allow, else
// through the host (placed_exchange.go).
//
// It allocates the plan's shards and buffers, and reserves a CUDA
// backend's workspace at the plan's figure, and nothing else of size, so
// each backend's Usage is the plan's per-device budget. Its methods are
// called from one goroutine at a time, like Model's.
type Placed struct {
	params  Params
	role    string
	ctx     int // KV cache length
	batch   int // most tokens per pass, and most logit rows per head pass
	layered bool
	direct  bool    // every device copies straight from every other
	parts   []*part // in placement order
	byDev   map[int]*part
	embd    []plan.Holder // where token lookups run
	head    []plan.Holder // where the head's matmul runs
	n       int           // cached positions
	cap     *capture      // block inputs handed to an EAGLE-3 draft (Capture)

	// host staging, sized once
	tokens, positions, outIdx []int32
	hostX, partial            []float32 // [batch, n_embd]
	rows                      []float32 // [batch, widest head shard]
	logits                    []float32
}

// part is what one device holds and runs of a Placed model.
type part struct {
	dev   int
	be    kernels.Backend
	bufs  []kernels.Buffer
	blk   []blockWeights // by block; zero tensors where the device has none of it
	local []localBlock   // by block
	kvK   []kernels.Tensor
	kvV   []kernels.Tensor

	tokEmbd, outNorm, output, ropeFreqs kernels.Tensor
	embdRows, headRows                  plan.Range

	s     placedScratch
	progs map[progKey]kernels.Program
}

// localBlock is a device's share of one block: query and KV heads and FFN
// rows; all of them under a layer split, none when the block is elsewhere.
type localBlock struct {
	heads, kvHeads, ffn int
}

func (l localBlock) present() bool { return l.heads > 0 || l.ffn > 0 }

// placedScratch are the plan's scratch buffers on one device (see
// plan.Buffer), viewed as [rows, cols] tensors, plus the small I32 inputs.
type placedScratch struct {
	tokens, pos, outIdx kernels.Tensor // I32 [1, batch]
	x                   kernels.Tensor // [batch, n_embd] residual stream
	xn                  kernels.Tensor // [batch, n_embd] normed input, then a sub-layer's (partial) output
	q, attn             kernels.Tensor // [batch, local heads*head_dim]
	k, v                kernels.Tensor // [batch, local KV heads*head_dim]
	gate, up            kernels.Tensor // [batch, local FFN rows]
	logits              kernels.Tensor // [batch, local vocabulary rows]
	recv                kernels.Tensor // [batch, n_embd] activations from other devices
}

// LoadPlaced loads the model of f as mp (one model of plan p) on backends,
// which maps each device index of mp to its backend. The plan must fit:
// LoadPlaced refuses one that does not before allocating anything. f must
// stay open while the model lives.
func LoadPlaced(ctx context.Context, f *gguf.File, p *plan.Plan, mp *plan.ModelPlan, backends map[int]kernels.Backend, progress func(Progress)) (_ *Placed, err error) {
	if !p.Fits {
		return nil, fmt.Errorf("model: %s: the plan does not fit its devices: %w", mp.Role, ErrBadParam)
	}
	if len(mp.Borrowed) > 0 {
		return nil, fmt.Errorf("model: %s borrows %v from the target: %w on a placed model", mp.Role, mp.Borrowed, ErrUnsupported)
	}
	params, err := ReadParams(f)
	if err != nil {
		return nil, err
	}
	if p.KVType != quant.F32 && p.KVType != quant.F16 {
		return nil, fmt.Errorf("model: KV cache type %v: %w (F32 or F16)", p.KVType, ErrUnsupported)
	}
	m := &Placed{
		params: params, role: string(mp.Role), ctx: p.Ctx, batch: p.Batch,
		// One device has nothing to sum across: it runs its blocks whole.
		layered: mp.Placement.Split == plan.SplitLayer || len(mp.Placement.Devices) == 1,
		byDev:   map[int]*part{}, embd: mp.EmbeddingRun, head: mp.HeadRun,
	}
	for _, d := range mp.Placement.Devices {
		be, ok := backends[d]
		if !ok {
			return nil, fmt.Errorf("model: %s: no backend for device %d", mp.Role, d)
		}
		pt := &part{dev: d, be: be, blk: make([]blockWeights, params.Layers),
			local: make([]localBlock, params.Layers), kvK: make([]kernels.Tensor, params.Layers),
			kvV: make([]kernels.Tensor, params.Layers), progs: map[progKey]kernels.Program{}}
		m.parts = append(m.parts, pt)
		m.byDev[d] = pt
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
	b, embd := m.batch, params.Embd
	m.tokens, m.positions, m.outIdx = make([]int32, b), make([]int32, b), make([]int32, b)
	m.hostX, m.partial = make([]float32, b*embd), make([]float32, b*embd)
	widest := int64(0)
	for _, h := range m.head {
		widest = max(widest, h.Rows.Len())
	}
	m.rows = make([]float32, int64(b)*widest)
	return m, nil
}

// assign records each device's share of every block, and where the
// embedding and head rows are.
func (m *Placed) assign(mp *plan.ModelPlan) error {
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
func (m *Placed) Params() Params { return m.params }

// Context is the KV cache length in tokens.
func (m *Placed) Context() int { return m.ctx }

// Len is the number of positions in the KV cache.
func (m *Placed) Len() int { return m.n }

// Truncate drops cached positions n and later (speculative rollback).
func (m *Placed) Truncate(n int) error {
	if n < 0 || n > m.n {
		return fmt.Errorf("model: truncate to %d with %d cached: %w", n, m.n, ErrPosition)
	}
	m.n = n
	return nil
}

// Usage is what the model holds on each device, by device index.
func (m *Placed) Usage() map[int]kernels.Usage {
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

// Close releases the programs and device memory of every part; the
// backends themselves stay open (their owner closes them).
func (m *Placed) Close() error {
	var errs []error
	for _, pt := range m.parts {
		for _, k := range slices.Collect(maps.Keys(pt.progs)) {
			errs = append(errs, pt.progs[k].Close())
			delete(pt.progs, k)
		}
		for _, b := range pt.bufs {
			errs = append(errs, pt.be.Free(b))
		}
		pt.bufs = nil
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("model: close: %w", err)
	}
	return nil
}
