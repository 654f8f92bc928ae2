package model

import (
	"fmt"

	"github.com/tandem-run/tandem/engine/gguf"
)

// A DFlash draft (llama.cpp's "dflash" GGUF architecture) proposes a whole
// block of tokens in one forward pass. What this package takes from
// llama.cpp (src/models/dflash.cpp, src/llama-arch.cpp, common/speculative.cpp
// and the DFlash converters; facts, not code):
//
//   - Metadata: dflash.target_layers (required, int array): the target
//     blocks whose inputs are read, in concatenation order (llama.cpp
//     extracts each block's input, llama_get_embeddings_layer_inp).
//     dflash.block_size (default 16): the trained block, anchor included,
//     so a pass drafts at most block_size-1 tokens. dflash.sample_from_anchor
//     (bool) only changes DSpark drafts (slot 0 predicts); a DFlash block
//     always reads slots 1.. . dflash.attention.causal (bool, default false):
//     the block's attention is non-causal unless it says otherwise.
//     tokenizer.ggml.mask_token_id: the id every slot but the anchor holds.
//     The usual qwen3 keys (embedding_length, block_count, head counts,
//     key_length, feed_forward_length, rope.freq_base, rms epsilon). The
//     fused input's width is len(target_layers) x the draft's own
//     embedding_length, so the draft's width is the target's.
//   - Tensors: fc.weight [n_layers*n_embd -> n_embd] and enc.output_norm
//     (the encoder: g = RMSNorm(fc(concat of the target's block inputs)));
//     blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output, attn_q_norm,
//     attn_k_norm, ffn_norm, ffn_gate, ffn_up, ffn_down} (a qwen3 block:
//     per-head Q/K RMSNorm, NEOX RoPE); output_norm; optional token_embd
//     and output (else the target's are used); optional d2t (I64, draft row
//     -> target id, for a reduced draft vocabulary whose own output.weight
//     has that many rows; other target ids get -Inf).
//   - Context injection: for each position p the target has run, every
//     draft layer's KV cache at p holds K = RoPE_p(k_norm(wk g_p)) and
//     V = wv g_p: g goes straight into K and V, with no attn_norm.
//   - Drafting: with n_past positions injected and id_last the token at
//     n_past (sampled, not yet run by the target), one pass runs the block
//     [id_last, mask, ..., mask] at positions n_past..n_past+k through the
//     layers (attn_norm, Q/K/V, Q/K norms, RoPE at the true positions,
//     attention over the cache and the whole block, wo, residual; ffn_norm,
//     SwiGLU, residual), output_norm and the head; slot i (1..k) is the
//     proposal for position n_past+i. llama.cpp takes each slot's top
//     token (top-k 10 sampler) and stops at the first below p_min.
//   - After verification the block's own K/V are dropped: the target's
//     states of the accepted positions are injected in their place.
//   - Not DFlash v1, refused here: DSpark (markov_w1/markov_w2,
//     conf_proj tensors), DeepSeek-V4 DSpark backbones
//     (dflash.hyper_connection.count), DFlash2 (selector_* tensors and
//     per-layer convolutions), attention sinks and sliding-window layers.

const (
	archDFlash = "dflash"
	// maxBlockSize bounds dflash.block_size from a file: released drafts
	// use 8 to 16; a pass drafts the block at once, so its rows are a
	// batch of the draft.
	maxBlockSize = 256
	// defaultBlockSize is llama.cpp's when the key is missing.
	defaultBlockSize = 16
)

// DFlashParams are the hyper-parameters of a DFlash draft.
type DFlashParams struct {
	// Params describe the draft's decoder layers (qwen3-style). Vocab is
	// the draft vocabulary: the rows of its head, fewer than the target's
	// when D2T maps them.
	Params
	// TargetLayers are the target blocks whose inputs are fused, in order.
	TargetLayers []int
	// BlockSize is the trained block, anchor included.
	BlockSize int
	// MaskToken fills the block's slots after the anchor.
	MaskToken int32
	// Causal makes the block's own attention causal (off for DFlash).
	Causal bool
	// SampleFromAnchor is recorded as the file says; it matters only to
	// DSpark drafts, which are refused.
	SampleFromAnchor bool
}

