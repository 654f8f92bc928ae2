package main

import (
	"fmt"
	"math"
	"strings"

	"github.com/tandem-run/tandem/engine/gguf"
)

// outTensor is one GGUF tensor before its type is chosen: values in GGUF
// order (dims[0] is the row length, as ggml counts).
type outTensor struct {
	name   string
	dims   []int64
	data   []float32
	vector bool // norms and the router: llama.cpp keeps them F32
	layer  int  // block index, -1 for the rest
}

// source hands out the tensors of a checkpoint and remembers which were
// taken, so that a tensor the mapping does not know is an error rather
// than silently dropped.
type source struct {
	st    *safetensors
	taken map[string]bool
}

func (s *source) has(name string) bool { _, ok := s.st.tensors[name]; return ok }

// take reads name, which must have shape want (the Hub's [out, in] order).
func (s *source) take(name string, want ...int64) ([]float32, error) {
	data, shape, err := s.st.float32s(name)
	if err != nil {
		return nil, err
	}
	if !equalShape(shape, want) {
		return nil, fmt.Errorf("convert: %s: shape %v, the config implies %v", name, shape, want)
	}
	s.taken[name] = true
	return data, nil
}

func (s *source) leftovers() []string {
	var out []string
	for _, n := range s.st.names() {
		if !s.taken[n] {
			out = append(out, n)
		}
	}
	return out
}

func equalShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// matrix is a Hub [out, in] weight as a GGUF tensor {in, out}.
func (s *source) matrix(from, to string, layer int, out, in int64) (outTensor, error) {
	d, err := s.take(from, out, in)
	return outTensor{name: to, dims: []int64{in, out}, data: d, layer: layer}, err
}

// vector is a norm weight; shift is added to every value (Gemma stores
// w and applies 1 + w; llama.cpp's files hold 1 + w).
func (s *source) vector(from, to string, layer int, n int64, shift float32) (outTensor, error) {
	d, err := s.take(from, n)
	for i := range d {
		d[i] += shift
	}
	return outTensor{name: to, dims: []int64{n}, data: d, vector: true, layer: layer}, err
}

// converted is a checkpoint mapped to llama.cpp's names and keys.
type converted struct {
	arch    string
	kv      []gguf.KV
	tensors []outTensor
	tied    bool // no output.weight: the embedding is the head
}

// headDim is the config's head_dim, or hidden/heads where it has none.
func headDim(c *hfConfig) int {
	if c.HeadDim > 0 {
		return c.HeadDim
	}
	return c.HiddenSize / c.Heads
}

// commonKV are the keys both families share, under arch.
func commonKV(arch string, c *hfConfig, ff int, theta float64) []gguf.KV {
	k := func(s string) string { return arch + "." + s }
	hd := uint32(headDim(c))
	return []gguf.KV{
		{Key: k("context_length"), Value: uint32(c.MaxPositions)},
		{Key: k("embedding_length"), Value: uint32(c.HiddenSize)},
		{Key: k("block_count"), Value: uint32(c.Layers)},
		{Key: k("feed_forward_length"), Value: uint32(ff)},
		{Key: k("attention.head_count"), Value: uint32(c.Heads)},
		{Key: k("attention.head_count_kv"), Value: uint32(c.KVHeads)},
		{Key: k("attention.key_length"), Value: hd},
		{Key: k("attention.value_length"), Value: hd},
		{Key: k("rope.dimension_count"), Value: hd},
		{Key: k("rope.freq_base"), Value: float32(theta)},
		{Key: k("attention.layer_norm_rms_epsilon"), Value: float32(c.RMSNormEps)},
	}
}

