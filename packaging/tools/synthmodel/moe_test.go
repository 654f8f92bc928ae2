package main

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/model"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// A mixture-of-experts shape is written with llama.cpp's qwen3moe keys and
// 3-D expert tensors, and loads and decodes as one: the 30B-A3B shape at a
// size CI affords (its experts, routing and heads; fewer layers, narrower).
func TestMoEShapeLoads(t *testing.T) {
	sh := shapes["qwen3-30b-a3b"]
	sh.layers, sh.embd, sh.ff, sh.expertFF, sh.experts = 3, 512, 1024, 256, 16
	sh.vocab = 151936
	vocab := sharedtest.Path(t, "testdata", "vocab", "vocab-qwen3.gguf")
	w, err := build(sh, "ci-moe", "Q4_K_M", vocab, rand.New(rand.NewPCG(3, 4)))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "moe.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Arch() != "qwen3moe" {
		t.Fatalf("architecture %q", f.Arch())
	}
	for name, dims := range map[string][]int64{
		"blk.0.ffn_gate_inp.weight":  {512, 16},
		"blk.1.ffn_gate_exps.weight": {512, 256, 16},
		"blk.2.ffn_down_exps.weight": {256, 512, 16},
	} {
		info, ok := f.Tensor(name)
		if !ok || len(info.Dims) != len(dims) || info.Dims[0] != dims[0] || info.Dims[1] != dims[1] || info.Dims[len(dims)-1] != dims[len(dims)-1] {
			t.Errorf("%s: %+v, want dims %v", name, info, dims)
		}
	}
	p, err := model.ReadParams(f)
	if err != nil {
		t.Fatal(err)
	}
	if p.Experts != 16 || p.ExpertsUsed != 8 || p.ExpertFF != 256 {
		t.Errorf("experts %d used %d width %d, want 16, 8, 256", p.Experts, p.ExpertsUsed, p.ExpertFF)
	}
	m := load(t, path, newBackend(t), model.Options{})
	if got := greedy(t, m, []int32{9707, 11, 1879}, 4); len(got) != 4 {
		t.Fatalf("greedy %v", got)
	}
	logits, err := m.Forward(t.Context(), []int32{13}, m.Len(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range logits[:sh.vocab] {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("logit %d is %g", i, v)
		}
	}
}
