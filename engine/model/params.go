package model

import (
	"fmt"
	"math"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/plan"
)

// Params are a model's hyper-parameters, read from its GGUF metadata.
type Params struct {
	Arch     string
	Vocab    int     // token ids are [0, Vocab)
	Embd     int     // width of the residual stream
	Layers   int     // decoder blocks
	Heads    int     // query heads
	KVHeads  int     // key/value heads (GQA when < Heads)
	HeadDim  int     // elements per head
	FF       int     // feed-forward width
	TrainCtx int     // context length the model was trained for
	NormEps  float32 // RMSNorm epsilon

	RopeBase  float32 // theta
	RopeScale float32 // position multiplier (1 / linear scaling factor)
	RopeDims  int     // rotated elements per head

	// Sliding-window attention (gemma3): the window, and the RoPE base of
	// the windowed blocks; zero where every block attends globally.
	SlidingWindow int
	RopeBaseLocal float32

	// Mixture-of-experts blocks (qwen3moe); zero for dense models.
	Experts     int // experts per block
	ExpertsUsed int // experts each token is routed to
	ExpertFF    int // feed-forward width of one expert

	arch arch
}

// arch is what tells the llama-family decoders apart. They share one forward
// pass (forward.go); each difference is a switch here, named for the paper
// feature rather than the model.
type arch struct {
	neox   bool // RoPE pairs (j, j+d/2) rather than (2j, 2j+1)
	qkNorm bool // RMSNorm on each query and key head before RoPE (qwen3)
	bias   bool // optional Q/K/V biases are loaded (qwen2)
	moe    bool // every block's FFN is routed experts, their weights renormalised (qwen3moe)

	// Gemma 3's traits.
	embedScale bool // token embeddings are multiplied by sqrt(n_embd)
	postNorms  bool // RMSNorm on the attention and FFN outputs before the residual adds
	geglu      bool // GELU-tanh gating in the FFN rather than SiLU
	swaPeriod  int  // > 0: every swaPeriod-th block attends globally, the rest through the window
}

// archFor maps general.architecture to its traits.
func archFor(name string) (arch, bool) {
	switch name {
	case "llama":
		// llama GGUFs store Q and K rows permuted so that interleaved pairs
		// reproduce the half-split rotation of the original weights.
		return arch{}, true
	case "qwen2":
		return arch{neox: true, bias: true}, true
	case "qwen3":
		return arch{neox: true, qkNorm: true}, true
	case "gemma3":
		// llama.cpp's gemma3: its files carry no layer pattern or local
		// RoPE base; every sixth block is global, the others use base 1e4.
		// The GGUF norms already hold Gemma's 1 + w.
		return arch{neox: true, qkNorm: true, embedScale: true, postNorms: true, geglu: true, swaPeriod: 6}, true
	case "qwen3moe":
		// llama.cpp's qwen3moe always renormalises the chosen experts'
		// weights (Qwen3 MoE's norm_topk_prob) and has no shared expert.
		return arch{neox: true, qkNorm: true, moe: true}, true
	}
	return arch{}, false
}

// Architectures lists the general.architecture values Load accepts.
func Architectures() []string { return []string{"llama", "qwen2", "qwen3", "qwen3moe", "gemma3"} }

// gemma3LocalBase is the RoPE base llama.cpp gives gemma3's sliding blocks.
const gemma3LocalBase = 10000

// windowed reports whether block l attends through the sliding window.
func (p Params) windowed(l int) bool {
	return p.arch.swaPeriod > 0 && (l+1)%p.arch.swaPeriod != 0
}

// blockRope is block l's RoPE base and attention window (0: global).
func (p Params) blockRope(l int) (base float32, window int) {
	if p.windowed(l) {
		return p.RopeBaseLocal, p.SlidingWindow
	}
	return p.RopeBase, 0
}

// attnScale is the factor on query-key products: 1/sqrt(head_dim), except
// for the 62-block Gemma 3 27B, whose query_pre_attn_scalar is
// n_embd/n_head, as llama.cpp applies it (its files do not carry it).
func (p Params) attnScale() float32 {
	d := p.HeadDim
	if p.arch.embedScale && p.Layers == 62 {
		d = p.Embd / p.Heads
	}
	return float32(1 / math.Sqrt(float64(d)))
}

