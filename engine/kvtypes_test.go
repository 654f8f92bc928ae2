package engine

import (
	"bytes"
	"context"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/cpu"
	"github.com/tandem-run/tandem/kernels/cuda"
	"github.com/tandem-run/tandem/kernels/quant"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// The planner's static table of KV cache types per device kind
// (plan.KVTypes.RunsOn) is what the backend under test supports: the
// cache writes and the attention over K and V of every pair of types.
func TestKVTypesMatchBackends(t *testing.T) {
	var be kernels.Backend
	kind := device.CPU
	if *backend == "cuda" {
		b, err := cuda.Open(cuda.Options{})
		if err != nil {
			t.Fatal(err)
		}
		be, kind = b, device.CUDA
	} else {
		be = cpu.New(cpu.Options{Threads: 1})
	}
	defer be.Close()
	types := []quant.Type{quant.F32, quant.F16, quant.Q8_0, quant.Q4_0}
	for _, k := range types {
		for _, v := range types {
			kv := plan.KVTypes{K: k, V: v}
			runs := be.Supports(kernels.SetRows{Dst: kernels.Tensor{Type: k}}) &&
				be.Supports(kernels.SetRows{Dst: kernels.Tensor{Type: v}}) &&
				be.Supports(kernels.Attention{K: kernels.Tensor{Type: k}, V: kernels.Tensor{Type: v}, HeadDim: 64})
			if kv.RunsOn(kind) != runs {
				t.Errorf("%s: the plan says %v runs: %v; the backend supports it: %v", kind, kv, kv.RunsOn(kind), runs)
			}
		}
	}
}

// Quantized KV caches cost little accuracy with the demo target:
// perplexity on the held-out text within 1% of the F16 cache's with q8_0
// and within 3% with q4_0 (K and V both), and with q8_0 the first 16
// greedy tokens are the F16 cache's on at least 5 of the 6 oracle
// prompts. Types the backend under test does not run are skipped. The
// test scores the text's first 12 kB (a fifth, which keeps it to a minute
// on a slow machine); `tandem perplexity --kv-type` scores all of it.
func TestQuantizedKVCache(t *testing.T) {
	kind := device.CPU
	if *backend == "cuda" {
		kind = device.CUDA
	}
	if !plan.SameKV(quant.Q8_0).RunsOn(kind) && !plan.SameKV(quant.Q4_0).RunsOn(kind) {
		t.Skipf("%s runs no quantized KV cache", kind)
	}
	text, err := os.ReadFile(sharedtest.Path(t, "oracle", "heldout.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if i := bytes.IndexByte(text[min(len(text), 12000):], '\n'); i >= 0 {
		text = text[:12000+i]
	}
	prompts := loadOracle(t)
	target := modelPath(t, "factory-target-Q4_K_M.gguf")
	const window, tokens = 256, 16
	greedy := func(r *Runner) [][]int32 {
		var out [][]int32
		for _, p := range prompts {
			var ids []int32
			if _, err := r.Generate(context.Background(), Request{Prompt: p.Text, MaxTokens: tokens, IgnoreEOS: true},
				func(e Event) { ids = append(ids, e.IDs...) }); err != nil {
				t.Fatal(err)
			}
			out = append(out, ids)
		}
		return out
	}
	f16 := load(t, Config{Target: target, Context: window})
	ref, err := f16.Perplexity(context.Background(), string(text), window, nil)
	if err != nil {
		t.Fatal(err)
	}
	refIDs := greedy(f16)
	t.Logf("f16: perplexity %.4f over %d tokens", ref.PPL, ref.Scored)
	for _, tc := range []struct {
		kv    string
		tol   float64
		match int // prompts whose greedy tokens must equal the F16 cache's
	}{{"q8_0", 0.01, 5}, {"q4_0", 0.03, 0}} {
		t.Run(tc.kv, func(t *testing.T) {
			if kv, _ := plan.ParseKVType(tc.kv); !plan.SameKV(kv).RunsOn(kind) {
				t.Skipf("%s does not run a %s cache", kind, tc.kv)
			}
			r := load(t, Config{Target: target, Context: window, KVType: tc.kv})
			if kv := r.Plan().KV; plan.KVTypeName(kv.K) != tc.kv || kv.V != kv.K {
				t.Fatalf("loaded with a %v cache", kv)
			}
			got, err := r.Perplexity(context.Background(), string(text), window, nil)
			if err != nil {
				t.Fatal(err)
			}
			d := got.PPL/ref.PPL - 1
			t.Logf("perplexity %.4f, %+.3f%% from f16", got.PPL, 100*d)
			if math.Abs(d) > tc.tol {
				t.Errorf("perplexity %.4f is %+.2f%% from the f16 cache's %.4f", got.PPL, 100*d, ref.PPL)
			}
			matched := 0
			for i, ids := range greedy(r) {
				if slices.Equal(ids, refIDs[i]) {
					matched++
				} else {
					t.Logf("prompt %d:\n %v\n f16 %v", i, ids, refIDs[i])
				}
			}
			t.Logf("%d of %d prompts: the first %d greedy tokens are the f16 cache's", matched, len(prompts), tokens)
			if matched < tc.match {
				t.Errorf("%d of %d prompts match the f16 cache's greedy tokens, want %d", matched, len(prompts), tc.match)
			}
		})
	}
}
