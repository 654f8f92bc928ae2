package main

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/kernels/quant"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

const testVocab = 8192 // the demo vocabulary, so its GGUF can donate the tokenizer

// checkpoint is a Hub checkpoint made in the test: tensors by name, Hub
// shapes, values exact in F16.
type checkpoint struct {
	config  map[string]any
	tensors map[string][]float32
	shapes  map[string][]int64
}

func newCheckpoint(config map[string]any) *checkpoint {
	return &checkpoint{config: config, tensors: map[string][]float32{}, shapes: map[string][]int64{}}
}

// add fills name with random F16-exact values: norms near their family's
// centre, matrices of unit-ish scale.
func (c *checkpoint) add(rng *rand.Rand, name string, centre float32, shape ...int64) {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	x := make([]float32, n)
	for i := range x {
		if len(shape) == 1 {
			x[i] = centre + float32(rng.IntN(257)-128)/1024
		} else {
			x[i] = f16(float32(rng.NormFloat64() * 0.1))
		}
	}
	c.tensors[name], c.shapes[name] = x, shape
}

func f16(v float32) float32 {
	var b [2]byte
	if err := quant.Quantize(quant.F16, []float32{v}, b[:]); err != nil {
		panic(err)
	}
	out := make([]float32, 1)
	if err := quant.Dequantize(quant.F16, b[:], out); err != nil {
		panic(err)
	}
	return out[0]
}

// write saves the checkpoint as config.json and an F16 model.safetensors.
func (c *checkpoint) write(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cfg, err := json.Marshal(c.config)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(c.tensors))
	for n := range c.tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	hdr := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var data []byte
	for _, n := range names {
		b := make([]byte, 2*len(c.tensors[n]))
		if err := quant.Quantize(quant.F16, c.tensors[n], b); err != nil {
			t.Fatal(err)
		}
		hdr[n] = map[string]any{"dtype": "F16", "shape": c.shapes[n], "data_offsets": []int{len(data), len(data) + len(b)}}
		data = append(data, b...)
	}
	h, err := json.Marshal(hdr)
	if err != nil {
		t.Fatal(err)
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	out = append(append(out, h...), data...)
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), out, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

const (
	tH, tHeads, tKV, tHD = 64, 4, 2, 32
	tExperts, tUsed, tFF = 8, 2, 256
)

func qwenCheckpoint(fused bool) *checkpoint {
	rng := rand.New(rand.NewPCG(1, 2))
	c := newCheckpoint(map[string]any{
		"model_type": "qwen3_moe", "vocab_size": testVocab, "hidden_size": tH, "intermediate_size": 512,
		"moe_intermediate_size": tFF, "num_hidden_layers": 2, "num_attention_heads": tHeads,
		"num_key_value_heads": tKV, "head_dim": tHD, "num_local_experts": tExperts, "num_experts_per_tok": tUsed,
		"norm_topk_prob": true, "decoder_sparse_step": 1, "mlp_only_layers": []int{}, "hidden_act": "silu",
		"max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "tie_word_embeddings": false,
		"rope_parameters": map[string]any{"rope_type": "default", "rope_theta": 1e6},
	})
	c.add(rng, "model.embed_tokens.weight", 0, testVocab, tH)
	c.add(rng, "lm_head.weight", 0, testVocab, tH)
	c.add(rng, "model.norm.weight", 1, tH)
	for l := range 2 {
		p := "model.layers." + itoa(l) + "."
		c.add(rng, p+"input_layernorm.weight", 1, tH)
		c.add(rng, p+"post_attention_layernorm.weight", 1, tH)
		c.add(rng, p+"self_attn.q_proj.weight", 0, tHeads*tHD, tH)
		c.add(rng, p+"self_attn.k_proj.weight", 0, tKV*tHD, tH)
		c.add(rng, p+"self_attn.v_proj.weight", 0, tKV*tHD, tH)
		c.add(rng, p+"self_attn.o_proj.weight", 0, tH, tHeads*tHD)
		c.add(rng, p+"self_attn.q_norm.weight", 1, tHD)
		c.add(rng, p+"self_attn.k_norm.weight", 1, tHD)
		c.add(rng, p+"mlp.gate.weight", 0, tExperts, tH)
		for e := range tExperts {
			q := p + "mlp.experts." + itoa(e) + "."
			c.add(rng, q+"gate_proj.weight", 0, tFF, tH)
			c.add(rng, q+"up_proj.weight", 0, tFF, tH)
			c.add(rng, q+"down_proj.weight", 0, tH, tFF)
		}
		if fused {
			c.fuse(p + "mlp.experts.")
		}
	}
	return c
}

