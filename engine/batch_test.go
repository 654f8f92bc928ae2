package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
)

// collect runs req on r and returns the ids it emitted and its statistics.
func collect(ctx context.Context, r *Runner, req Request, onToken func()) ([]int32, Stats, error) {
	var ids []int32
	st, err := r.Generate(ctx, req, func(e Event) {
		if e.Kind == EventToken {
			ids = append(ids, e.IDs...)
			if onToken != nil {
				onToken()
			}
		}
	})
	return ids, st, err
}

// Twice as many greedy requests as slots, sent at once to a runner of the
// demo pair that decodes 3 together, every other one drafting 3 tokens a
// step: each must be the target's own greedy output from transformers,
// whichever requests it shared passes with. Padded, every step runs every
// slot with the widest sequence's rows, as on a GPU. On a GPU (the
// -engine.backend flag) a batch is not drafted (ReasonBatchedGPU).
func TestParallelIsSoloGreedy(t *testing.T) {
	for _, pad := range []bool{false, true} {
		t.Run(fmt.Sprintf("padded=%v", pad), func(t *testing.T) { parallelIsSoloGreedy(t, pad) })
	}
}

func parallelIsSoloGreedy(t *testing.T, pad bool) {
	prompts := loadOracle(t)
	r := load(t, Config{Target: modelPath(t, "factory-target-F16.gguf"), Draft: modelPath(t, "factory-draft-Q8_0.gguf"),
		Context: 256, Parallel: 3, padBatch: pad})
	type result struct {
		ids []int32
		st  Stats
		err error
	}
	got := make([]result, 2*len(prompts))
	var wg sync.WaitGroup
	for i := range got {
		p := prompts[i%len(prompts)]
		wg.Go(func() {
			req := Request{PromptIDs: p.IDs, MaxTokens: len(p.Target.Greedy), IgnoreEOS: true}
			if i%2 == 1 {
				req.Drafting = Drafting{Max: 3, Min: 3}
			}
			ids, st, err := collect(context.Background(), r, req, nil)
			got[i] = result{ids, st, err}
		})
	}
	wg.Wait()
	for i, g := range got {
		want := prompts[i%len(prompts)].Target.Greedy
		switch {
		case g.err != nil:
			t.Errorf("request %d: %v", i, g.err)
		case !slices.Equal(g.ids, want):
			t.Errorf("request %d:\n got %v\nwant %v", i, g.ids, want)
		case g.st.FinishReason != "length" || g.st.GeneratedTokens != len(want) || g.st.Steps > len(want):
			t.Errorf("request %d: finish %q, %d tokens in %d steps, want length, %d in at most %d", i, g.st.FinishReason, g.st.GeneratedTokens, g.st.Steps, len(want), len(want))
		case i%2 == 1 && r.batch.gpu && (g.st.Drafted != 0 || g.st.DraftOff != ReasonBatchedGPU):
			t.Errorf("request %d on a GPU: drafted %d, drafting off %q; want none, %q", i, g.st.Drafted, g.st.DraftOff, ReasonBatchedGPU)
		case i%2 == 1 && !r.batch.gpu && (g.st.Drafted < g.st.Steps || g.st.Accepted == 0 || g.st.Steps+g.st.Accepted != len(want)):
			t.Errorf("request %d drafting 3: %d steps, drafted %d, accepted %d", i, g.st.Steps, g.st.Drafted, g.st.Accepted)
		}
	}
}

