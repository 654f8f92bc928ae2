package engine

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tandem-run/tandem/engine/plan"
)

// Greedy and sampled requests drafting several lengths, one after another
// in several orders (each request over three prompts on a GPU), on the
// demo pair with the target split by tensors over two devices (head
// split) and the draft on a third: every request finishes, each greedy
// one with the target's own greedy output, and a sampled one with all its
// tokens. The first orders load with the warm-up, whose sweep is greedy
// rounds and then sampled ones, the EAGLE-3 and DFlash drafts first; the
// fourth is the order that hung on the H200's virtual devices
// (closing6.md): the sampled round after greedy rounds of 5 and 9 rows
// waited 20 s in an all-reduce, then a launch failed and the context with
// it. On main that hang came in fresh processes only now and then; after
// the tests of the EAGLE-3 and DFlash drafts' layouts it came in the
// warm-up of the model draft's (kernels/cuda/NOTES.md, hsplit). A
// watchdog fails a load or request that does not finish, with the
// goroutines' stacks (the device thread's shows the driver call it waits
// in), rather than letting it hang the test binary.
func TestPlacedTensorSplitMixedRequests(t *testing.T) {
	prompts := loadOracle(t)
	target := placedTargetPath(t)
	devs := virtualCPUs(t, "cpu:256MiB,cpu:256MiB,cpu:256MiB")
	one := load(t, Config{Target: target, Context: 256})
	// limit bounds a load (its warm-up) or a request: on a GPU well
	// under the 20 s an all-reduce waits before it traps, so that a hang
	// shows where the host waits (the kernels' first compilation, which
	// can take half a minute, comes with the first load, one's); on the
	// CPU far above the slowest run seen.
	limit := 5 * time.Minute
	// On the CPU the split sums through the host, with no reduce group:
	// one prompt a request keeps the test cheap there.
	ps := prompts[:1]
	if *backend == "cuda" {
		limit, ps = 15*time.Second, prompts[:3]
	}
	type req struct {
		temp float64
		k    int
	}
	g := func(k int) req { return req{0, k} }
	s := func(k int) req { return req{0.7, k} }
	q8, eagle3 := modelPath(t, "factory-draft-Q8_0.gguf"), modelPath(t, "factory-eagle3-F16.gguf")
	for _, order := range []struct {
		name  string
		draft string
		warm  bool
		reqs  []req
	}{
		{"EAGLE-3, warmed up, greedy 4, sampled 1, greedy 8", eagle3, true, []req{g(4), s(1), g(8)}},
		{"DFlash, warmed up, sampled 4, greedy 4", dflashPath("F16"), true, []req{s(4), g(4)}},
		{"warmed up, sampled 1, greedy 8, sampled 4", q8, true, []req{s(1), g(8), s(4)}},
		{"greedy 4, greedy 8, sampled 1", q8, false, []req{g(4), g(8), s(1)}},
		{"sampled 1, greedy 8, sampled 4, greedy 4", q8, false, []req{s(1), g(8), s(4), g(4)}},
		{"sampled 8, greedy 1, sampled 1, greedy 8, sampled 4", q8, false, []req{s(8), g(1), s(1), g(8), s(4)}},
	} {
		t.Run(order.name, func(t *testing.T) {
			cfg := Config{
				Target: target, Draft: order.draft, Context: 256, Batch: 64, WarmUp: -1,
				Placement: &Placement{Devices: devs, Target: plan.Placement{Devices: []int{0, 1}, Split: plan.SplitTensor, Head: plan.HeadSplit},
					Draft: plan.Placement{Devices: []int{2}}},
			}
			if order.warm {
				cfg.WarmUp = 0
			}
			var r *Runner
			if !finishes(t, limit, "load", func(ctx context.Context) (err error) {
				r, err = Load(ctx, cfg, nil)
				return err
			}) {
				return
			}
			hung := false
			defer func() {
				if !hung { // a hung device thread would hold Close up too
					r.Close()
				}
			}()
			for i, q := range order.reqs {
				for j, p := range ps {
					rq := Request{Prompt: p.Text, MaxTokens: 24, IgnoreEOS: true, Drafting: Drafting{Max: q.k, Min: q.k, PMin: -1}}
					rq.Sampling.Temperature, rq.Sampling.Seed = q.temp, uint64(i+1)
					what := fmt.Sprintf("request %d (T=%v, k=%d), prompt %d", i, q.temp, q.k, j)
					var got []int32
					if !finishes(t, limit, what, func(ctx context.Context) (err error) {
						got, _, err = collect(ctx, r, rq, nil)
						return err
					}) {
						hung = true
						return
					}
					if len(got) != rq.MaxTokens {
						t.Errorf("%s: %d tokens, want %d", what, len(got), rq.MaxTokens)
					}
					if q.temp > 0 {
						continue
					}
					rq.Drafting = Drafting{}
					want, _, err := collect(context.Background(), one, rq, nil)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(got, want) {
						t.Errorf("%s:\n got %v\nwant %v", what, got, want)
					}
				}
			}
		})
	}
}

// finishes runs f with a context that ends after limit and reports
// whether it returned: an error fails the test, and so does a call still
// running limit and a few seconds later, whose goroutines' stacks (this
// module's) are logged. The stuck call is left running.
func finishes(t *testing.T, limit time.Duration, what string, f func(ctx context.Context) error) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return true
	case <-time.After(limit + 3*time.Second):
	}
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var ours []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "tandem-run/tandem/") && !strings.Contains(g, "engine.finishes(") {
			ours = append(ours, g)
		}
	}
	t.Errorf("%s: still running %v after its deadline: a hang. Goroutines:\n%s", what, limit+3*time.Second, strings.Join(ours, "\n\n"))
	return false
}