// FusedWidth is the width of the concatenated target states fc reads.
func (p DFlashParams) FusedWidth() int { return len(p.TargetLayers) * p.Embd }

// MaxDraft is the most tokens one pass proposes.
func (p DFlashParams) MaxDraft() int { return p.BlockSize - 1 }

// ReadDFlashParams reads and checks a DFlash draft's hyper-parameters
// without touching its weights.
func ReadDFlashParams(f *gguf.File) (DFlashParams, error) {
	var d DFlashParams
	if a := f.Arch(); a != archDFlash {
		return d, fmt.Errorf("model: architecture %q is not a DFlash draft: %w", a, ErrUnsupported)
	}
	if err := refuseVariants(f); err != nil {
		return d, err
	}
	p := &d.Params
	p.Arch, p.arch = archDFlash, arch{neox: true, qkNorm: true}
	key := func(k string) string { return archDFlash + "." + k }
	if err := readDraftBlocks(f, p, 1e-6); err != nil {
		return d, err
	}

	layers, ok := f.Int32s(key("target_layers"))
	if !ok || len(layers) == 0 {
		return d, fmt.Errorf("model: the DFlash draft names no target blocks to read (%s): %w", key("target_layers"), ErrMissing)
	}
	if len(layers) > maxLayers {
		return d, fmt.Errorf("model: %s lists %d blocks: %w", key("target_layers"), len(layers), ErrBadParam)
	}
	for _, l := range layers {
		if l < 0 {
			return d, fmt.Errorf("model: %s %v: %w", key("target_layers"), layers, ErrBadParam)
		}
		d.TargetLayers = append(d.TargetLayers, int(l))
	}
	d.BlockSize = defaultBlockSize
	if v, ok := f.Uint("dflash.block_size"); ok {
		if v < 2 || v > maxBlockSize {
			return d, fmt.Errorf("model: the DFlash block size is %d (want 2 to %d: the anchor and at least one drafted token): %w", v, maxBlockSize, ErrBadParam)
		}
		d.BlockSize = int(v)
	}
	d.Causal, _ = f.Bool("dflash.attention.causal")
	d.SampleFromAnchor, _ = f.Bool("dflash.sample_from_anchor")
	mask, ok := f.Uint("tokenizer.ggml.mask_token_id")
	if !ok {
		return d, fmt.Errorf("model: the DFlash draft has no mask token (tokenizer.ggml.mask_token_id): %w", ErrMissing)
	}
	if mask > maxVocab {
		return d, fmt.Errorf("model: the DFlash mask token %d: %w", mask, ErrBadParam)
	}
	d.MaskToken = int32(mask)

	if t, ok := f.Tensor(nameD2T); ok && len(t.Dims) >= 1 {
		p.Vocab = int(t.Dims[0])
	} else if t, ok := f.Tensor("output.weight"); ok && len(t.Dims) == 2 {
		p.Vocab = int(t.Dims[1])
	} else if tokens, ok := f.Get("tokenizer.ggml.tokens"); ok {
		if a, ok := tokens.(gguf.Array); ok {
			p.Vocab = a.Len() // the borrowed head's, which the target checks
		}
	}

	switch {
	case p.Vocab <= 0:
		return d, fmt.Errorf("model: the DFlash draft has no head and no vocabulary (tokenizer.ggml.tokens): %w", ErrMissing)
	case p.Heads%p.KVHeads != 0:
		return d, fmt.Errorf("model: %d heads over %d KV heads: %w", p.Heads, p.KVHeads, ErrBadParam)
	case p.RopeDims%2 != 0 || p.RopeDims > p.HeadDim:
		return d, fmt.Errorf("model: %d rotated dims of %d-wide heads: %w", p.RopeDims, p.HeadDim, ErrBadParam)
	case p.NormEps < 0 || p.RopeBase <= 0:
		return d, fmt.Errorf("model: eps %g, rope base %g: %w", p.NormEps, p.RopeBase, ErrBadParam)
	}
	return d, p.check(f)
}