// Sampled requests, each with its own seed and settings, decoded together
// with greedy ones, are each what the request gives alone on a runner of
// one sequence.
func TestParallelSampledIsSolo(t *testing.T) {
	prompts := loadOracle(t)[:4]
	target := modelPath(t, "factory-target-F16.gguf")
	solo := load(t, Config{Target: target, Context: 128})
	together := load(t, Config{Target: target, Context: 128, Parallel: 4})
	reqs := make([]Request, len(prompts))
	for i, p := range prompts {
		reqs[i] = Request{PromptIDs: p.IDs, MaxTokens: 24, IgnoreEOS: true}
		if i%2 == 1 {
			reqs[i].Sampling = Sampling{Temperature: 0.9, TopK: 40, Seed: uint64(7 + i)}
		}
		if i == 3 {
			reqs[i].Sampling.RepeatPenalty = 1.3
		}
	}
	want := make([][]int32, len(reqs))
	for i, req := range reqs {
		ids, _, err := collect(context.Background(), solo, req, nil)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = ids
	}
	got := make([][]int32, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Go(func() { got[i], _, errs[i] = collect(context.Background(), together, req, nil) })
	}
	wg.Wait()
	for i := range reqs {
		if errs[i] != nil || !slices.Equal(got[i], want[i]) {
			t.Errorf("request %d (%+v): %v\n got %v\nwant %v", i, reqs[i].Sampling, errs[i], got[i], want[i])
		}
	}
}

// A request cancelled mid-generation stops at once and frees its slot for
// a request waiting for one; a request cancelled while it waits for a
// slot leaves; the others are unharmed.
func TestParallelCancel(t *testing.T) {
	prompts := loadOracle(t)
	r := load(t, Config{Target: modelPath(t, "factory-target-F16.gguf"), Context: 256, Parallel: 2})
	long := Request{PromptIDs: prompts[0].IDs, MaxTokens: 200, IgnoreEOS: true}

	// Two long requests fill the slots; the first is cancelled after 5
	// tokens, the second runs on.
	ctx1, cancel1 := context.WithCancel(context.Background())
	defer cancel1()
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	started := make(chan struct{}, 2)
	var n1 int
	var wg sync.WaitGroup
	var st1, st2 Stats
	var err1, err2 error
	wg.Go(func() {
		_, st1, err1 = collect(ctx1, r, long, func() {
			if n1++; n1 == 1 {
				started <- struct{}{}
			}
			if n1 == 5 {
				cancel1()
			}
		})
	})
	n2 := 0
	wg.Go(func() {
		_, st2, err2 = collect(ctx2, r, long, func() {
			if n2++; n2 == 1 {
				started <- struct{}{}
			}
		})
	})
	<-started
	<-started
	// A request that waits for a slot and gives up.
	ctx3, cancel3 := context.WithCancel(context.Background())
	cancel3()
	if ids, st, err := collect(ctx3, r, long, nil); err != nil || st.FinishReason != "cancelled" || len(ids) != 0 {
		t.Errorf("cancelled while waiting: %v, finish %q, %d tokens", err, st.FinishReason, len(ids))
	}
	// A request that gets the first one's slot and is the target's own.
	p := prompts[1]
	ids, st, err := collect(context.Background(), r, Request{PromptIDs: p.IDs, MaxTokens: len(p.Target.Greedy), IgnoreEOS: true}, nil)
	if err != nil || !slices.Equal(ids, p.Target.Greedy) {
		t.Errorf("after the cancellation: %v, %v\nwant %v (%+v)", err, ids, p.Target.Greedy, st)
	}
	cancel2()
	wg.Wait()
	if err1 != nil || st1.FinishReason != "cancelled" || st1.GeneratedTokens < 5 || st1.GeneratedTokens >= 100 {
		t.Errorf("cancelled after 5 tokens: %v, finish %q after %d tokens", err1, st1.FinishReason, st1.GeneratedTokens)
	}
	if err2 != nil || st2.FinishReason != "cancelled" {
		t.Errorf("second: %v, finish %q", err2, st2.FinishReason)
	}
	// The runner is whole afterwards.
	ids, _, err = collect(context.Background(), r, Request{PromptIDs: p.IDs, MaxTokens: 8, IgnoreEOS: true}, nil)
	if err != nil || !slices.Equal(ids, p.Target.Greedy[:8]) {
		t.Errorf("afterwards: %v, %v", err, ids)
	}
}

// A head-sharing draft reads the target's states of one sequence: a runner
// of several is refused with it, not loaded wrong.
func TestParallelRefusesEagle3(t *testing.T) {
	_, err := Load(context.Background(), Config{Target: modelPath(t, "factory-target-F16.gguf"),
		Draft: modelPath(t, "factory-eagle3-F16.gguf"), Context: 128, Parallel: 2, Backend: *backend}, nil)
	if err == nil {
		t.Fatal("loaded")
	}
}