// fuse rewrites a block's experts in transformers 5's layout: gate_up_proj
// [E, 2*ff, h] (gate rows first) and down_proj [E, h, ff].
func (c *checkpoint) fuse(p string) {
	var gu, down []float32
	for e := range tExperts {
		q := p + itoa(e) + "."
		gu = append(gu, c.tensors[q+"gate_proj.weight"]...)
		gu = append(gu, c.tensors[q+"up_proj.weight"]...)
		down = append(down, c.tensors[q+"down_proj.weight"]...)
		for _, n := range []string{"gate_proj", "up_proj", "down_proj"} {
			delete(c.tensors, q+n+".weight")
			delete(c.shapes, q+n+".weight")
		}
	}
	c.tensors[p+"gate_up_proj"], c.shapes[p+"gate_up_proj"] = gu, []int64{tExperts, 2 * tFF, tH}
	c.tensors[p+"down_proj"], c.shapes[p+"down_proj"] = down, []int64{tExperts, tH, tFF}
}

const gemmaLayers = 7

func gemmaCheckpoint() *checkpoint {
	rng := rand.New(rand.NewPCG(3, 4))
	types := make([]string, gemmaLayers)
	for l := range types {
		types[l] = "sliding_attention"
		if (l+1)%6 == 0 {
			types[l] = "full_attention"
		}
	}
	c := newCheckpoint(map[string]any{
		"model_type": "gemma3_text", "vocab_size": testVocab, "hidden_size": tH, "intermediate_size": tFF,
		"num_hidden_layers": gemmaLayers, "num_attention_heads": tHeads, "num_key_value_heads": tKV,
		"head_dim": tHD, "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 4096,
		"rms_norm_eps": 1e-6, "tie_word_embeddings": true, "query_pre_attn_scalar": tHD, "sliding_window": 16,
		"layer_types": types, "final_logit_softcapping": nil, "attn_logit_softcapping": nil,
		"rope_parameters": map[string]any{
			"full_attention":    map[string]any{"rope_type": "default", "rope_theta": 1e6},
			"sliding_attention": map[string]any{"rope_type": "default", "rope_theta": 1e4},
		},
	})
	c.add(rng, "model.embed_tokens.weight", 0, testVocab, tH)
	c.add(rng, "model.norm.weight", 0, tH)
	for l := range gemmaLayers {
		p := "model.layers." + itoa(l) + "."
		for _, n := range []string{"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"} {
			c.add(rng, p+n+".weight", 0, tH)
		}
		c.add(rng, p+"self_attn.q_proj.weight", 0, tHeads*tHD, tH)
		c.add(rng, p+"self_attn.k_proj.weight", 0, tKV*tHD, tH)
		c.add(rng, p+"self_attn.v_proj.weight", 0, tKV*tHD, tH)
		c.add(rng, p+"self_attn.o_proj.weight", 0, tH, tHeads*tHD)
		c.add(rng, p+"self_attn.q_norm.weight", 0, tHD)
		c.add(rng, p+"self_attn.k_norm.weight", 0, tHD)
		c.add(rng, p+"mlp.gate_proj.weight", 0, tFF, tH)
		c.add(rng, p+"mlp.up_proj.weight", 0, tFF, tH)
		c.add(rng, p+"mlp.down_proj.weight", 0, tH, tFF)
	}
	return c
}

func itoa(i int) string { return strconv.Itoa(i) }

