package model

import (
	"fmt"

	"github.com/tandem-run/tandem/engine/gguf"
)

// Eagle3Params are the hyper-parameters of an EAGLE-3 draft (llama.cpp's
// "eagle3" GGUF architecture), read from its metadata.
type Eagle3Params struct {
	// Params describe the draft's one decoder layer (llama-style: interleaved
	// RoPE on permuted Q/K rows). Vocab is the draft vocabulary: the rows of
	// its head, fewer than the target's when D2T maps them.
	Params
	// TargetLayers are the target blocks whose inputs are fused (fc) into
	// the draft's state, in the order they are concatenated.
	TargetLayers []int
	// TargetEmbd is the width of the target's hidden states.
	TargetEmbd int
	// NormBeforeResidual takes the normalised fused state rather than the
	// raw one as the attention's residual.
	NormBeforeResidual bool
	// NormBeforeFC normalises the concatenated target states (weight
	// enc.output_norm) before fc.
	NormBeforeFC bool
}

// FusedWidth is the width of the concatenated target states fc reads.
func (p Eagle3Params) FusedWidth() int { return len(p.TargetLayers) * p.TargetEmbd }

const archEagle3 = "eagle3"

// ReadEagle3Params reads and checks an EAGLE-3 draft's hyper-parameters
// without touching its weights.
func ReadEagle3Params(f *gguf.File) (Eagle3Params, error) {
	var e Eagle3Params
	if a := f.Arch(); a != archEagle3 {
		return e, fmt.Errorf("model: architecture %q is not an EAGLE-3 draft: %w", a, ErrUnsupported)
	}
	p := &e.Params
	p.Arch = archEagle3
	key := func(k string) string { return archEagle3 + "." + k }
	if err := readDraftBlocks(f, p, 1e-5, archInt{"target_hidden_size", &e.TargetEmbd}); err != nil {
		return e, err
	}

	layers, ok := f.Int32s(key("target_layers"))
	if !ok || len(layers) == 0 {
		return e, fmt.Errorf("model: %s: %w", key("target_layers"), ErrMissing)
	}
	for _, l := range layers {
		if l < 0 {
			return e, fmt.Errorf("model: %s %v: %w", key("target_layers"), layers, ErrBadParam)
		}
		e.TargetLayers = append(e.TargetLayers, int(l))
	}
	if v, ok := f.Bool(key("norm_before_residual")); ok {
		e.NormBeforeResidual = v
	}
	if v, ok := f.Bool(key("norm_before_fc")); ok {
		e.NormBeforeFC = v
	}

	// The draft vocabulary is the rows of its own head, or of the d2t map
	// that sends them to target ids; a borrowed head has the target's.
	if t, ok := f.Tensor(nameD2T); ok && len(t.Dims) >= 1 {
		p.Vocab = int(t.Dims[0])
	} else if t, ok := f.Tensor("output.weight"); ok && len(t.Dims) == 2 {
		p.Vocab = int(t.Dims[1])
	}

	switch {
	case p.Layers != 1:
		return e, fmt.Errorf("model: an EAGLE-3 draft of %d decoder layers (one expected): %w", p.Layers, ErrUnsupported)
	case p.Heads%p.KVHeads != 0:
		return e, fmt.Errorf("model: %d heads over %d KV heads: %w", p.Heads, p.KVHeads, ErrBadParam)
	case p.RopeDims%2 != 0 || p.RopeDims > p.HeadDim:
		return e, fmt.Errorf("model: %d rotated dims of %d-wide heads: %w", p.RopeDims, p.HeadDim, ErrBadParam)
	case p.NormEps < 0 || p.RopeBase <= 0:
		return e, fmt.Errorf("model: eps %g, rope base %g: %w", p.NormEps, p.RopeBase, ErrBadParam)
	}
	return e, p.check(f)
}

// checkTarget reports what target lacks for the draft: the hidden width
// and the blocks it reads. Block Layers names the final hidden state.
func (e Eagle3Params) checkTarget(target Params) error {
	if e.TargetEmbd != target.Embd {
		return fmt.Errorf("model: the EAGLE-3 draft reads hidden states of width %d, the target's are %d: %w", e.TargetEmbd, target.Embd, ErrBadParam)
	}
	for _, l := range e.TargetLayers {
		if l > target.Layers {
			return fmt.Errorf("model: the EAGLE-3 draft reads target block %d of %d: %w", l, target.Layers, ErrBadParam)
		}
	}
	return nil
}
