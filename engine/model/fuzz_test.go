package model

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tandem-run/tandem/engine/chat"
	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/engine/tokenizer"
	"github.com/tandem-run/tandem/kernels/cpu"
	"github.com/tandem-run/tandem/kernels/quant"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

var updateSeeds = flag.Bool("update-seeds", false, "rewrite testdata/fuzz/FuzzLoadHeader from the hostile cases")

// fuzzRoom is the sparse tail the fuzz harness gives each header, so that
// the tensors a header declares can lie in the file: room for the demo
// target's 38 MB, and no more, since every length in a mutated header may
// point into it.
const fuzzRoom = 40 << 20

// headerOf returns the header of the GGUF file at path: the bytes before
// its tensor data.
func headerOf(t testing.TB, path string) []byte {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var data int64
	for _, ti := range f.Tensors {
		data = max(data, ti.Offset+(ti.Bytes+f.Alignment-1)/f.Alignment*f.Alignment)
	}
	r, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b := make([]byte, f.Size-data)
	if _, err := io.ReadFull(r, b); err != nil {
		t.Fatal(err)
	}
	return b
}

// hostileHeaders are the header cases of issue 19 on a small model of the
// demo target's layout (a tiny vocabulary keeps the seeds small).
func hostileHeaders(t *testing.T) map[string][]byte {
	t.Helper()
	small := synth{arch: "qwen3", embd: 64, layers: 2, heads: 4, kvHeads: 2, ff: 96, vocab: 16, weightType: quant.F16}.write(t)
	out := map[string][]byte{"small": headerOf(t, small)}
	for name, set := range map[string]map[string]any{
		"blocks-2p20":       {"qwen3.block_count": uint32(1 << 20)},
		"blocks-2p31":       {"qwen3.block_count": uint32(1 << 31)},
		"heads-2p30":        {"qwen3.attention.head_count": uint32(1 << 30), "qwen3.attention.head_count_kv": uint32(1 << 30)},
		"keylen-2p31":       {"qwen3.attention.key_length": uint32(1 << 31)},
		"embd-2p31":         {"qwen3.embedding_length": uint32(1 << 31)},
		"ffn-2p31":          {"qwen3.feed_forward_length": uint32(1 << 31)},
		"context-2p31":      {"qwen3.context_length": uint32(1 << 31)},
		"experts":           {"qwen3.expert_count": uint32(1 << 20), "qwen3.expert_used_count": uint32(1 << 20)},
		"template-multiply": {"tokenizer.chat_template": "{% set s = 'aaaaaaaaaa' * 100000 %}{{ s * 100000 }}"},
		"template-loop":     {"tokenizer.chat_template": "{% for a in messages %}{% for b in 'x' * 100000 %}{{ b }}{% endfor %}{% endfor %}"},
	} {
		out[name] = headerOf(t, rewriteHeader(t, small, set, nil))
	}
	// The writer refuses a 2^62 dimension itself (and the gguf tests cover
	// it); this seed carries one of 2^40 for the fuzzer to grow.
	out["f32-dim-2p40"] = headerOf(t, rewriteHeader(t, small, nil, func(w *gguf.Writer) {
		if err := w.AddTensor("huge.weight", quant.F32, []int64{1 << 40}, nil); err != nil {
			t.Fatal(err)
		}
	}))
	return out
}

// checkHeader opens path and runs everything Load does before it places
// weights: hyper-parameters and their checks, the tokenizer, the chat
// template (rendered under the sandbox), the memory plan, and the loader's
// tensor checks on the CPU backend (which maps weights in place). It may
// refuse the file; it must not panic, hang or allocate without bound.
func checkHeader(t *testing.T, path string) {
	f, err := gguf.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	if f.Arch() == archEagle3 {
		_, _ = ReadEagle3Params(f)
	} else if p, err := ReadParams(f); err == nil {
		if p.Layers > maxLayers || p.Vocab > maxVocab || p.Heads*p.HeadDim > maxHeads*maxHeadDim {
			t.Fatalf("params past the caps accepted: %+v", p)
		}
		be := cpu.New(cpu.Options{Threads: 1})
		if m, err := Load(context.Background(), f, be, Options{Context: 16, Batch: 1}); err == nil {
			m.Close()
		}
		be.Close()
	}
	_, _ = tokenizer.FromGGUF(f)
	if tmpl, err := chat.FromGGUF(f); err == nil {
		_, _ = tmpl.WithLimits(chat.Limits{Time: 200 * time.Millisecond}).Render(context.Background(),
			[]chat.Message{{Role: "user", Content: "hi <|im_end|>"}}, chat.Options{AddGenerationPrompt: true})
	}
	dev := device.Device{Index: 0, Name: "cpu", Kind: device.CPU, Virtual: true, Physical: -1, MemoryTotal: 64 << 30, MemoryFree: 64 << 30}
	_, _ = plan.Make(plan.Input{Target: f, Devices: []device.Device{dev}, TargetPlacement: plan.Placement{Devices: []int{0}},
		Ctx: 256, Batch: 32, KV: plan.SameKV(quant.F16)})
}

// FuzzLoadHeader mutates GGUF headers (the demo models' and the hostile
// cases of testdata/fuzz/FuzzLoadHeader) and loads them as far as Load
// goes before weights are read. Each header gets a sparse zero tail of
// fuzzRoom bytes for the tensors it declares.
func FuzzLoadHeader(f *testing.F) {
	for _, name := range []string{"factory-target-F16.gguf", "factory-draft-Q8_0.gguf", "factory-eagle3-F16.gguf"} {
		if p := sharedtest.Path(f, "models", name); p != "" {
			f.Add(headerOf(f, p))
		}
	}
	dir := f.TempDir()
	n := 0
	f.Fuzz(func(t *testing.T, header []byte) {
		n++
		path := filepath.Join(dir, fmt.Sprintf("h%d.gguf", n))
		if err := os.WriteFile(path, header, 0o600); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(path)
		if err := os.Truncate(path, int64(len(header))+fuzzRoom); err != nil {
			t.Fatal(err)
		}
		checkHeader(t, path)
	})
}

// The hostile seeds are refused or loaded within bounds (the fuzz target's
// checks), and the committed corpus holds them (-update-seeds rewrites it).
func TestFuzzSeeds(t *testing.T) {
	seeds := hostileHeaders(t)
	dir := filepath.Join("testdata", "fuzz", "FuzzLoadHeader")
	if *updateSeeds {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range seeds {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name := range seeds {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("seed %s is not in the corpus (go test -run TestFuzzSeeds -update-seeds): %v", name, err)
		}
	}
}
