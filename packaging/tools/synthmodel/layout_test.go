package main

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/model"
	"github.com/tandem-run/tandem/kernels/cpu"
	"github.com/tandem-run/tandem/kernels/quant"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

func TestMapHeads(t *testing.T) {
	T, F := true, false
	cases := []struct {
		name                       string
		srcHeads, srcKV, heads, kv int
		q                          []int
		live                       []bool
		k                          []int
	}{
		// The demo target's groups of 3 in Qwen3-0.6B's groups of 2: each
		// source K/V head twice; the slot left in its second group repeats
		// the source head before it, unread; four K/V slots are extra.
		{"smaller groups", 6, 2, 16, 8,
			[]int{0, 1, 2, 2, 3, 4, 5, 5, -1, -1, -1, -1, -1, -1, -1, -1},
			[]bool{T, T, T, F, T, T, T, F, F, F, F, F, F, F, F, F},
			[]int{0, 0, 1, 1, -1, -1, -1, -1}},
		// Qwen3-8B's groups of 4 hold a group of 3 whole.
		{"larger groups", 6, 2, 8, 2,
			[]int{0, 1, 2, 2, 3, 4, 5, 5},
			[]bool{T, T, T, F, T, T, T, F},
			[]int{0, 1}},
		{"same", 4, 4, 4, 4, []int{0, 1, 2, 3}, []bool{T, T, T, T}, []int{0, 1, 2, 3}},
	}
	for _, c := range cases {
		q, live, k, err := mapHeads(c.srcHeads, c.srcKV, c.heads, c.kv)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !slices.Equal(q, c.q) || !slices.Equal(live, c.live) || !slices.Equal(k, c.k) {
			t.Errorf("%s: query slots %v (live %v), K/V slots %v; want %v (%v), %v", c.name, q, live, k, c.q, c.live, c.k)
		}
		// Every query slot holding a source head sits in the group of a
		// K/V slot holding that head's K/V head, and every source head is
		// read exactly once.
		g, gs := c.heads/c.kv, c.srcHeads/c.srcKV
		read := map[int]int{}
		for slot, h := range q {
			if h >= 0 && k[slot/g] != h/gs {
				t.Errorf("%s: query slot %d (source head %d) reads K/V slot %d (source %d)", c.name, slot, h, slot/g, k[slot/g])
			}
			if live[slot] {
				read[h]++
			}
		}
		for h := range c.srcHeads {
			if read[h] != 1 {
				t.Errorf("%s: source head %d read by %d slots", c.name, h, read[h])
			}
		}
	}
	// Groups of 1 need three copies of each of the 2 source K/V heads.
	if _, _, _, err := mapHeads(6, 2, 4, 4); err == nil || !strings.Contains(err.Error(), "cannot hold") {
		t.Errorf("6 heads on 2 into 4 on 4: %v", err)
	}
}

// The numbers that keep the norms exact, checked against their defining
// equations for every real shape and file type.
func TestTargetLayout(t *testing.T) {
	src, err := openSource(sharedtest.Path(t, "models", "factory-target-F16.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.f.Close()
	for _, name := range shapeNames() {
		sh := shapes[name]
		for _, typ := range []quant.Type{quant.F16, quant.Q8_0, quant.Q4_K} {
			l, err := newTargetLayout(src, sh, typ)
			if err != nil {
				t.Fatalf("%s %v: %v", name, typ, err)
			}
			// Residual norms: c^2 + N*eps = s^2*n*eps_src, to float32.
			lhs := float64(l.biasValue)*float64(l.biasValue) + float64(l.N)*float64(l.eps)
			rhs := float64(l.scale*l.scale) * float64(l.n) * src.eps
			if math.Abs(lhs/rhs-1) > 1e-6 {
				t.Errorf("%s %v: c^2 + N*eps = %g, s^2*n*eps_src = %g", name, typ, lhs, rhs)
			}
			// Q/K norms: eps = eps_src*d/D, to what rounding c allows.
			if e := float64(l.eps) / (src.eps * float64(l.d) / float64(l.D)); math.Abs(e-1) > 1e-2 {
				t.Errorf("%s %v: Q/K epsilon off by %.2g of itself", name, typ, e-1)
			}
			if l.bias%256 != 0 || l.bias < l.n || l.bias >= l.N {
				t.Errorf("%s: bias lane %d", name, l.bias)
			}
			if g := l.gain * float32(math.Sqrt(float64(l.N))); g > 32768 || g < 16384 {
				t.Errorf("%s: lane gain %g bounds the lane at %g", name, l.gain, g)
			}
			if b := math.Float32bits(l.scale); b&(1<<23-1) != 0 {
				t.Errorf("%s: residual scale %g is not a power of two", name, l.scale)
			}
		}
	}
}

func TestInflateRejects(t *testing.T) {
	target := sharedtest.Path(t, "models", "factory-target-F16.gguf")
	eagle := sharedtest.Path(t, "models", "factory-eagle3-F16.gguf")
	out := filepath.Join(t.TempDir(), "x.gguf")
	rng := rand.New(rand.NewPCG(1, 1))
	small := ciShape
	small.embd = 512 // no 256-aligned lane past 384
	fewKV := ciShape
	fewKV.heads, fewKV.kvHeads = 8, 1 // one K/V slot for two source K/V heads
	cases := []struct {
		name, path, target string
		sh                 shape
		want               string
	}{
		{"eagle without its target", eagle, "", ciShape, "give -target"},
		{"eagle against a plain model", eagle, target, ciShape, "synthmodel.inflate"},
		{"a draft of another architecture", sharedtest.Path(t, "models", "factory-draft-F16.gguf"), "", ciShape, "only qwen3"},
		{"no room for the lane", target, "", small, "256-aligned lane"},
		{"too few K/V heads", target, "", fewKV, "cannot hold"},
	}
	for _, c := range cases {
		err := inflateFile(c.path, c.target, c.sh, "x", "F16", defaultDraftVocab, out, rng)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	tiny := ciShape
	tiny.layers = 4
	if err := inflateFile(target, "", tiny, "x", "F16", defaultDraftVocab, out, rng); err == nil || !strings.Contains(err.Error(), "blocks") {
		t.Errorf("fewer blocks than the source: %v", err)
	}
}

// The random-weight mode still writes a model that loads and runs.
func TestRandomModeLoads(t *testing.T) {
	vocab := sharedtest.Path(t, "testdata", "vocab", "vocab-qwen3.gguf")
	sh := shape{embd: 256, layers: 2, heads: 2, kvHeads: 1, headDim: 128, ff: 512, vocab: 151936}
	for _, ftype := range []string{"F16", "Q4_K_M"} {
		w, err := build(sh, "tiny", ftype, vocab, rand.New(rand.NewPCG(1, 2)))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "r.gguf")
		if err := w.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		be := cpu.New(cpu.Options{})
		m, err := model.Load(context.Background(), f, be, model.Options{Context: 16})
		if err != nil {
			t.Fatalf("%s: %v", ftype, err)
		}
		logits, err := m.Forward(context.Background(), []int32{1, 2, 3}, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range logits {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("%s: non-finite logit", ftype)
			}
		}
		m.Close()
		be.Close()
		f.Close()
	}
}