// attention maps block l's projections (and per-head norms, shifted by
// normShift) from the Hub's names to llama.cpp's.
func attention(s *source, c *hfConfig, l int, normShift float32) ([]outTensor, error) {
	if c.AttentionBias {
		return nil, fmt.Errorf("convert: attention biases: neither family has them")
	}
	h, hd := int64(c.HiddenSize), int64(headDim(c))
	q, kv := int64(c.Heads)*hd, int64(c.KVHeads)*hd
	p := fmt.Sprintf("model.layers.%d.self_attn.", l)
	b := fmt.Sprintf("blk.%d.", l)
	var out []outTensor
	for _, m := range []struct {
		from, to string
		rows     int64
		cols     int64
	}{
		{"q_proj", "attn_q", q, h}, {"k_proj", "attn_k", kv, h}, {"v_proj", "attn_v", kv, h}, {"o_proj", "attn_output", h, q},
	} {
		t, err := s.matrix(p+m.from+".weight", b+m.to+".weight", l, m.rows, m.cols)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	for _, n := range []struct{ from, to string }{{"q_norm", "attn_q_norm"}, {"k_norm", "attn_k_norm"}} {
		t, err := s.vector(p+n.from+".weight", b+n.to+".weight", l, hd, normShift)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// embeddings maps the token embedding, final norm and head (absent when
// tied).
func embeddings(s *source, c *hfConfig, normShift float32) ([]outTensor, bool, error) {
	v, h := int64(c.VocabSize), int64(c.HiddenSize)
	e, err := s.matrix("model.embed_tokens.weight", "token_embd.weight", -1, v, h)
	if err != nil {
		return nil, false, err
	}
	n, err := s.vector("model.norm.weight", "output_norm.weight", -1, h, normShift)
	if err != nil {
		return nil, false, err
	}
	out := []outTensor{e, n}
	tied := c.TieEmbeddings == nil || *c.TieEmbeddings
	if s.has("lm_head.weight") {
		o, err := s.matrix("lm_head.weight", "output.weight", -1, v, h)
		if err != nil {
			return nil, false, err
		}
		if tied && equalData(o.data, e.data) {
			return out, true, nil // a tied head saved twice
		}
		return append(out, o), false, nil
	}
	if !tied {
		return nil, false, fmt.Errorf("convert: tie_word_embeddings is false and there is no lm_head.weight")
	}
	return out, true, nil
}

func equalData(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// convertQwen3MoE maps a Qwen3MoeForCausalLM checkpoint to llama.cpp's
// qwen3moe: per-expert matrices (or transformers 5's fused gate_up_proj
// and down_proj) stacked into 3-D ffn_{gate,up,down}_exps, the router as
// ffn_gate_inp.
func convertQwen3MoE(s *source, c *hfConfig) (*converted, error) {
	switch {
	case c.Experts <= 0 || c.ExpertsUsed <= 0 || c.ExpertsUsed > c.Experts:
		return nil, fmt.Errorf("convert: %d experts, %d used", c.Experts, c.ExpertsUsed)
	case c.MoEIntermediate <= 0:
		return nil, fmt.Errorf("convert: moe_intermediate_size %d", c.MoEIntermediate)
	case !c.NormTopKProb:
		// llama.cpp's qwen3moe always renormalises the chosen experts'
		// weights; a file from this model would run differently there.
		return nil, fmt.Errorf("convert: norm_topk_prob false: llama.cpp's qwen3moe renormalises the top-k weights")
	case len(c.MLPOnlyLayers) > 0 || c.DecoderSparseStep > 1:
		return nil, fmt.Errorf("convert: dense layers among the sparse ones (mlp_only_layers %v, decoder_sparse_step %d): llama.cpp's qwen3moe has none",
			c.MLPOnlyLayers, c.DecoderSparseStep)
	case c.SharedExpert > 0:
		return nil, fmt.Errorf("convert: a shared expert: llama.cpp's qwen3moe has none")
	case c.HiddenAct != "" && c.HiddenAct != "silu":
		return nil, fmt.Errorf("convert: hidden_act %q, want silu", c.HiddenAct)
	}
	theta, err := c.ropeTheta("", 1e6)
	if err != nil {
		return nil, err
	}
	const arch = "qwen3moe"
	out := &converted{arch: arch}
	out.kv = append(commonKV(arch, c, c.IntermediateSize, theta),
		gguf.KV{Key: arch + ".expert_count", Value: uint32(c.Experts)},
		gguf.KV{Key: arch + ".expert_used_count", Value: uint32(c.ExpertsUsed)},
		gguf.KV{Key: arch + ".expert_feed_forward_length", Value: uint32(c.MoEIntermediate)},
	)
	ts, tied, err := embeddings(s, c, 0)
	if err != nil {
		return nil, err
	}
	out.tied = tied
	out.tensors = ts
	h, e, ff := int64(c.HiddenSize), int64(c.Experts), int64(c.MoEIntermediate)
	for l := range c.Layers {
		p, b := fmt.Sprintf("model.layers.%d.", l), fmt.Sprintf("blk.%d.", l)
		an, err := s.vector(p+"input_layernorm.weight", b+"attn_norm.weight", l, h, 0)
		if err != nil {
			return nil, err
		}
		att, err := attention(s, c, l, 0)
		if err != nil {
			return nil, err
		}
		fn, err := s.vector(p+"post_attention_layernorm.weight", b+"ffn_norm.weight", l, h, 0)
		if err != nil {
			return nil, err
		}
		router, err := s.matrix(p+"mlp.gate.weight", b+"ffn_gate_inp.weight", l, e, h)
		if err != nil {
			return nil, err
		}
		router.vector = true
		gate, up, down, err := experts(s, p+"mlp.experts.", l, e, ff, h)
		if err != nil {
			return nil, err
		}
		out.tensors = append(out.tensors, an)
		out.tensors = append(out.tensors, att...)
		out.tensors = append(out.tensors, fn, router,
			outTensor{name: b + "ffn_gate_exps.weight", dims: []int64{h, ff, e}, data: gate, layer: l},
			outTensor{name: b + "ffn_up_exps.weight", dims: []int64{h, ff, e}, data: up, layer: l},
			outTensor{name: b + "ffn_down_exps.weight", dims: []int64{ff, h, e}, data: down, layer: l},
		)
	}
	return out, nil
}

// experts stacks a block's expert matrices: gate and up [e][ff][h], down
// [e][h][ff], from one matrix per expert or from the fused 3-D layout.
func experts(s *source, p string, l int, e, ff, h int64) (gate, up, down []float32, err error) {
	if s.has(p + "gate_up_proj") {
		gu, err := s.take(p+"gate_up_proj", e, 2*ff, h)
		if err != nil {
			return nil, nil, nil, err
		}
		down, err = s.take(p+"down_proj", e, h, ff)
		if err != nil {
			return nil, nil, nil, err
		}
		// Each expert's first ff rows are the gate, as transformers
		// chunks the product.
		for x := range e {
			rows := gu[x*2*ff*h : (x+1)*2*ff*h]
			gate = append(gate, rows[:ff*h]...)
			up = append(up, rows[ff*h:]...)
		}
		return gate, up, down, nil
	}
	for x := range e {
		q := fmt.Sprintf("%s%d.", p, x)
		g, err := s.take(q+"gate_proj.weight", ff, h)
		if err != nil {
			return nil, nil, nil, err
		}
		u, err := s.take(q+"up_proj.weight", ff, h)
		if err != nil {
			return nil, nil, nil, err
		}
		d, err := s.take(q+"down_proj.weight", h, ff)
		if err != nil {
			return nil, nil, nil, err
		}
		gate, up, down = append(gate, g...), append(up, u...), append(down, d...)
	}
	return gate, up, down, nil
}

// gemmaSWAPeriod is llama.cpp's gemma3 layer pattern: every sixth block
// attends globally, the rest through the sliding window. The files carry
// no per-layer pattern, so a model with another one cannot be converted.
const gemmaSWAPeriod = 6

// gemmaLocalTheta is the RoPE base llama.cpp gives gemma3's sliding
// layers; it is not read from the file either.
const gemmaLocalTheta = 10000

// convertGemma3 maps a Gemma3ForCausalLM (text) checkpoint to llama.cpp's
// gemma3, adding 1 to every norm weight as llama.cpp's converter does.
func convertGemma3(s *source, c *hfConfig) (*converted, error) {
	act := c.HiddenActivation
	if act == "" {
		act = c.HiddenAct
	}
	if act != "gelu_pytorch_tanh" {
		return nil, fmt.Errorf("convert: hidden_activation %q, want gelu_pytorch_tanh", act)
	}
	if c.SlidingWindow <= 0 {
		return nil, fmt.Errorf("convert: sliding_window %d", c.SlidingWindow)
	}
	if c.FinalSoftcap != nil || c.AttnSoftcap != nil {
		return nil, fmt.Errorf("convert: logit soft-capping: llama.cpp's gemma3 applies none")
	}
	types := c.LayerTypes
	for l := range c.Layers {
		want := "sliding_attention"
		if (l+1)%gemmaSWAPeriod == 0 {
			want = "full_attention"
		}
		if types != nil && (len(types) != c.Layers || types[l] != want) {
			return nil, fmt.Errorf("convert: layer_types %v: llama.cpp's gemma3 makes every %dth layer global and the rest sliding", types, gemmaSWAPeriod)
		}
	}
	hd := headDim(c)
	// llama.cpp scales queries by head_dim^-0.5, or (n_embd/n_head)^-0.5
	// for the 62-layer 27B: query_pre_attn_scalar must be that.
	wantScalar := float64(hd)
	if c.Layers == 62 {
		wantScalar = float64(c.HiddenSize / c.Heads)
	}
	if c.QueryPreAttnScalar != 0 && c.QueryPreAttnScalar != wantScalar {
		return nil, fmt.Errorf("convert: query_pre_attn_scalar %g: llama.cpp's gemma3 scales by %g^-0.5", c.QueryPreAttnScalar, wantScalar)
	}
	global, err := c.ropeTheta(kindIf(c, "full_attention"), 1e6)
	if err != nil {
		return nil, err
	}
	local, err := c.ropeTheta(kindIf(c, "sliding_attention"), gemmaLocalTheta)
	if err != nil {
		return nil, err
	}
	if local != gemmaLocalTheta {
		return nil, fmt.Errorf("convert: sliding layers' rope theta %g: llama.cpp's gemma3 uses %d", local, gemmaLocalTheta)
	}
	const arch = "gemma3"
	out := &converted{arch: arch}
	out.kv = append(commonKV(arch, c, c.IntermediateSize, global),
		gguf.KV{Key: arch + ".attention.sliding_window", Value: uint32(c.SlidingWindow)})
	ts, tied, err := embeddings(s, c, 1)
	if err != nil {
		return nil, err
	}
	out.tied, out.tensors = tied, ts
	h, ff := int64(c.HiddenSize), int64(c.IntermediateSize)
	for l := range c.Layers {
		p, b := fmt.Sprintf("model.layers.%d.", l), fmt.Sprintf("blk.%d.", l)
		var block []outTensor
		for _, n := range []struct{ from, to string }{
			{"input_layernorm", "attn_norm"}, {"post_attention_layernorm", "post_attention_norm"},
			{"pre_feedforward_layernorm", "ffn_norm"}, {"post_feedforward_layernorm", "post_ffw_norm"},
		} {
			t, err := s.vector(p+n.from+".weight", b+n.to+".weight", l, h, 1)
			if err != nil {
				return nil, err
			}
			block = append(block, t)
		}
		att, err := attention(s, c, l, 1)
		if err != nil {
			return nil, err
		}
		block = append(block, att...)
		for _, m := range []struct {
			from, to   string
			rows, cols int64
		}{{"gate_proj", "ffn_gate", ff, h}, {"up_proj", "ffn_up", ff, h}, {"down_proj", "ffn_down", h, ff}} {
			t, err := s.matrix(p+"mlp."+m.from+".weight", b+m.to+".weight", l, m.rows, m.cols)
			if err != nil {
				return nil, err
			}
			block = append(block, t)
		}
		out.tensors = append(out.tensors, block...)
	}
	return out, nil
}

// kindIf is kind where the config keys RoPE by layer kind.
func kindIf(c *hfConfig, kind string) string {
	if _, ok := c.RopeParameters[kind]; ok {
		return kind
	}
	return ""
}

// convert maps a checkpoint by its model_type.
func convert(st *safetensors, c *hfConfig) (*converted, error) {
	s := &source{st: st, taken: map[string]bool{}}
	var out *converted
	var err error
	switch c.ModelType {
	case "qwen3_moe":
		out, err = convertQwen3MoE(s, c)
	case "gemma3_text":
		out, err = convertGemma3(s, c)
	default:
		return nil, fmt.Errorf("convert: model_type %q (qwen3_moe and gemma3_text are converted)", c.ModelType)
	}
	if err != nil {
		return nil, err
	}
	if left := s.leftovers(); len(left) > 0 {
		return nil, fmt.Errorf("convert: %d tensors not mapped, e.g. %s", len(left), strings.Join(left[:min(3, len(left))], ", "))
	}
	return out, nil
}
