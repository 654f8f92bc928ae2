package plan

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tandem-run/tandem/engine/gguf"
)

// Tensor names the planner treats specially (llama.cpp's GGUF names).
const (
	nameEmbd       = "token_embd.weight"
	nameHead       = "output.weight"
	nameHeadBias   = "output.bias"
	nameHeadNorm   = "output_norm.weight"
	nameHeadNormB  = "output_norm.bias"
	blockPrefix    = "blk."
	archEagle3     = "eagle3"
	archDFlash     = "dflash"
	maxBlocks      = 1 << 14 // bounds on header values, which come from files
	maxHeads       = 1 << 14
	maxEmbd        = 1 << 24
	maxHeadDim     = 1 << 16
	maxTargetLayer = 1 << 10
)

// Shape is what the planner needs of a model's hyper-parameters. Per-block
// values are slices because some architectures vary them by block.
type Shape struct {
	Arch     string
	Blocks   int
	Embd     int64   // width of the residual stream
	Heads    []int64 // query heads, per block
	KVHeads  []int64 // key/value heads, per block
	HeadDimK int64
	HeadDimV int64
	FFN      []int64 // FFN activation width per block (from the tensors)
	Vocab    int64   // rows of the head (the target's, for a draft that borrows it)
	Tied     bool    // one tensor, the token embedding, is also the head

	// EAGLE-3 and DFlash drafts read the inputs of these target blocks
	// (a DFlash draft's hidden states are as wide as its own).
	TargetLayers []int
	TargetHidden int64
}

// readShape reads the hyper-parameters of f and checks them against its
// tensors. Values come from an untrusted file, so each is bounded.
func readShape(f *gguf.File) (Shape, error) {
	s := Shape{Arch: f.Arch()}
	if s.Arch == "" {
		return s, fmt.Errorf("general.architecture is missing")
	}
	blocks, ok := f.ArchUint("block_count")
	if !ok || blocks == 0 || blocks > maxBlocks {
		return s, fmt.Errorf("%s.block_count is missing or out of range", s.Arch)
	}
	s.Blocks = int(blocks)
	embd, ok := f.ArchUint("embedding_length")
	if !ok || embd == 0 || embd > maxEmbd {
		return s, fmt.Errorf("%s.embedding_length is missing or out of range", s.Arch)
	}
	s.Embd = int64(embd)
	var err error
	if s.Heads, err = perBlock(f, "attention.head_count", s.Blocks, nil); err != nil {
		return s, err
	}
	if s.KVHeads, err = perBlock(f, "attention.head_count_kv", s.Blocks, s.Heads); err != nil {
		return s, err
	}
	for i := range s.Heads {
		if s.Heads[i] == 0 || s.KVHeads[i] == 0 || s.Heads[i]%s.KVHeads[i] != 0 {
			return s, fmt.Errorf("block %d: %d query heads do not group over %d KV heads", i, s.Heads[i], s.KVHeads[i])
		}
	}
	s.HeadDimK = s.Embd / s.Heads[0]
	if v, ok := f.ArchUint("attention.key_length"); ok {
		s.HeadDimK = int64(min(v, maxHeadDim))
	}
	s.HeadDimV = s.HeadDimK
	if v, ok := f.ArchUint("attention.value_length"); ok {
		s.HeadDimV = int64(min(v, maxHeadDim))
	}
	if s.HeadDimK == 0 || s.HeadDimV == 0 {
		return s, fmt.Errorf("head size is zero")
	}
	s.FFN = make([]int64, s.Blocks)
	for _, t := range f.Tensors {
		b, suffix, ok := blockOf(t.Name)
		if !ok {
			continue
		}
		if b >= s.Blocks {
			return s, fmt.Errorf("tensor %q is past block_count %d", t.Name, s.Blocks)
		}
		if width := ffnWidth(f, suffix, t.Dims); width > s.FFN[b] {
			s.FFN[b] = width
		}
	}
	if head, ok := f.Tensor(nameHead); ok {
		s.Vocab = lastDim(head)
	} else if embd, ok := f.Tensor(nameEmbd); ok {
		s.Vocab = lastDim(embd)
	}
	if s.Arch == archEagle3 || s.Arch == archDFlash {
		layers, ok := f.Int32s(s.Arch + ".target_layers")
		if !ok || len(layers) == 0 || len(layers) > maxTargetLayer {
			return s, fmt.Errorf("%s.target_layers is missing", s.Arch)
		}
		for _, l := range layers {
			s.TargetLayers = append(s.TargetLayers, int(l))
		}
		s.TargetHidden = s.Embd
		if v, ok := f.ArchUint("target_hidden_size"); ok && v > 0 && v <= maxEmbd {
			s.TargetHidden = int64(v)
		}
	}
	return s, nil
}

// perBlock reads a hyper-parameter that is either one number or one per
// block; def (when not nil) stands in for a missing key.
func perBlock(f *gguf.File, suffix string, n int, def []int64) ([]int64, error) {
	key := f.Arch() + "." + suffix
	out := make([]int64, n)
	if v, ok := f.Uint(key); ok {
		for i := range out {
			out[i] = int64(min(v, maxHeads))
		}
		return out, nil
	}
	if vs, ok := f.Int32s(key); ok {
		if len(vs) != n {
			return nil, fmt.Errorf("%s has %d values for %d blocks", key, len(vs), n)
		}
		for i, v := range vs {
			out[i] = int64(min(max(v, 0), maxHeads))
		}
		return out, nil
	}
	if def == nil {
		return nil, fmt.Errorf("%s is missing", key)
	}
	copy(out, def)
	return out, nil
}

// ffnWidth is the FFN activation width a block tensor implies: the rows of
// ffn_up/ffn_gate, or of the experts a token is routed to.
func ffnWidth(f *gguf.File, suffix string, dims []int64) int64 {
	switch {
	case len(dims) < 2:
		return 0
	case suffix == "ffn_up.weight" || suffix == "ffn_gate.weight":
		return dims[1]
	case (suffix == "ffn_up_exps.weight" || suffix == "ffn_gate_exps.weight") && len(dims) == 3:
		used, _ := f.ArchUint("expert_used_count")
		return dims[1] * int64(min(max(used, 1), uint64(dims[2])))
	case suffix == "ffn_up_shexp.weight":
		return dims[1]
	}
	return 0
}

// blockOf splits "blk.12.attn_q.weight" into 12 and "attn_q.weight".
func blockOf(name string) (int, string, bool) {
	rest, ok := strings.CutPrefix(name, blockPrefix)
	if !ok {
		return 0, "", false
	}
	num, suffix, ok := strings.Cut(rest, ".")
	if !ok {
		return 0, "", false
	}
	b, err := strconv.Atoi(num)
	if err != nil || b < 0 {
		return 0, "", false
	}
	return b, suffix, true
}

func lastDim(t *gguf.TensorInfo) int64 {
	if len(t.Dims) < 2 {
		return 1
	}
	return t.Dims[len(t.Dims)-1]
}
