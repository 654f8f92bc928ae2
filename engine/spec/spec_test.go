package spec

import (
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/sample"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

func open(t *testing.T, name string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(sharedtest.Path(t, "models", name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestCompatibleDemoPair(t *testing.T) {
	target := open(t, "factory-target-Q8_0.gguf")
	for _, d := range []string{"factory-draft-Q8_0.gguf", "factory-draft-F16.gguf"} {
		if kind, err := Compatible(target, open(t, d)); err != nil || kind != DraftModel {
			t.Errorf("%s: %v %v", d, kind, err)
		}
	}
	if kind, err := Compatible(target, open(t, "factory-eagle3-F16.gguf")); err != nil || kind != DraftEagle3 {
		t.Errorf("eagle3: %v %v", kind, err)
	}
	dflash, err := gguf.Open("../testdata/factory-dflash-F16.gguf")
	if err != nil {
		t.Fatal(err)
	}
	defer dflash.Close()
	if kind, err := Compatible(target, dflash); err != nil || kind != DraftDFlash {
		t.Errorf("dflash: %v %v", kind, err)
	}
}

// writeVocab writes a header-only model with the given tokenizer.
func writeVocab(t *testing.T, arch string, tokens []string, eos uint32, extra func(*gguf.Writer)) *gguf.File {
	t.Helper()
	var w gguf.Writer
	w.AddKV("general.architecture", arch)
	w.AddKV("tokenizer.ggml.model", "gpt2")
	w.AddKV("tokenizer.ggml.tokens", tokens)
	w.AddKV("tokenizer.ggml.eos_token_id", eos)
	if extra != nil {
		extra(&w)
	}
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := w.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func vocab(n int) []string {
	v := make([]string, n)
	for i := range v {
		v[i] = "t" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
	}
	return v
}

func TestIncompatible(t *testing.T) {
	base := writeVocab(t, "llama", vocab(1000), 2, nil)
	renamed := vocab(1000)
	renamed[500] = "other"
	cases := []struct {
		name  string
		draft *gguf.File
		want  string
	}{
		{"vocabulary size", writeVocab(t, "llama", vocab(400), 2, nil), "draft vocabulary 400 tokens, target 1000"},
		{"token text", writeVocab(t, "llama", renamed, 2, nil), `token 500 is "other" in the draft`},
		{"eos", writeVocab(t, "llama", vocab(1000), 3, nil), "EOS token: draft 3, target 2"},
		{"eagle3 layers", writeVocab(t, "eagle3", vocab(1000), 2, func(w *gguf.Writer) {
			w.AddKV("eagle3.target_layers", []int32{1, 40})
		}), "reads target block 40"},
		{"dflash layers", writeVocab(t, "dflash", vocab(1000), 2, func(w *gguf.Writer) {
			w.AddKV("dflash.target_layers", []int32{1, 40})
		}), "the DFlash draft reads target block 40"},
		{"dflash width", writeVocab(t, "dflash", vocab(1000), 2, func(w *gguf.Writer) {
			w.AddKV("dflash.target_layers", []int32{1})
			w.AddKV("dflash.embedding_length", uint32(256))
		}), "the DFlash draft is 256 wide"},
	}
	for _, c := range cases {
		_, err := Compatible(base, c.draft)
		if !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// Padding within the tolerance is fine.
	if _, err := Compatible(base, writeVocab(t, "llama", vocab(1064), 2, nil)); err != nil {
		t.Errorf("padded vocabulary: %v", err)
	}
}

// A target whose vocabulary runs past the draft's in UNUSED padding tokens
// (a converted Qwen vocabulary, an inflated demo target) serves the draft;
// the same tail of ordinary tokens, or of padding in the draft, does not.
func TestCompatibleUnusedPadding(t *testing.T) {
	padded := func(arch string, n, live int, typ int32) *gguf.File {
		types := make([]int32, n)
		for i := range types {
			types[i] = 1
			if i >= live {
				types[i] = typ
			}
		}
		return writeVocab(t, arch, vocab(n), 2, func(w *gguf.Writer) { w.AddKV("tokenizer.ggml.token_type", types) })
	}
	short := writeVocab(t, "llama", vocab(1000), 2, nil)
	cases := []struct {
		name          string
		target, draft *gguf.File
		ok            bool
	}{
		{"target padded with UNUSED", padded("qwen3", 1400, 1000, TokenTypeUnused), short, true},
		{"target padded, a few live tokens past the draft", padded("qwen3", 1400, 1100, TokenTypeUnused), short, true},
		{"target with ordinary tokens past the draft", padded("qwen3", 1400, 1000, 1), short, false},
		{"target padded, too many live tokens past the draft", padded("qwen3", 1400, 1200, TokenTypeUnused), short, false},
		{"draft padded with UNUSED", short, padded("llama", 1400, 1000, TokenTypeUnused), false},
	}
	for _, c := range cases {
		_, err := Compatible(c.target, c.draft)
		if (err == nil) != c.ok {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// The residual-sampling rule, on small hand-made distributions: drafting
// from q then accepting or resampling must give exactly p, also where q
// is shorter than p (its tokens past the end have no draft mass).
func TestRejectionSamplingKeepsTarget(t *testing.T) {
	cases := []struct{ p, q []float32 }{
		{[]float32{0.5, 0.3, 0.2}, []float32{0.2, 0.3, 0.5}},
		{[]float32{1, 0, 0}, []float32{0.1, 0.1, 0.8}},
		{[]float32{0.25, 0.25, 0.25, 0.25}, []float32{0.7, 0.1, 0.1, 0.1}},
		{[]float32{0.1, 0.0, 0.9}, []float32{0.0, 0.5, 0.5}}, // the draft cannot draw token 0
		{[]float32{0.4, 0.6}, []float32{0.4, 0.6}},
		// A draft vocabulary that ends before the target's.
		{[]float32{0.3, 0.2, 0.1, 0.4}, []float32{0.5, 0.5}},
		{[]float32{0.5, 0.5, 0, 0}, []float32{0.9, 0.1}},
	}
	for ci, c := range cases {
		// Exact: P(emit y) = q(y) min(1, p/q) + P(reject) * residual(y).
		q := func(i int) float64 { // the draft's mass, 0 past its vocabulary
			if i < len(c.q) {
				return float64(c.q[i])
			}
			return 0
		}
		var reject float64
		for x := range c.q {
			if c.q[x] > 0 {
				reject += q(x) * (1 - math.Min(1, float64(c.p[x])/q(x)))
			}
		}
		var mass float64
		for i := range c.p {
			mass += math.Max(0, float64(c.p[i])-q(i))
		}
		for y := range c.p {
			got := math.Min(q(y), float64(c.p[y]))
			if mass > 0 {
				got += reject * math.Max(0, float64(c.p[y])-q(y)) / mass
			}
			if math.Abs(got-float64(c.p[y])) > 1e-6 {
				t.Errorf("case %d: P(%d) = %v, want %v", ci, y, got, c.p[y])
			}
		}
		// Simulated with the functions under test.
		rng := rand.New(rand.NewPCG(1, uint64(ci)))
		const n = 200000
		counts := make([]int, len(c.p))
		for range n {
			x := sample.Draw(c.q, rng.Float64())
			if Accept(c.p, c.q, x, rng.Float64()) {
				counts[x]++
			} else {
				counts[Residual(c.p, c.q, rng.Float64())]++
			}
		}
		for y := range c.p {
			got := float64(counts[y]) / n
			sd := math.Sqrt(float64(c.p[y])*(1-float64(c.p[y]))/n) + 1e-9
			if math.Abs(got-float64(c.p[y])) > 5*sd+1e-4 {
				t.Errorf("case %d: sampled P(%d) = %.4f, want %.4f", ci, y, got, c.p[y])
			}
		}
	}
}

func TestGreedyAccepted(t *testing.T) {
	cases := []struct {
		drafted, target []int32
		want            int
	}{
		{[]int32{1, 2, 3}, []int32{1, 2, 3, 4}, 3},
		{[]int32{1, 2, 3}, []int32{1, 5, 3, 4}, 1},
		{[]int32{7}, []int32{1, 2}, 0},
		{nil, []int32{9}, 0},
	}
	for _, c := range cases {
		if got := GreedyAccepted(c.drafted, c.target); got != c.want {
			t.Errorf("GreedyAccepted(%v, %v) = %d, want %d", c.drafted, c.target, got, c.want)
		}
	}
}

func TestLookup(t *testing.T) {
	l := NewLookup()
	h := []int32{5, 6, 7, 8, 9, 1, 2, 5, 6, 7}
	if got := l.Draft(h, 3); len(got) != 3 || got[0] != 8 || got[1] != 9 || got[2] != 1 {
		t.Errorf("Draft = %v, want [8 9 1]", got)
	}
	if got := l.Draft([]int32{1, 2, 3, 4}, 3); got != nil {
		t.Errorf("no repeat: Draft = %v", got)
	}
	// The most recent occurrence wins.
	h = []int32{1, 2, 10, 1, 2, 20, 1, 2}
	if got := l.Draft(h, 1); len(got) != 1 || got[0] != 20 {
		t.Errorf("Draft = %v, want [20]", got)
	}
}
