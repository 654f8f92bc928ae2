package main

import (
	"context"
	"testing"

	"github.com/tandem-run/tandem/engine"
)

// A target whose vocabulary runs past its draft's (8448 against the demo
// draft's 8192 here, 151,936 against it at the real shapes) verifies
// sampled drafts: the draft's distributions end where its vocabulary does,
// and its tokens past that end count as never drafted. (The verifier once
// read past their end: sampled speculation on the H200 panicked.) Drafted
// by a model and by prompt lookup (one-hot distributions), fixed lengths.
func TestSampledDraftShorterVocabulary(t *testing.T) {
	target := inflateTo(t, demo(t, "factory-target-F16.gguf"), ciShape, "ci", "F16", t.TempDir())
	for _, c := range []struct {
		name string
		cfg  engine.Config
	}{
		{"draft Q8_0", engine.Config{Target: target, Draft: demo(t, "factory-draft-Q8_0.gguf"), Backend: *backend, Context: 256}},
		{"lookup", engine.Config{Target: target, Lookup: true, Backend: *backend, Context: 256}},
	} {
		r, err := engine.Load(context.Background(), c.cfg, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		defer r.Close()
		for seed := range uint64(3) {
			st, err := r.Generate(context.Background(), engine.Request{
				Prompt: "In the beginning God created the heaven and the earth. In the beginning God", MaxTokens: 24,
				Sampling: engine.Sampling{Temperature: 0.7, Seed: seed},
				Drafting: engine.Drafting{Max: 4, Min: 4, PMin: -1},
			}, nil)
			if err != nil || st.GeneratedTokens == 0 {
				t.Errorf("%s, seed %d: %+v, %v", c.name, seed, st, err)
			}
			if c.name != "lookup" && st.Drafted == 0 {
				t.Errorf("%s, seed %d: nothing drafted", c.name, seed)
			}
			t.Logf("%s, seed %d: drafted %d, accepted %d", c.name, seed, st.Drafted, st.Accepted)
		}
	}
}
