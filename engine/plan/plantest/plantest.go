// Package plantest writes header-only GGUF models of real shapes (Qwen3-8B,
// a 100-block model, an EAGLE-3 draft) for planner tests and benchmarks:
// the tensor data is a sparse hole, so a 60 GB model costs a few kilobytes
// of disk and planning it shows that no weight is read.
package plantest

import (
	"fmt"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/kernels/quant"
)

// Model is the shape of a llama-family model (qwen3 tensor names, with
// per-head Q/K norms), or of an EAGLE-3 draft when Arch is "eagle3".
type Model struct {
	Arch            string
	Blocks          int
	Embd, FFN       int64
	Heads, KVHeads  int64
	HeadDim         int64
	Vocab           int64
	Tied            bool       // no output.weight
	Weights         quant.Type // block matrices
	Down            quant.Type // ffn_down (Q4_K_M files use a bigger type there)
	Embedding, Head quant.Type
	ContextLength   uint32
	TargetLayers    []int32 // eagle3: target blocks whose inputs it reads
	// qwen3moe: routed experts per block, used per token, one's FFN width;
	// the blocks have these instead of a dense FFN.
	Experts, ExpertsUsed int
	ExpertFFN            int64
}

// Qwen3_30B_A3B is the shape of Qwen3-30B-A3B (qwen3moe: 128 experts of
// width 768, 8 used per token) with weights of type w; for Q4_K the head
// is Q6_K, the rest Q4_K (llama.cpp's Q4_K_M gives half the down experts
// Q6_K; this shape does not).
func Qwen3_30B_A3B(w quant.Type) Model {
	m := Model{Arch: "qwen3moe", Blocks: 48, Embd: 2048, FFN: 6144, Heads: 32, KVHeads: 4, HeadDim: 128,
		Vocab: 151936, Weights: w, Down: w, Embedding: w, Head: w, ContextLength: 40960,
		Experts: 128, ExpertsUsed: 8, ExpertFFN: 768}
	if w == quant.Q4_K {
		m.Head = quant.Q6_K
	}
	return m
}

// Qwen3_8B is the shape of Qwen3-8B with weights of type w (Q4_K_M-like:
// Q6_K for ffn_down and the head when w is Q4_K).
func Qwen3_8B(w quant.Type) Model {
	m := Model{Arch: "qwen3", Blocks: 36, Embd: 4096, FFN: 12288, Heads: 32, KVHeads: 8, HeadDim: 128,
		Vocab: 151936, Weights: w, Down: w, Embedding: w, Head: w, ContextLength: 40960}
	if w == quant.Q4_K {
		m.Down, m.Head = quant.Q6_K, quant.Q6_K
	}
	return m
}

// Blocks100 is a 100-block model (about 60 GB at Q4_K): the planner's speed case.
func Blocks100() Model {
	return Model{Arch: "qwen3", Blocks: 100, Embd: 8192, FFN: 28672, Heads: 64, KVHeads: 8, HeadDim: 128,
		Vocab: 128256, Weights: quant.Q4_K, Down: quant.Q6_K, Embedding: quant.Q4_K, Head: quant.Q6_K, ContextLength: 131072}
}

// Llama1B is a small tied draft for the 8B shapes (Llama-3.2-1B-like).
func Llama1B(w quant.Type) Model {
	return Model{Arch: "llama", Blocks: 16, Embd: 2048, FFN: 8192, Heads: 32, KVHeads: 8, HeadDim: 64,
		Vocab: 151936, Tied: true, Weights: w, Down: w, Embedding: w, Head: w, ContextLength: 131072}
}

// Eagle3 is an EAGLE-3 draft for target t: one decoder block reading three
// of t's blocks, with no token embedding or head of its own.
func Eagle3(t Model) Model {
	return Model{Arch: "eagle3", Blocks: 1, Embd: t.Embd, FFN: t.FFN, Heads: t.Heads, KVHeads: t.KVHeads, HeadDim: t.HeadDim,
		Weights: quant.F16, Down: quant.F16, ContextLength: t.ContextLength,
		TargetLayers: []int32{2, int32(t.Blocks / 2), int32(t.Blocks - 3)}}
}

