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

// BufferRole is what a buffer holds. The executor binds each buffer of a
// plan by its role, so planner and executor share these values rather
// than names.
type BufferRole uint8

// The roles, with the shape each buffer has (ne0 first; B tokens, the
// batch, against a context of ctx):
const (
	RoleKeys      BufferRole = iota // [hd_k*kv_heads, ctx] one block's K cache, in the K type
	RoleValues                      // [hd_v*kv_heads, ctx] one block's V cache, in the V type
	RoleStream                      // x [n_embd, B] residual stream
	RoleNormed                      // xn [in, B] normalised input (also a tensor split's partial sums)
	RoleQueries                     // q [hd_k*heads, B] queries of the local heads
	RoleNewKeys                     // k [hd_k*kv_heads, B] new keys before they enter the cache
	RoleNewValues                   // v [hd_v*kv_heads, B] new values before they enter the cache
	RoleAttention                   // attn [hd_v*heads, B] attention output before its projection
	RoleFFNGate                     // ffn_gate [ffn, B]
	RoleFFNUp                       // ffn_up [ffn, B]
	RoleLogits                      // logits [vocab rows, B] where (a part of) the head runs
	RoleTopIDs                      // top_ids I32 [TopK, B] each row's best ids (argmax, top-k) where the head runs
	RoleTopLogits                   // top_logits [TopK, B] their logits
	RoleReceive                     // recv [n_embd, B] activations arriving from another device
	RoleFeatures                    // features [n_target*hidden, B] an EAGLE-3 draft's inputs from the target
	RoleFused                       // fused [n_embd, ctx] an EAGLE-3 draft's fc of them, one row per position
	RoleState                       // state [n_embd, 1] an EAGLE-3 draft's output carried to its next step
	RoleInputs                      // inputs I32 [B, 3] token ids, positions and rows wanted, on every device
	numRoles
)

var roleNames = [numRoles]string{"k", "v", "x", "xn", "q", "k", "v", "attn", "ffn_gate", "ffn_up",
	"logits", "top_ids", "top_logits", "recv", "features", "fused", "state", "inputs"}