// convertFile runs the converter on dir and opens the result.
func convertFile(t *testing.T, dir, ftype string) *gguf.File {
	t.Helper()
	w, err := build(dir, sharedtest.Path(t, "models", "factory-target-F16.gguf"), ftype, "test")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "out.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func values(t *testing.T, f *gguf.File, name string) ([]float32, *gguf.TensorInfo) {
	t.Helper()
	info, ok := f.Tensor(name)
	if !ok {
		t.Fatalf("no tensor %s", name)
	}
	raw, err := f.TensorData(info)
	if err != nil {
		t.Fatal(err)
	}
	n := int64(1)
	for _, d := range info.Dims {
		n *= d
	}
	out := make([]float32, n)
	if err := quant.Dequantize(info.Type, raw, out); err != nil {
		t.Fatal(err)
	}
	return out, info
}

func wantUint(t *testing.T, f *gguf.File, key string, want uint64) {
	t.Helper()
	if v, ok := f.Uint(key); !ok || v != want {
		t.Errorf("%s = %d (present %v), want %d", key, v, ok, want)
	}
}

func TestQwen3MoEF16(t *testing.T) {
	ck := qwenCheckpoint(false)
	f := convertFile(t, ck.write(t), "F16")
	if f.Arch() != "qwen3moe" {
		t.Fatalf("architecture %q", f.Arch())
	}
	for key, want := range map[string]uint64{
		"qwen3moe.block_count": 2, "qwen3moe.embedding_length": tH, "qwen3moe.attention.head_count": tHeads,
		"qwen3moe.attention.head_count_kv": tKV, "qwen3moe.attention.key_length": tHD,
		"qwen3moe.attention.value_length": tHD, "qwen3moe.rope.dimension_count": tHD,
		"qwen3moe.expert_count": tExperts, "qwen3moe.expert_used_count": tUsed,
		"qwen3moe.expert_feed_forward_length": tFF, "qwen3moe.feed_forward_length": 512,
		"qwen3moe.context_length": 4096, "general.file_type": 1,
	} {
		wantUint(t, f, key, want)
	}
	if v, _ := f.Float("qwen3moe.rope.freq_base"); v != 1e6 {
		t.Errorf("rope.freq_base %g", v)
	}
	if toks, _ := f.Strings("tokenizer.ggml.tokens"); len(toks) != testVocab {
		t.Errorf("%d tokens", len(toks))
	}
	var names []string
	for _, ti := range f.Tensors {
		names = append(names, ti.Name)
	}
	// 3 outside the blocks; per block: 2 norms, 4 projections, 2 head
	// norms, the router, 3 expert tensors.
	if len(names) != 3+2*12 {
		t.Errorf("%d tensors: %v", len(names), names)
	}
	for _, c := range []struct {
		name string
		typ  quant.Type
		dims []int64
	}{
		{"token_embd.weight", quant.F16, []int64{tH, testVocab}},
		{"output.weight", quant.F16, []int64{tH, testVocab}},
		{"output_norm.weight", quant.F32, []int64{tH}},
		{"blk.1.attn_q.weight", quant.F16, []int64{tH, tHeads * tHD}},
		{"blk.1.attn_output.weight", quant.F16, []int64{tHeads * tHD, tH}},
		{"blk.1.attn_q_norm.weight", quant.F32, []int64{tHD}},
		{"blk.1.ffn_norm.weight", quant.F32, []int64{tH}},
		{"blk.1.ffn_gate_inp.weight", quant.F32, []int64{tH, tExperts}},
		{"blk.1.ffn_gate_exps.weight", quant.F16, []int64{tH, tFF, tExperts}},
		{"blk.1.ffn_up_exps.weight", quant.F16, []int64{tH, tFF, tExperts}},
		{"blk.1.ffn_down_exps.weight", quant.F16, []int64{tFF, tH, tExperts}},
	} {
		_, info := values(t, f, c.name)
		if info.Type != c.typ || !slices.Equal(info.Dims, c.dims) {
			t.Errorf("%s: %v %v, want %v %v", c.name, info.Type, info.Dims, c.typ, c.dims)
		}
	}
	// Expert e's slice of each stacked tensor is its own matrix, exactly.
	for _, e := range []int{0, 5, 7} {
		for _, m := range []struct{ gguf, hub string }{
			{"ffn_gate_exps", "gate_proj"}, {"ffn_up_exps", "up_proj"}, {"ffn_down_exps", "down_proj"},
		} {
			got, _ := values(t, f, "blk.1."+m.gguf+".weight")
			want := ck.tensors["model.layers.1.mlp.experts."+itoa(e)+"."+m.hub+".weight"]
			if !slices.Equal(got[e*len(want):(e+1)*len(want)], want) {
				t.Errorf("expert %d of %s differs from %s", e, m.gguf, m.hub)
			}
		}
	}
	for hub, name := range map[string]string{
		"model.layers.0.mlp.gate.weight":                 "blk.0.ffn_gate_inp.weight",
		"model.layers.0.self_attn.k_norm.weight":         "blk.0.attn_k_norm.weight",
		"model.layers.0.post_attention_layernorm.weight": "blk.0.ffn_norm.weight",
		"lm_head.weight":                                 "output.weight",
	} {
		if got, _ := values(t, f, name); !slices.Equal(got, ck.tensors[hub]) {
			t.Errorf("%s differs from %s", name, hub)
		}
	}
}