// The demo pair as the window bundles it (Q4_K_M target, Q8_0 draft),
// twice as many greedy requests as its 8 slots: each is what the runner of
// one sequence, drafting, generates for it alone. On the CPU every row's
// logits are the same whatever the pass's shape. CUDA's kernels round
// differently for different numbers of rows, and this target's greedy
// text has near ties: on the H200 even one request at a time, drafting,
// gave 9 of 32 streams other text than alone, so there the check is
// serveload's (F16 target: a stream that turns at a near tie, or one
// that follows another prompt's text).
// Padded, the batch runs as on a GPU: every slot, the widest sequence's
// rows, the draft's first pass two rows a slot where drafts were all kept.
func TestParallelDemoPair(t *testing.T) {
	if *backend != "cpu" {
		t.Skip("exact only where the rounding does not follow the pass's shape (the CPU)")
	}
	for _, pad := range []bool{false, true} {
		t.Run(fmt.Sprintf("padded=%v", pad), func(t *testing.T) { parallelDemoPair(t, pad) })
	}
}

func parallelDemoPair(t *testing.T, pad bool) {
	cfg := Config{Target: modelPath(t, "factory-target-Q4_K_M.gguf"), Draft: modelPath(t, "factory-draft-Q8_0.gguf"), Context: 256}
	solo := load(t, cfg)
	cfg.Parallel, cfg.padBatch = 8, pad
	together := load(t, cfg)
	const distinct, tokens = 8, 32
	want := make([][]int32, distinct)
	drafted := 0
	for i := range want {
		ids, st, err := collect(context.Background(), solo, Request{Prompt: fmt.Sprintf("Chapter %d.", i+1), MaxTokens: tokens, IgnoreEOS: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		want[i], drafted = ids, drafted+st.Drafted
	}
	if drafted == 0 {
		t.Error("the solo runner never drafted")
	}
	got := make([][]int32, 2*distinct)
	stats := make([]Stats, len(got))
	errs := make([]error, len(got))
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			got[i], stats[i], errs[i] = collect(context.Background(), together, Request{Prompt: fmt.Sprintf("Chapter %d.", i%distinct+1), MaxTokens: tokens, IgnoreEOS: true}, nil)
		})
	}
	wg.Wait()
	drafted = 0
	for i := range got {
		drafted += stats[i].Drafted
		if errs[i] != nil || !slices.Equal(got[i], want[i%distinct]) {
			t.Errorf("request %d: %v\n got %v\nwant %v", i, errs[i], got[i], want[i%distinct])
		}
	}
	// The batch measures each draft length before it settles on one.
	if drafted == 0 {
		t.Error("the batch never drafted")
	}
}

// TestParallelOnGPUIsNotDrafted: a batch whose target runs on a GPU is
// decoded without drafts, says why, and still gives each request its solo
// output (here on the CPU, with the batch marked as a GPU's).
func TestParallelOnGPUIsNotDrafted(t *testing.T) {
	cfg := Config{Target: modelPath(t, "factory-target-Q4_K_M.gguf"), Draft: modelPath(t, "factory-draft-Q8_0.gguf"), Context: 256}
	solo := load(t, cfg)
	cfg.Parallel = 4
	together := load(t, cfg)
	together.batch.gpu = true
	req := Request{Prompt: "Chapter 3.", MaxTokens: 24, IgnoreEOS: true}
	want, _, err := collect(context.Background(), solo, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := make([][]int32, 4)
	stats := make([]Stats, len(got))
	errs := make([]error, len(got))
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() { got[i], stats[i], errs[i] = collect(context.Background(), together, req, nil) })
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil || !slices.Equal(got[i], want) {
			t.Errorf("request %d: %v\n got %v\nwant %v", i, errs[i], got[i], want)
		}
		if stats[i].Drafted != 0 || stats[i].DraftOff != ReasonBatchedGPU {
			t.Errorf("request %d: drafted %d, drafting off %q; want none, %q", i, stats[i].Drafted, stats[i].DraftOff, ReasonBatchedGPU)
		}
	}
}