// needArchInt reads ARCH.key, which must be present and a positive count
// that fits an int32, into dst.
func needArchInt(f *gguf.File, key string, dst *int) error {
	v, ok := f.ArchUint(key)
	if !ok {
		return fmt.Errorf("model: %s.%s: %w", f.Arch(), key, ErrMissing)
	}
	if v == 0 || v > 1<<31 {
		return fmt.Errorf("model: %s.%s = %d: %w", f.Arch(), key, v, ErrBadParam)
	}
	*dst = int(v)
	return nil
}

// ReadParams reads and checks the hyper-parameters of f without touching
// its weights.
func ReadParams(f *gguf.File) (Params, error) {
	p := Params{Arch: f.Arch()}
	if p.Arch == archDFlash || p.Arch == archEagle3 {
		return p, fmt.Errorf("model: a %s file is a draft: it reads a target's hidden states and has no decoder of its own to generate with; load it as the draft beside its target: %w", p.Arch, ErrUnsupported)
	}
	a, ok := archFor(p.Arch)
	if !ok {
		return p, fmt.Errorf("model: architecture %q: %w (supported: %v)", p.Arch, ErrUnsupported, Architectures())
	}
	p.arch = a

	need := func(key string, dst *int) error { return needArchInt(f, key, dst) }
	for _, kv := range []struct {
		key string
		dst *int
	}{
		{"embedding_length", &p.Embd},
		{"block_count", &p.Layers},
		{"attention.head_count", &p.Heads},
		{"feed_forward_length", &p.FF},
		{"context_length", &p.TrainCtx},
	} {
		if err := need(kv.key, kv.dst); err != nil {
			return p, err
		}
	}
	p.KVHeads = p.Heads
	if _, ok := f.ArchUint("attention.head_count_kv"); ok {
		if err := need("attention.head_count_kv", &p.KVHeads); err != nil {
			return p, err
		}
	}
	p.HeadDim = p.Embd / p.Heads
	if _, ok := f.ArchUint("attention.key_length"); ok {
		if err := need("attention.key_length", &p.HeadDim); err != nil {
			return p, err
		}
	}
	if v, ok := f.ArchUint("attention.value_length"); ok && int(v) != p.HeadDim {
		return p, fmt.Errorf("model: value heads of %d with key heads of %d: %w", v, p.HeadDim, ErrUnsupported)
	}
	p.RopeDims = p.HeadDim
	if _, ok := f.ArchUint("rope.dimension_count"); ok {
		if err := need("rope.dimension_count", &p.RopeDims); err != nil {
			return p, err
		}
	}

	if a.moe {
		if err := need("expert_count", &p.Experts); err != nil {
			return p, err
		}
		if err := need("expert_used_count", &p.ExpertsUsed); err != nil {
			return p, err
		}
		// llama.cpp's default where the file has no expert width.
		p.ExpertFF = p.FF / p.ExpertsUsed
		if _, ok := f.ArchUint("expert_feed_forward_length"); ok {
			if err := need("expert_feed_forward_length", &p.ExpertFF); err != nil {
				return p, err
			}
		}
	}

	if a.swaPeriod > 0 {
		if err := need("attention.sliding_window", &p.SlidingWindow); err != nil {
			return p, err
		}
		p.RopeBaseLocal = gemma3LocalBase
		if v, ok := f.ArchFloat("rope.freq_base_swa"); ok && v > 0 {
			p.RopeBaseLocal = float32(v)
		}
	}

	p.NormEps = 1e-5
	if v, ok := f.ArchFloat("attention.layer_norm_rms_epsilon"); ok {
		p.NormEps = float32(v)
	}
	p.RopeBase = 10000
	if v, ok := f.ArchFloat("rope.freq_base"); ok {
		p.RopeBase = float32(v)
	}
	p.RopeScale = 1
	if typ, ok := f.String(p.Arch + ".rope.scaling.type"); ok && typ != "none" {
		factor, _ := f.ArchFloat("rope.scaling.factor")
		if typ != "linear" || factor <= 0 {
			return p, fmt.Errorf("model: rope scaling %q (factor %g): %w", typ, factor, ErrUnsupported)
		}
		p.RopeScale = float32(1 / factor)
	}

	if tokens, ok := f.Get("tokenizer.ggml.tokens"); ok {
		if a, ok := tokens.(gguf.Array); ok {
			p.Vocab = a.Len()
		}
	}
	if p.Vocab == 0 {
		if v, ok := f.ArchUint("vocab_size"); ok {
			p.Vocab = int(v)
		}
	}
	if p.Vocab == 0 {
		if t, ok := f.Tensor("token_embd.weight"); ok && len(t.Dims) == 2 {
			p.Vocab = int(t.Dims[1])
		}
	}

	switch {
	case p.Vocab <= 0:
		return p, fmt.Errorf("model: vocabulary size: %w", ErrMissing)
	case p.Heads%p.KVHeads != 0:
		return p, fmt.Errorf("model: %d heads over %d KV heads: %w", p.Heads, p.KVHeads, ErrBadParam)
	case p.RopeDims%2 != 0 || p.RopeDims > p.HeadDim:
		return p, fmt.Errorf("model: %d rotated dims of %d-wide heads: %w", p.RopeDims, p.HeadDim, ErrBadParam)
	case p.NormEps < 0 || p.RopeBase <= 0:
		return p, fmt.Errorf("model: eps %g, rope base %g: %w", p.NormEps, p.RopeBase, ErrBadParam)
	}
	return p, p.check(f)
}