// The fused layout of transformers 5 converts to the same file as the
// Hub's per-expert one.
func TestQwen3MoEFusedExperts(t *testing.T) {
	a := convertFile(t, qwenCheckpoint(false).write(t), "Q8_0")
	b := convertFile(t, qwenCheckpoint(true).write(t), "Q8_0")
	for _, ti := range a.Tensors {
		x, _ := values(t, a, ti.Name)
		y, _ := values(t, b, ti.Name)
		if !slices.Equal(x, y) {
			t.Errorf("%s differs between the layouts", ti.Name)
		}
	}
}

func TestGemma3F16(t *testing.T) {
	ck := gemmaCheckpoint()
	f := convertFile(t, ck.write(t), "F16")
	if f.Arch() != "gemma3" {
		t.Fatalf("architecture %q", f.Arch())
	}
	wantUint(t, f, "gemma3.attention.sliding_window", 16)
	wantUint(t, f, "gemma3.block_count", gemmaLayers)
	wantUint(t, f, "gemma3.attention.key_length", tHD)
	if v, _ := f.Float("gemma3.rope.freq_base"); v != 1e6 {
		t.Errorf("rope.freq_base %g, want the global layers' 1e6", v)
	}
	if _, ok := f.Tensor("output.weight"); ok {
		t.Error("a tied model got output.weight")
	}
	// Every norm is stored as 1 + w.
	for hub, name := range map[string]string{
		"model.norm.weight":                                "output_norm.weight",
		"model.layers.6.input_layernorm.weight":            "blk.6.attn_norm.weight",
		"model.layers.6.post_attention_layernorm.weight":   "blk.6.post_attention_norm.weight",
		"model.layers.6.pre_feedforward_layernorm.weight":  "blk.6.ffn_norm.weight",
		"model.layers.6.post_feedforward_layernorm.weight": "blk.6.post_ffw_norm.weight",
		"model.layers.6.self_attn.q_norm.weight":           "blk.6.attn_q_norm.weight",
		"model.layers.6.self_attn.k_norm.weight":           "blk.6.attn_k_norm.weight",
	} {
		got, info := values(t, f, name)
		if info.Type != quant.F32 {
			t.Errorf("%s: %v", name, info.Type)
		}
		for i, w := range ck.tensors[hub] {
			if got[i] != 1+w {
				t.Fatalf("%s[%d] = %g, want 1 + %g", name, i, got[i], w)
			}
		}
	}
	for hub, name := range map[string]string{
		"model.layers.3.mlp.gate_proj.weight": "blk.3.ffn_gate.weight",
		"model.layers.3.mlp.down_proj.weight": "blk.3.ffn_down.weight",
		"model.embed_tokens.weight":           "token_embd.weight",
	} {
		if got, _ := values(t, f, name); !slices.Equal(got, ck.tensors[hub]) {
			t.Errorf("%s differs from %s", name, hub)
		}
	}
}

