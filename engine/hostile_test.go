package engine

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/sample"
	"github.com/tandem-run/tandem/kernels/quant"
)

// copyGGUF writes src to dst through gguf.Writer, passing each tensor's
// bytes through edit (nil keeps them).
func copyGGUF(t *testing.T, src, dst string, edit func(name string, typ quant.Type, data []byte) []byte) {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var w gguf.Writer
	for _, kv := range f.KV {
		w.AddKV(kv.Key, kv.Value)
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		data, err := f.TensorData(ti)
		if err != nil {
			t.Fatal(err)
		}
		if edit != nil {
			data = edit(ti.Name, ti.Type, append([]byte(nil), data...))
		}
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteFile(dst); err != nil {
		t.Fatal(err)
	}
}

// generateWithin runs one request and fails t if it has not returned after
// a generous deadline (the bugs guarded against were endless loops that
// cancellation could not reach).
func generateWithin(t *testing.T, r *Runner, req Request) (Stats, error) {
	t.Helper()
	type result struct {
		st  Stats
		err error
	}
	done := make(chan result, 1)
	go func() {
		st, err := r.Generate(context.Background(), req, nil)
		done <- result{st, err}
	}()
	select {
	case res := <-done:
		return res.st, res.err
	case <-time.After(time.Minute):
		t.Fatalf("request %+v still running after a minute", req.Sampling)
		return Stats{}, nil
	}
}

// A model whose output norm holds a NaN gives NaN logits: every sampled or
// penalised request is an error naming them, and the runner stays usable
// for the next request. Sampled runs once looped forever in top-p.
func TestNaNLogitsAreAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nan-target.gguf")
	copyGGUF(t, modelPath(t, "factory-target-F16.gguf"), path, func(name string, typ quant.Type, data []byte) []byte {
		if name == "output_norm.weight" {
			if typ != quant.F32 {
				t.Fatalf("output_norm.weight is %v, this test writes F32 bits", typ)
			}
			nan := math.Float32bits(float32(math.NaN()))
			data[0], data[1], data[2], data[3] = byte(nan), byte(nan>>8), byte(nan>>16), byte(nan>>24)
		}
		return data
	})
	for name, cfg := range map[string]Config{
		"target alone": {Target: path},
		"draft":        {Target: path, Draft: modelPath(t, "factory-draft-Q8_0.gguf")},
	} {
		r := load(t, cfg)
		for _, s := range []Sampling{
			{Temperature: 1, TopP: 0.9, Seed: 1},
			{Temperature: 0.7, TopK: 40, MinP: 0.05, Seed: 2},
			{Temperature: 1, Seed: 3},
			{RepeatPenalty: 1.3},
		} {
			for range 2 { // the second request finds the runner usable
				_, err := generateWithin(t, r, Request{Prompt: "Once upon a time", MaxTokens: 8, Sampling: s, Drafting: Drafting{PMin: -1}})
				if !errors.Is(err, sample.ErrNonFinite) {
					t.Errorf("%s, %+v: err = %v, want sample.ErrNonFinite", name, s, err)
				}
			}
		}
		// Sampling at a temperature alone on the heads' softmax rows (a
		// GPU's path, forced here): the rows come back NaN, the same error.
		r.probs = true
		if d, ok := r.draft.(*modelDrafter); ok {
			d.probs = true
		}
		s := Sampling{Temperature: 1, Seed: 3}
		if _, err := generateWithin(t, r, Request{Prompt: "Once upon a time", MaxTokens: 8, Sampling: s, Drafting: Drafting{PMin: -1}}); !errors.Is(err, sample.ErrNonFinite) {
			t.Errorf("%s, %+v on the head: err = %v, want sample.ErrNonFinite", name, s, err)
		}
	}
}

// Settings that once made the sampler loop (a repeat penalty of 1e-40 with
// top-p) or repeat the last vocabulary token (a temperature of 1e-300) are
// clamped: the request completes, a tiny temperature gives the greedy
// output, and the next ordinary request is served.
func TestHostileSamplingSettings(t *testing.T) {
	r := load(t, Config{Target: modelPath(t, "factory-target-F16.gguf")})
	req := Request{Prompt: "Once upon a time", MaxTokens: 8, IgnoreEOS: true}
	greedy, err := generateWithin(t, r, req)
	if err != nil {
		t.Fatal(err)
	}
	var want []int32
	req2 := req
	emitIDs := func(ids *[]int32) func(Event) {
		return func(e Event) { *ids = append(*ids, e.IDs...) }
	}
	if _, err := r.Generate(context.Background(), req2, emitIDs(&want)); err != nil {
		t.Fatal(err)
	}
	for _, s := range []Sampling{
		{Temperature: 1, RepeatPenalty: 1e-40, TopP: 0.9},
		{Temperature: 1, RepeatPenalty: math.Inf(1), TopP: 0.9},
		{Temperature: math.Inf(1), PresencePenalty: math.NaN(), MinP: math.Inf(1)},
	} {
		req := req
		req.Sampling = s
		st, err := generateWithin(t, r, req)
		if err != nil || st.GeneratedTokens != 8 {
			t.Errorf("%+v: %d tokens, %v", s, st.GeneratedTokens, err)
		}
	}
	for _, temp := range []float64{1e-300, 5e-324} {
		var got []int32
		req := req
		req.Sampling = Sampling{Temperature: temp, TopP: 0.9, Seed: 7}
		done := make(chan error, 1)
		go func() {
			_, err := r.Generate(context.Background(), req, emitIDs(&got))
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(time.Minute):
			t.Fatal("still running after a minute")
		}
		if !slices.Equal(got, want) {
			t.Errorf("temperature %g gave %v, greedy gives %v", temp, got, want)
		}
	}
	if st, err := generateWithin(t, r, req); err != nil || st.GeneratedTokens != greedy.GeneratedTokens {
		t.Errorf("the next ordinary request: %d tokens, %v", st.GeneratedTokens, err)
	}
}