func (r BufferRole) String() string {
	if r < numRoles {
		return roleNames[r]
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// TopK is the most candidates a row's device top-k returns: the head's
// devices keep this many ids and logits per row (RoleTopIDs).
const TopK = 40

// Buffer is one allocation besides the weights: a KV cache of one block on
// one device, in its KV type, or a buffer the forward pass reuses block
// after block, F32 unless its role says otherwise, shaped for the largest
// forward (see BufferRole). In the shapes, in is the widest block input
// (2 x n_embd for EAGLE-3), and heads, kv_heads and ffn are the device's
// share under a tensor split.
type Buffer struct {
	Role   BufferRole
	For    Role
	Device int
	Block  int // KV caches: their block; -1 otherwise
	Type   quant.Type
	Dims   []int64 // ne0 first
	Bytes  int64
}

// Kind is the buffer's budget category.
func (b Buffer) Kind() BufferKind {
	if b.Role == RoleKeys || b.Role == RoleValues {
		return BufferKV
	}
	return BufferScratch
}

// Name is the buffer in messages: "blk.3.k" for a cache, else its role.
func (b Buffer) Name() string {
	if b.Kind() == BufferKV {
		return fmt.Sprintf("blk.%d.%s", b.Block, b.Role)
	}
	return b.Role.String()
}

// kvBuffers is the K and V cache of every block, on the devices that hold
// the block's KV heads: [head_dim x kv_heads, ctx] each.
func (m *model) kvBuffers(ctx int64, types KVTypes) ([]Buffer, error) {
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
				role BufferRole
				dim  int64
				t    quant.Type
			}{{RoleKeys, s.HeadDimK, types.K}, {RoleValues, s.HeadDimV, types.V}} {
				if bs := int64(kv.t.BlockSize()); bs > 0 && kv.dim%bs != 0 {
					return nil, fmt.Errorf("plan: %s: KV type %v cannot hold heads of %d values (blocks of %d)", m.role, kv.t, kv.dim, bs)
				}
				row, err := kv.t.RowBytes(kv.dim * heads)
				if err != nil {
					return nil, fmt.Errorf("plan: %s: KV type %v cannot hold %d x %d values per token: %w", m.role, kv.t, kv.dim, heads, err)
				}
				out = append(out, Buffer{Role: kv.role, For: m.role, Device: d, Block: b, Type: kv.t,
					Dims: []int64{kv.dim * heads, ctx}, Bytes: product(row, ctx)})
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
	ffn       int64
	gated     bool
	receives  bool // activations arrive from another device
	head      bool // runs the head's matmul
	vocab     int64
	norm      bool // holds output_norm
	features  int64
	quantized int64 // widest activation an integer product reads (workspace.go)
	half      int64 // widest activation an F16 product reads (workspace.go)
	runs      bool  // one of the model's devices: it takes token ids and positions
	experts   bool  // runs the routed experts of blocks held elsewhere (ExpertsOnDevice)
}

// scratch lists the f32 scratch buffers of a model, per device (see Buffer).
func (m *model) scratch(ctx, batch int64) []Buffer {
	per := m.locals()
	var out []Buffer
	typed := func(d int, r BufferRole, t quant.Type, dims ...int64) {
		n := product(append([]int64{int64(t.TypeSize())}, dims...)...)
		if n > 0 {
			out = append(out, Buffer{Role: r, For: m.role, Device: d, Block: -1, Type: t, Dims: dims, Bytes: n})
		}
	}
	add := func(d int, r BufferRole, dims ...int64) { typed(d, r, quant.F32, dims...) }
	s := m.shape
	for _, d := range sortedKeys(per) {
		l := per[d]
		if l.blocks {
			add(d, RoleStream, s.Embd, batch)
			add(d, RoleNormed, l.in, batch)
			add(d, RoleQueries, s.HeadDimK*l.heads, batch)
			add(d, RoleNewKeys, s.HeadDimK*l.kv, batch)
			add(d, RoleNewValues, s.HeadDimV*l.kv, batch)
			add(d, RoleAttention, s.HeadDimV*l.heads, batch)
			if l.gated {
				add(d, RoleFFNGate, l.ffn, batch)
			}
			add(d, RoleFFNUp, l.ffn, batch)
		} else if l.norm && l.head || l.experts {
			add(d, RoleNormed, s.Embd, batch)
		}
		if l.head {
			add(d, RoleLogits, l.vocab, batch)
			typed(d, RoleTopIDs, quant.I32, min(TopK, l.vocab), batch)
			add(d, RoleTopLogits, min(TopK, l.vocab), batch)
		}
		if l.receives {
			add(d, RoleReceive, s.Embd, batch)
		}
		if l.features > 0 {
			add(d, RoleFeatures, l.features, batch)
			if s.Arch == archEagle3 { // a DFlash draft writes its K and V of them at once
				add(d, RoleFused, s.Embd, ctx)
				add(d, RoleState, s.Embd, 1)
			}
		}
		if l.runs {
			typed(d, RoleInputs, quant.I32, batch, 3)
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
	for _, d := range m.p.Devices {
		at(d).runs = true
	}
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
			if _, ok := m.file.Tensor(fmt.Sprintf("blk.%d.ffn_gate.weight", b)); ok {
				l.gated = true
			}
			l.quantized = max(l.quantized, m.quantizedInputs(b, heads, ffn))
			l.half = max(l.half, m.halfInputs(b, heads, ffn))
		}
	}
	for _, h := range m.headRun {
		l := at(h.Device)
		l.head, l.vocab = true, max(l.vocab, h.Rows.Len())
		if m.headQuantizes() {
			l.quantized = max(l.quantized, s.Embd)
		}
		if m.headHalf() {
			l.half = max(l.half, s.Embd)
		}
	}
	for _, d := range m.normDevs {
		at(d).norm = true
	}
	if m.p.Experts == ExpertsOnDevice {
		// Each block's normalised FFN input crosses to the experts, whose
		// output (in their normed buffer) crosses back to the block.
		e := at(m.p.ExpertDevice)
		e.runs, e.experts, e.receives = true, true, true
		for _, d := range m.blockDevices() {
			at(d).receives = true
		}
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