// Q4_K_M gives each tensor llama.cpp's type, falling back where rows are
// not whole K blocks, and the values stay near the source.
func TestQuantizedTypes(t *testing.T) {
	q := convertFile(t, qwenCheckpoint(false).write(t), "Q4_K_M")
	g := convertFile(t, gemmaCheckpoint().write(t), "Q4_K_M")
	for _, c := range []struct {
		f    *gguf.File
		name string
		typ  quant.Type
	}{
		{q, "output.weight", quant.Q8_0},              // Q6_K on rows of 64
		{q, "token_embd.weight", quant.Q5_0},          // Q4_K on rows of 64
		{q, "blk.0.ffn_down_exps.weight", quant.Q4_K}, // rows of 256
		{q, "blk.1.ffn_down_exps.weight", quant.Q6_K}, // more bits in the last eighth
		{q, "blk.0.ffn_gate_exps.weight", quant.Q5_0},
		{q, "blk.0.ffn_gate_inp.weight", quant.F32},
		{g, "token_embd.weight", quant.Q8_0}, // the tied head: Q6_K, rows of 64
		{g, "blk.0.ffn_down.weight", quant.Q4_K},
		{g, "blk.2.ffn_down.weight", quant.Q6_K}, // every third from the first eighth (7/8 = 0) on
		{g, "blk.3.ffn_down.weight", quant.Q4_K},
		{g, "blk.6.ffn_down.weight", quant.Q6_K}, // the last eighth
		{g, "blk.0.attn_norm.weight", quant.F32},
	} {
		info, ok := c.f.Tensor(c.name)
		if !ok || info.Type != c.typ {
			t.Errorf("%s: %v, want %v", c.name, info, c.typ)
		}
	}
	ref := gemmaCheckpoint()
	for _, name := range []string{"blk.1.ffn_down.weight", "blk.2.ffn_down.weight", "blk.2.attn_q.weight"} {
		got, _ := values(t, g, name)
		hub := map[string]string{
			"blk.1.ffn_down.weight": "model.layers.1.mlp.down_proj.weight",
			"blk.2.ffn_down.weight": "model.layers.2.mlp.down_proj.weight",
			"blk.2.attn_q.weight":   "model.layers.2.self_attn.q_proj.weight",
		}[name]
		if e := relRMS(got, ref.tensors[hub]); e > 0.08 || e == 0 {
			t.Errorf("%s: relative RMS error %.4f", name, e)
		}
	}
}

func relRMS(x, y []float32) float64 {
	var d, s float64
	for i := range x {
		d += float64(x[i]-y[i]) * float64(x[i]-y[i])
		s += float64(y[i]) * float64(y[i])
	}
	return math.Sqrt(d / s)
}

// peakAt is the index of x's value of largest magnitude, the first on ties.
func peakAt(x []float32) int {
	best := 0
	for i, v := range x {
		if math.Abs(float64(v)) > math.Abs(float64(x[best])) {
			best = i
		}
	}
	return best
}

func TestQ5_0RoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	x := make([]float32, 32*64)
	for i := range x {
		x[i] = float32(rng.NormFloat64()) * float32(1+i/32)
	}
	b := make([]byte, 22*64)
	quantizeQ5_0(x, b)
	y := make([]float32, len(x))
	if err := quant.Dequantize(quant.Q5_0, b, y); err != nil {
		t.Fatal(err)
	}
	for blk := range 64 {
		var amax float64
		for _, v := range x[blk*32 : blk*32+32] {
			amax = max(amax, math.Abs(float64(v)))
		}
		step := amax / 16
		for i := blk * 32; i < blk*32+32; i++ {
			// Half a step of rounding (a whole one where a value of the
			// peak's opposite sign meets the cap at q = 31), and the F16
			// scale's relative error over at most 16 steps.
			limit := step*0.5 + amax*1e-3
			if (x[i] > 0) != (x[blk*32+peakAt(x[blk*32:blk*32+32])] > 0) {
				limit += step * 0.5
			}
			if d := math.Abs(float64(x[i] - y[i])); d > limit {
				t.Fatalf("x[%d] = %g decodes as %g (step %g)", i, x[i], y[i], step)
			}
		}
	}
}