// archInt is a required integer key of the file's architecture and where
// it goes.
type archInt struct {
	key string
	dst *int
}

// readDraftBlocks reads the block shape a draft model (EAGLE-3, DFlash)
// shares with a llama-style target: widths, heads, trained context, norm
// epsilon (defaultEps when absent) and RoPE, with the extra required keys
// the draft kind adds.
func readDraftBlocks(f *gguf.File, p *Params, defaultEps float32, extra ...archInt) error {
	need := func(k string, dst *int) error { return needArchInt(f, k, dst) }
	optional := func(k string, dst *int, def int) error {
		*dst = def
		if _, ok := f.ArchUint(k); !ok {
			return nil
		}
		return need(k, dst)
	}
	for _, kv := range append([]archInt{
		{"embedding_length", &p.Embd},
		{"block_count", &p.Layers},
		{"attention.head_count", &p.Heads},
		{"feed_forward_length", &p.FF},
	}, extra...) {
		if err := need(kv.key, kv.dst); err != nil {
			return err
		}
	}
	if err := optional("context_length", &p.TrainCtx, plan.DefaultCtx); err != nil {
		return err
	}
	if err := optional("attention.head_count_kv", &p.KVHeads, p.Heads); err != nil {
		return err
	}
	if err := optional("attention.key_length", &p.HeadDim, p.Embd/p.Heads); err != nil {
		return err
	}
	if err := optional("rope.dimension_count", &p.RopeDims, p.HeadDim); err != nil {
		return err
	}
	if v, ok := f.ArchUint("attention.value_length"); ok && int(v) != p.HeadDim {
		return fmt.Errorf("model: value heads of %d with key heads of %d: %w", v, p.HeadDim, ErrUnsupported)
	}
	p.NormEps = defaultEps
	if v, ok := f.ArchFloat("attention.layer_norm_rms_epsilon"); ok {
		p.NormEps = float32(v)
	}
	p.RopeBase = 10000
	if v, ok := f.ArchFloat("rope.freq_base"); ok {
		p.RopeBase = float32(v)
	}
	p.RopeScale = 1
	if typ, ok := f.String(f.Arch() + ".rope.scaling.type"); ok && typ != "none" {
		factor, _ := f.ArchFloat("rope.scaling.factor")
		if typ != "linear" || factor <= 0 {
			return fmt.Errorf("model: rope scaling %q (factor %g): %w", typ, factor, ErrUnsupported)
		}
		p.RopeScale = float32(1 / factor)
	}
	return nil
}