// refuseVariants names what a DFlash-architecture file carries beyond a
// plain DFlash draft, which this package does not run.
func refuseVariants(f *gguf.File) error {
	if n, ok := f.ArchUint("hyper_connection.count"); ok && n > 0 {
		return fmt.Errorf("model: a DeepSeek-V4 DSpark draft (dflash.hyper_connection.count = %d): its hyper-connections, MLA attention and MoE stages are %w; only Qwen3-style DFlash drafts run", n, ErrUnsupported)
	}
	for _, v := range []struct{ tensor, what string }{
		{"markov_w1.weight", "a DSpark draft (markov_w1.weight): its Markov head and confidence head are"},
		{"selector_hidden.weight", "a DFlash2 draft (selector_hidden.weight): its candidate selector and block convolutions are"},
		{"fc.scale", "a DFlash draft with a scaled fc (fc.scale):"},
		{"blk.0.attn_sinks.weight", "a DFlash draft with attention sinks (blk.0.attn_sinks.weight):"},
	} {
		if _, ok := f.Tensor(v.tensor); ok {
			return fmt.Errorf("model: %s %w", v.what, ErrUnsupported)
		}
	}
	if n, ok := f.ArchUint("attention.sliding_window"); ok && n > 0 {
		return fmt.Errorf("model: a DFlash draft with sliding-window attention (window %d): %w", n, ErrUnsupported)
	}
	return nil
}

// checkTarget reports what target lacks for the draft: its width and the
// blocks it reads.
func (p DFlashParams) checkTarget(target Params) error {
	if p.Embd != target.Embd {
		return fmt.Errorf("model: the DFlash draft is %d wide and fuses hidden states of that width; the target's are %d: %w", p.Embd, target.Embd, ErrBadParam)
	}
	for _, l := range p.TargetLayers {
		if l >= target.Layers {
			return fmt.Errorf("model: the DFlash draft reads target block %d; the target has blocks 0 to %d: %w", l, target.Layers-1, ErrBadParam)
		}
	}
	if int(p.MaskToken) >= target.Vocab {
		return fmt.Errorf("model: the DFlash mask token %d is outside the target's vocabulary of %d: %w", p.MaskToken, target.Vocab, ErrBadParam)
	}
	return nil
}

// readDFlashFor reads the draft's header and d2t map and checks them
// against a target of params tp.
func readDFlashFor(f *gguf.File, tp Params) (DFlashParams, []int32, error) {
	d, err := ReadDFlashParams(f)
	if err != nil {
		return d, nil, err
	}
	if err := d.checkTarget(tp); err != nil {
		return d, nil, err
	}
	d2t, err := readD2T(f, tp.Vocab)
	if err != nil {
		return d, nil, err
	}
	if _, own := f.Tensor("output.weight"); !own {
		d.Vocab = tp.Vocab // the borrowed head's rows
	}
	if d2t == nil && d.Vocab != tp.Vocab {
		return d, nil, fmt.Errorf("model: the DFlash draft's head has %d rows, the target's vocabulary %d, and no %s map: %w", d.Vocab, tp.Vocab, nameD2T, ErrShape)
	}
	if d2t != nil {
		if _, own := f.Tensor("output.weight"); !own {
			return d, nil, fmt.Errorf("model: the DFlash draft maps its vocabulary to the target's (%s) but has no head of its own: %w", nameD2T, ErrMissing)
		}
	}
	return d, d2t, nil
}
