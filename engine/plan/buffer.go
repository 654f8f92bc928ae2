package plan

import (
	"fmt"
	"slices"

	"github.com/tandem-run/tandem/kernels/quant"
)

// BufferKind is the budget category of a buffer.
type BufferKind string

const (
	BufferKV      BufferKind = "kv"
	BufferScratch BufferKind = "scratch"
)

// Buffer is one allocation besides the weights: a KV cache of one block on
// one device, [head_dim x local KV heads, ctx] in the KV type, named
// "blk.N.k" or "blk.N.v"; or a scratch buffer the forward pass reuses block
// after block, f32, shaped for the largest forward (B tokens, the batch,
// against a context of ctx):
//
//	x        [n_embd, B]          residual stream
//	xn       [in, B]              normalised input (also the partial sums of a tensor split)
//	q        [hd_k*heads, B]      queries of the local heads
//	k, v     [hd*kv_heads, B]     new keys and values before they enter the cache
//	scores   [ctx, B, group]      attention of one KV head's query group at a time
//	attn     [hd_v*heads, B]      attention output before the output projection
//	ffn_gate [ffn, B], ffn_up [ffn, B]  FFN activations of the local rows
//	logits   [vocab rows, B]      on each device that runs (a part of) the head
//	recv     [n_embd, B]          activations arriving from another device
//	features [n_target*hidden, B] an EAGLE-3 draft's inputs from the target
//	fused    [n_embd, ctx]        an EAGLE-3 draft's fc of them, one row per position
//
// where in is the widest block input (2 x n_embd for EAGLE-3), and heads,
// kv_heads and ffn are the device's share under a tensor split.
type Buffer struct {
	Name   string
	For    Role
	Kind   BufferKind
	Device int
	Block  int // KV caches: their block; -1 otherwise
	Type   quant.Type
	Dims   []int64 // ne0 first
	Bytes  int64
}

// kvBuffers is the K and V cache of every block, on the devices that hold
// the block's KV heads: [head_dim x kv_heads, ctx] each.
func (m *model) kvBuffers(ctx int64, kvType quant.Type) ([]Buffer, error) {
	var out []Buffer
	s := m.shape
	for b := range s.Blocks {
		for i, d := range m.p.Devices {
			var heads int64
			switch {
			case m.p.Split == SplitTensor:
				heads = m.kvHeads[b][i].Len()
			case m.blockDev[b] == d:
				heads = s.KVHeads[b]
			}
			if heads == 0 {
				continue
			}
			for _, kv := range []struct {
				name string
				dim  int64
			}{{"k", s.HeadDimK}, {"v", s.HeadDimV}} {
				row, err := kvType.RowBytes(kv.dim * heads)
				if err != nil {
					return nil, fmt.Errorf("plan: %s: KV type %v cannot hold %d x %d values per token: %w", m.role, kvType, kv.dim, heads, err)
				}
				out = append(out, Buffer{
					Name: fmt.Sprintf("blk.%d.%s", b, kv.name), For: m.role, Kind: BufferKV,
					Device: d, Block: b, Type: kvType, Dims: []int64{kv.dim * heads, ctx}, Bytes: product(row, ctx),
				})
			}
		}
	}
	return out, nil
}

// local is what one device computes of a model's blocks: the widest of its
// blocks in each respect (the buffers are reused block after block).
type local struct {
	blocks    bool
	in        int64 // width of the normalised input to Q and FFN (wider for EAGLE-3)
	heads, kv int64 // query and KV heads
	group     int64 // query heads per KV head
	ffn       int64
	gated     bool
	receives  bool // activations arrive from another device
	head      bool // runs the head's matmul
	vocab     int64
	norm      bool // holds output_norm
	features  int64
	quantized int64 // widest activation an integer product reads (workspace.go)
}

