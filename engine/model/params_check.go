package model

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tandem-run/tandem/engine/gguf"
)

// Caps on hyper-parameters read from a file. Each is far past any released
// model (the largest have ~130 blocks, 128 heads of 256, widths of 2^15,
// vocabularies of 2^18 and contexts of 2^23) and small enough that the
// sizes made from them fit an int64 and per-block bookkeeping stays small.
const (
	maxLayers   = 1 << 12
	maxHeads    = 1 << 12
	maxHeadDim  = 1 << 14
	maxEmbd     = 1 << 20
	maxFF       = 1 << 22
	maxVocab    = 1 << 22
	maxTrainCtx = 1 << 27
	maxExperts  = 1 << 12
)

// check compares p, as read from f's metadata, with sane caps and with the
// tensors f holds, before anything is sized by p: a header claiming 2^20
// blocks, or heads its tensors do not have, is refused here rather than
// after per-block specs, caches and scratch were allocated for it.
func (p Params) check(f *gguf.File) error {
	if err := p.checkCaps(f); err != nil {
		return err
	}
	if err := checkBlocks(f, p.Layers); err != nil {
		return err
	}
	if p.Arch == archEagle3 || p.Arch == archDFlash {
		return nil // its layout (fc, d2t, a borrowed embedding) is checked by LoadEagle3 or LoadDFlash
	}
	embd, qDim, kvDim := int64(p.Embd), int64(p.Heads*p.HeadDim), int64(p.KVHeads*p.HeadDim)
	ffn := struct {
		name string
		dims []int64
	}{"blk.0.ffn_up.weight", []int64{embd, int64(p.FF)}}
	if p.arch.moe {
		ffn.name, ffn.dims = "blk.0.ffn_up_exps.weight", []int64{embd, int64(p.ExpertFF), int64(p.Experts)}
	}
	for _, want := range []struct {
		name string
		dims []int64
	}{
		{"token_embd.weight", []int64{embd, int64(p.Vocab)}},
		{"blk.0.attn_q.weight", []int64{embd, qDim}},
		{"blk.0.attn_k.weight", []int64{embd, kvDim}},
		ffn,
	} {
		t, ok := f.Tensor(want.name)
		if !ok {
			return fmt.Errorf("model: tensor %q: %w", want.name, ErrMissing)
		}
		if !slices.Equal(t.Dims, want.dims) {
			return fmt.Errorf("model: tensor %q is %v, the metadata implies %v: %w", want.name, t.Dims, want.dims, ErrShape)
		}
	}
	return nil
}

// checkCaps bounds each count and the products the model is sized by.
func (p Params) checkCaps(f *gguf.File) error {
	for _, c := range []struct {
		what string
		v    int
		max  int
	}{
		{"block_count", p.Layers, maxLayers},
		{"attention.head_count", p.Heads, maxHeads},
		{"attention.head_count_kv", p.KVHeads, p.Heads},
		{"attention.key_length", p.HeadDim, maxHeadDim},
		{"embedding_length", p.Embd, maxEmbd},
		{"feed_forward_length", p.FF, maxFF},
		{"vocabulary size", p.Vocab, maxVocab},
		{"context_length", p.TrainCtx, maxTrainCtx},
	} {
		if c.v == 0 && c.what == "vocabulary size" && p.Arch == archEagle3 {
			continue // an EAGLE-3 draft may borrow the target's head and its vocabulary
		}
		if c.v < 1 || c.v > c.max {
			return fmt.Errorf("model: %s %s = %d (want 1 to %d): %w", p.Arch, c.what, c.v, c.max, ErrBadParam)
		}
	}
	if n, ok := f.ArchUint("expert_count"); ok && n > 0 && !p.arch.moe {
		return fmt.Errorf("model: %s.expert_count = %d: mixture-of-experts %s models are %w (qwen3moe is read)", p.Arch, n, p.Arch, ErrUnsupported)
	}
	if p.arch.moe {
		switch {
		case p.Experts > maxExperts || p.ExpertsUsed > p.Experts:
			return fmt.Errorf("model: %s: %d of %d experts (at most %d): %w", p.Arch, p.ExpertsUsed, p.Experts, maxExperts, ErrBadParam)
		case p.ExpertFF < 1 || p.ExpertFF > maxFF:
			return fmt.Errorf("model: %s expert_feed_forward_length = %d (want 1 to %d): %w", p.Arch, p.ExpertFF, maxFF, ErrBadParam)
		}
		if _, ok := gguf.Product(int64(p.Experts), int64(p.ExpertFF), int64(p.Embd), 4); !ok {
			return fmt.Errorf("model: %d experts of %d x %d overflow: %w", p.Experts, p.ExpertFF, p.Embd, ErrBadParam)
		}
	}
	// The widest product a pass sizes buffers by: the head's logits and the
	// KV cache of the trained context (Load's own context is at most that
	// unless asked for more, and the cache of that is checked when sized).
	if _, ok := gguf.Product(int64(p.Vocab), int64(p.Embd), 4); !ok {
		return fmt.Errorf("model: a %d x %d head overflows: %w", p.Vocab, p.Embd, ErrBadParam)
	}
	if _, ok := gguf.Product(int64(p.Layers), int64(p.TrainCtx), int64(p.KVHeads), int64(p.HeadDim), 8); !ok {
		return fmt.Errorf("model: the KV cache of %d blocks x %d positions overflows: %w", p.Layers, p.TrainCtx, ErrBadParam)
	}
	return nil
}

// checkBlocks requires f's block tensors (blk.N.*) to number exactly
// blocks 0 to layers-1.
func checkBlocks(f *gguf.File, layers int) error {
	seen := make(map[int]bool, min(layers, len(f.Tensors)))
	for _, t := range f.Tensors {
		rest, ok := strings.CutPrefix(t.Name, "blk.")
		if !ok {
			continue
		}
		num, _, _ := strings.Cut(rest, ".")
		b, err := strconv.Atoi(num)
		if err != nil || b < 0 || b >= layers {
			return fmt.Errorf("model: tensor %q is outside the %d blocks of block_count: %w", t.Name, layers, ErrBadParam)
		}
		seen[b] = true
	}
	if len(seen) != layers {
		return fmt.Errorf("model: block_count is %d but the file has tensors for %d blocks: %w", layers, len(seen), ErrBadParam)
	}
	return nil
}
