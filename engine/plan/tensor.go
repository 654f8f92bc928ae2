package plan

import (
	"fmt"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/kernels/quant"
)

// Class is the budget category of a weight tensor.
type Class string

const (
	ClassWeights   Class = "weights"   // block tensors and small globals
	ClassEmbedding Class = "embedding" // an untied token embedding
	ClassHead      Class = "head"      // output head, its norm, a tied embedding
	ClassExperts   Class = "experts"   // routed experts and their router (ExpertsOnDevice)
)

// ExpertBytes is the size of mp's routed experts and routers wherever they
// are placed: what keeping them apart (ExpertsOnDevice) moves; 0 for a
// model without experts.
func (mp *ModelPlan) ExpertBytes() int64 {
	var n int64
	for i := range mp.Tensors {
		t := &mp.Tensors[i]
		if _, suffix, ok := blockOf(t.Name); ok && isExpert(suffix) {
			n = sum(n, t.Bytes())
		}
	}
	return n
}

// isExpert reports whether a block tensor's suffix is a routed expert
// tensor or the router that feeds them: what ExpertsOnDevice moves.
func isExpert(suffix string) bool {
	switch suffix {
	case "ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight", "ffn_gate_inp.weight":
		return true
	}
	return false
}

// Tensor is one GGUF tensor and where its bytes go.
type Tensor struct {
	Name  string
	File  Role // whose GGUF holds the bytes (Target for a draft's borrowed copy)
	For   Role // whose computation uses these shards
	Class Class
	Block int // -1 outside the blocks
	Type  quant.Type
	Dims  []int64 // ne0 (row length) first
	// Shards are the pieces to allocate, one per device. A mirrored or
	// replicated tensor has one whole shard per device.
	Shards []Shard
}

// Bytes is the sum of the shards' bytes.
func (t *Tensor) Bytes() int64 {
	var n int64
	for _, s := range t.Shards {
		n = sum(n, s.Bytes)
	}
	return n
}

// Shard is the part of a tensor one device holds: the range [Lo, Hi) along
// dimension Dim. Dim is the last dimension for a cut by rows (output
// features, vocabulary rows) and for a whole tensor (its full range), and 0
// for a cut by columns (input features; always at quant block boundaries).
type Shard struct {
	Device int
	Dim    int
	Range
	Bytes int64
}

// Whole reports whether s holds all of t.
func (s Shard) Whole(t *Tensor) bool {
	return s.Dim == len(t.Dims)-1 && s.Lo == 0 && s.Hi == t.Dims[s.Dim]
}

// FileRange is where a shard cut by rows (or a whole tensor) lies within the
// tensor's bytes in the file; ok is false for a column cut, which takes a
// block-aligned piece of every row instead.
func (s Shard) FileRange(t *Tensor) (offset, n int64, ok bool) {
	if s.Dim != len(t.Dims)-1 || (s.Dim == 0 && t.Type.BlockSize() != 1) {
		return 0, 0, false
	}
	if s.Len() == 0 {
		return 0, 0, true
	}
	per := s.Bytes / s.Len()
	return s.Lo * per, s.Bytes, true
}

// rule is how a tensor is placed.
type rule int

const (
	ruleOnce    rule = iota // whole, on one device
	ruleMirror              // a whole copy on each device
	ruleQRows               // output features by query heads (of whole KV groups)
	ruleKRows               // output features by KV heads, key width
	ruleVRows               // output features by KV heads, value width
	ruleQCols               // input features by query heads (attention output)
	ruleFFNRows             // output features by FFN rows
	ruleFFNCols             // input features by FFN rows (FFN down)
)

// tensorSplitRule is how a tensor split cuts a block tensor, by its name.
// Biases added after a cross-device sum live on one device, so they are
// added once.
func tensorSplitRule(suffix string, dims []int64) (rule, error) {
	switch suffix {
	case "attn_q.weight", "attn_q.bias":
		return ruleQRows, nil
	case "attn_k.weight", "attn_k.bias":
		return ruleKRows, nil
	case "attn_v.weight", "attn_v.bias":
		return ruleVRows, nil
	case "attn_output.weight":
		return ruleQCols, nil
	case "ffn_gate.weight", "ffn_up.weight", "ffn_gate.bias", "ffn_up.bias":
		return ruleFFNRows, nil
	case "ffn_down.weight":
		return ruleFFNCols, nil
	case "attn_output.bias", "ffn_down.bias":
		return ruleOnce, nil
	}
	if len(dims) == 1 {
		return ruleMirror, nil // norms
	}
	return 0, fmt.Errorf("tensor split cannot cut %q (fused or expert tensors need a layer split)", suffix)
}

// shard makes the piece [r) of t along dim for device d, checking that a
// column cut falls on quant block boundaries.
func shard(t *gguf.TensorInfo, d, dim int, r Range) (Shard, error) {
	s := Shard{Device: d, Dim: dim, Range: r}
	last := len(t.Dims) - 1
	switch {
	case r.Len() == 0:
	case dim == last && r.Len() == t.Dims[last]:
		s.Bytes = t.Bytes
	case dim == last && last > 0:
		s.Bytes = r.Len() * (t.Bytes / t.Dims[last])
	case dim == 0:
		bs := int64(t.Type.BlockSize())
		if r.Lo%bs != 0 || r.Hi%bs != 0 {
			return s, fmt.Errorf("tensor %q (%v): columns %d-%d do not fall on its blocks of %d; use a layer split or other ratios", t.Name, t.Type, r.Lo, r.Hi, bs)
		}
		row, err := t.Type.RowBytes(r.Len())
		if err != nil {
			return s, fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		s.Bytes = row * (t.Elements() / t.Dims[0])
	default:
		return s, fmt.Errorf("tensor %q: cannot cut dimension %d", t.Name, dim)
	}
	return s, nil
}

// whole is all of t on device d.
func whole(t *gguf.TensorInfo, d int) Shard {
	last := len(t.Dims) - 1
	return Shard{Device: d, Dim: last, Range: Range{0, t.Dims[last]}, Bytes: t.Bytes}
}

func newTensor(t *gguf.TensorInfo, file, use Role, class Class, block int) Tensor {
	return Tensor{Name: t.Name, File: file, For: use, Class: class, Block: block, Type: t.Type, Dims: t.Dims}
}