// WriteFile writes the model's header at path; the weights are a hole.
func (m Model) WriteFile(path string) error {
	var w gguf.Writer
	a := m.Arch
	w.AddKV("general.architecture", a)
	w.AddKV("general.name", fmt.Sprintf("plantest-%s-%d", a, m.Blocks))
	w.AddKV(a+".block_count", uint32(m.Blocks))
	w.AddKV(a+".context_length", m.ContextLength)
	w.AddKV(a+".embedding_length", uint32(m.Embd))
	w.AddKV(a+".feed_forward_length", uint32(m.FFN))
	w.AddKV(a+".attention.head_count", uint32(m.Heads))
	w.AddKV(a+".attention.head_count_kv", uint32(m.KVHeads))
	w.AddKV(a+".attention.key_length", uint32(m.HeadDim))
	w.AddKV(a+".attention.value_length", uint32(m.HeadDim))
	if m.Experts > 0 {
		w.AddKV(a+".expert_count", uint32(m.Experts))
		w.AddKV(a+".expert_used_count", uint32(m.ExpertsUsed))
		w.AddKV(a+".expert_feed_forward_length", uint32(m.ExpertFFN))
	}
	q, kv := m.Heads*m.HeadDim, m.KVHeads*m.HeadDim
	var errs []error
	add := func(name string, t quant.Type, dims ...int64) {
		errs = append(errs, w.AddTensor(name, t, dims, nil))
	}
	in := m.Embd
	if a == "eagle3" {
		w.AddKV(a+".target_layers", m.TargetLayers)
		w.AddKV(a+".target_hidden_size", uint32(m.Embd))
		add("fc.weight", m.Weights, int64(len(m.TargetLayers))*m.Embd, m.Embd)
		in = 2 * m.Embd // attention reads [embedding; fused target states]
	} else {
		add("token_embd.weight", m.Embedding, m.Embd, m.Vocab)
		if !m.Tied {
			add("output.weight", m.Head, m.Embd, m.Vocab)
		}
	}
	add("output_norm.weight", quant.F32, m.Embd)
	for b := range m.Blocks {
		p := fmt.Sprintf("blk.%d.", b)
		add(p+"attn_norm.weight", quant.F32, m.Embd)
		if a == "eagle3" {
			add(p+"attn_norm_2.weight", quant.F32, m.Embd)
		}
		add(p+"attn_q.weight", m.Weights, in, q)
		add(p+"attn_k.weight", m.Weights, in, kv)
		add(p+"attn_v.weight", m.Weights, in, kv)
		add(p+"attn_output.weight", m.Weights, q, m.Embd)
		if a == "qwen3" || a == "qwen3moe" {
			add(p+"attn_q_norm.weight", quant.F32, m.HeadDim)
			add(p+"attn_k_norm.weight", quant.F32, m.HeadDim)
		}
		add(p+"ffn_norm.weight", quant.F32, m.Embd)
		if m.Experts > 0 {
			e := int64(m.Experts)
			add(p+"ffn_gate_inp.weight", quant.F32, m.Embd, e)
			add(p+"ffn_gate_exps.weight", m.Weights, m.Embd, m.ExpertFFN, e)
			add(p+"ffn_up_exps.weight", m.Weights, m.Embd, m.ExpertFFN, e)
			add(p+"ffn_down_exps.weight", m.Down, m.ExpertFFN, m.Embd, e)
			continue
		}
		add(p+"ffn_gate.weight", m.Weights, m.Embd, m.FFN)
		add(p+"ffn_up.weight", m.Weights, m.Embd, m.FFN)
		add(p+"ffn_down.weight", m.Down, m.FFN, m.Embd)
	}
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("plantest: %w", err)
		}
	}
	if err := w.WriteFile(path); err != nil {
		return fmt.Errorf("plantest: %w", err)
	}
	return nil
}