func TestRefusals(t *testing.T) {
	for _, c := range []struct {
		name  string
		ck    func() *checkpoint
		edit  func(*checkpoint)
		error string
	}{
		{"no renormalisation", func() *checkpoint { return qwenCheckpoint(false) },
			func(c *checkpoint) { c.config["norm_topk_prob"] = false }, "norm_topk_prob"},
		{"dense layers", func() *checkpoint { return qwenCheckpoint(false) },
			func(c *checkpoint) { c.config["mlp_only_layers"] = []int{1} }, "mlp_only_layers"},
		{"an unknown tensor", func() *checkpoint { return qwenCheckpoint(false) },
			func(c *checkpoint) { c.add(rand.New(rand.NewPCG(1, 1)), "model.layers.0.extra.weight", 0, 4, 4) }, "not mapped"},
		{"a missing expert", func() *checkpoint { return qwenCheckpoint(false) },
			func(c *checkpoint) { delete(c.tensors, "model.layers.1.mlp.experts.3.up_proj.weight") }, "experts.3.up_proj"},
		{"a wrong shape", func() *checkpoint { return qwenCheckpoint(false) },
			func(c *checkpoint) { c.shapes["model.layers.0.mlp.gate.weight"] = []int64{tH, tExperts} }, "mlp.gate.weight: shape"},
		{"another vocabulary", func() *checkpoint { return qwenCheckpoint(false) },
			func(c *checkpoint) { c.config["vocab_size"] = 100 }, ""},
		{"another layer pattern", gemmaCheckpoint,
			func(c *checkpoint) {
				types := c.config["layer_types"].([]string)
				types[0] = "full_attention"
			}, "layer_types"},
		{"another query scale", gemmaCheckpoint,
			func(c *checkpoint) { c.config["query_pre_attn_scalar"] = 24 }, "query_pre_attn_scalar"},
		{"soft-capping", gemmaCheckpoint,
			func(c *checkpoint) { c.config["final_logit_softcapping"] = 30.0 }, "soft-capping"},
		{"another local theta", gemmaCheckpoint,
			func(c *checkpoint) {
				c.config["rope_parameters"].(map[string]any)["sliding_attention"] = map[string]any{"rope_type": "default", "rope_theta": 5e4}
			}, "sliding layers"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ck := c.ck()
			c.edit(ck)
			dir := ck.write(t)
			_, err := build(dir, sharedtest.Path(t, "models", "factory-target-F16.gguf"), "F16", "x")
			if err == nil || !strings.Contains(err.Error(), c.error) {
				t.Fatalf("error %v, want one mentioning %q", err, c.error)
			}
		})
	}
}

func TestBadSafetensors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"header past the end", binary.LittleEndian.AppendUint64(nil, 1000)},
		{"not JSON", append(binary.LittleEndian.AppendUint64(nil, 3), "{x}"...)},
		{"bytes past the end", func() []byte {
			h := `{"a":{"dtype":"F16","shape":[4],"data_offsets":[0,8]}}`
			return append(binary.LittleEndian.AppendUint64(nil, uint64(len(h))), h...)
		}()},
		{"an odd dtype", func() []byte {
			h := `{"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}`
			return append(append(binary.LittleEndian.AppendUint64(nil, uint64(len(h))), h...), make([]byte, 8)...)
		}()},
	} {
		p := filepath.Join(dir, "x.safetensors")
		if err := os.WriteFile(p, c.data, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := readSafetensors(p); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}