// scratch lists the f32 scratch buffers of a model, per device (see Buffer).
func (m *model) scratch(ctx, batch int64) []Buffer {
	per := m.locals()
	var out []Buffer
	add := func(d int, name string, dims ...int64) {
		n := product(append([]int64{4}, dims...)...)
		if n > 0 {
			out = append(out, Buffer{Name: name, For: m.role, Kind: BufferScratch, Device: d, Block: -1, Type: quant.F32, Dims: dims, Bytes: n})
		}
	}
	s := m.shape
	for _, d := range sortedKeys(per) {
		l := per[d]
		if l.blocks {
			add(d, "x", s.Embd, batch)
			add(d, "xn", l.in, batch)
			add(d, "q", s.HeadDimK*l.heads, batch)
			add(d, "k", s.HeadDimK*l.kv, batch)
			add(d, "v", s.HeadDimV*l.kv, batch)
			if l.kv > 0 {
				add(d, "scores", ctx, batch, l.group)
			}
			add(d, "attn", s.HeadDimV*l.heads, batch)
			if l.gated {
				add(d, "ffn_gate", l.ffn, batch)
			}
			add(d, "ffn_up", l.ffn, batch)
		} else if l.norm && l.head {
			add(d, "xn", s.Embd, batch)
		}
		if l.head {
			add(d, "logits", l.vocab, batch)
		}
		if l.receives {
			add(d, "recv", s.Embd, batch)
		}
		if l.features > 0 {
			add(d, "features", l.features, batch)
			add(d, "fused", s.Embd, ctx)
		}
	}
	return out
}

// locals works out, per device, what the model computes there and whether
// activations arrive from elsewhere.
func (m *model) locals() map[int]*local {
	per := make(map[int]*local)
	at := func(d int) *local {
		if per[d] == nil {
			per[d] = &local{}
		}
		return per[d]
	}
	s := m.shape
	for b := range s.Blocks {
		for i, d := range m.p.Devices {
			heads, kv, ffn := s.Heads[b], s.KVHeads[b], s.FFN[b]
			if m.p.Split == SplitTensor {
				kv = m.kvHeads[b][i].Len()
				heads, ffn = kv*(s.Heads[b]/s.KVHeads[b]), m.ffnRows[b][i].Len()
			} else if m.blockDev[b] != d {
				continue
			}
			l := at(d)
			l.blocks = true
			l.in = max(l.in, s.Embd, m.inputWidth(b))
			l.heads, l.kv, l.ffn = max(l.heads, heads), max(l.kv, kv), max(l.ffn, ffn)
			l.group = max(l.group, s.Heads[b]/s.KVHeads[b])
			if _, ok := m.file.Tensor(fmt.Sprintf("blk.%d.ffn_gate.weight", b)); ok {
				l.gated = true
			}
			l.quantized = max(l.quantized, m.quantizedInputs(b, heads, ffn))
		}
	}
	for _, h := range m.headRun {
		l := at(h.Device)
		l.head, l.vocab = true, max(l.vocab, h.Rows.Len())
		if m.headQuantizes() {
			l.quantized = max(l.quantized, s.Embd)
		}
	}
	for _, d := range m.normDevs {
		at(d).norm = true
	}
	if len(s.TargetLayers) > 0 {
		at(m.p.Devices[0]).features = s.TargetHidden * int64(len(s.TargetLayers))
	}
	// Activations cross devices: at layer boundaries, from the embedding
	// lookup to the first block, from the last block to the head, and, in a
	// tensor split, in every block's sum across devices.
	first, lastDev := m.p.Devices[0], m.p.Devices[len(m.p.Devices)-1]
	if m.p.Split == SplitTensor {
		if len(m.p.Devices) > 1 {
			for _, d := range m.p.Devices {
				at(d).receives = true
			}
		}
	} else {
		first, lastDev = m.blockDev[0], m.blockDev[len(m.blockDev)-1]
		for b := 1; b < len(m.blockDev); b++ {
			if m.blockDev[b] != m.blockDev[b-1] {
				at(m.blockDev[b]).receives = true
			}
		}
	}
	if len(m.embdRun) != 1 || m.embdRun[0].Device != first {
		at(first).receives = true
	}
	for _, h := range m.headRun {
		if h.Device != lastDev {
			at(h.Device).receives = true
		}
	}
	return per
}

// inputWidth is the width of block b's normalised input: the row length of
// its query projection (twice n_embd for an EAGLE-3 draft).
func (m *model) inputWidth(b int) int64 {
	if t, ok := m.file.Tensor(fmt.Sprintf("blk.%d.attn_q.weight", b)); ok {
		return t.Dims[0]
	}
	return m.shape.Embd
}

func sortedKeys[V any](m map[int]V) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
