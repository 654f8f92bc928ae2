package engine

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/cuda"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// One device is a one-device plan: the runner reports it, and what the
// backend holds after loading and after generating is the plan's
// allocations within 0.5% (to the byte on the CPU; the GPU's context is
// the plan's overhead, outside the backend), for the target alone, with
// a draft model and with an EAGLE-3 draft, and with a draft model for 4
// parallel sequences (a KV slot each for the draft on the CPU, where the
// batch drafts, one on a GPU, where it does not).
func TestSingleDevicePlan(t *testing.T) {
	target := modelPath(t, "factory-target-F16.gguf")
	for _, tc := range []struct {
		name     string
		draft    string
		parallel int
	}{
		{"target", "", 0},
		{"draft model", modelPath(t, "factory-draft-Q8_0.gguf"), 0},
		{"EAGLE-3", modelPath(t, "factory-eagle3-F16.gguf"), 0},
		{"draft model, 4 at once", modelPath(t, "factory-draft-Q8_0.gguf"), 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := load(t, Config{Target: target, Draft: tc.draft, Context: 512, Parallel: tc.parallel})
			p := r.Plan()
			if p == nil || len(p.Devices) != 1 || !p.Fits || p.Ctx != 512 || (p.Draft != nil) != (tc.draft != "") {
				t.Fatalf("plan %+v", p)
			}
			if tc.parallel > 1 {
				slots := tc.parallel
				if *backend != "cpu" {
					slots = 1
				}
				if got := r.draft.(*modelDrafter).seq.m.Slots(); got != slots || r.target.m.Slots() != tc.parallel {
					t.Errorf("%d at once on %s: the target holds %d KV slots, the draft %d; want %d and %d",
						tc.parallel, *backend, r.target.m.Slots(), got, tc.parallel, slots)
				}
			}
			b := p.Devices[0]
			check := func(when string) {
				held := r.DeviceUsage()[b.Device.Index]
				for _, c := range []struct {
					owner string
					u     plan.Usage
				}{{"target", b.Target}, {"draft", b.Draft}} {
					for _, cat := range []struct {
						cat  kernels.Category
						want int64
					}{
						{kernels.Weights, c.u.Weights}, {kernels.Embedding, c.u.Embedding}, {kernels.Head, c.u.Head},
						{kernels.KV, c.u.KV}, {kernels.Scratch, c.u.Scratch},
					} {
						got := held[kernels.Label{Owner: c.owner, Cat: cat.cat}]
						if !within(got, cat.want, 0.005) {
							t.Errorf("%s: %s %v: holds %d bytes, plan %d", when, c.owner, cat.cat, got, cat.want)
						}
					}
				}
				got, want := held.Total(), b.Total()-b.Overhead
				t.Logf("%s on %s: holds %d bytes, plan %d (%+.4f%%)", when, b.Device.Label(), got, want, 100*float64(got-want)/float64(want))
				if !within(got, want, 0.005) {
					t.Errorf("%s: the device holds %d bytes, the plan %d", when, got, want)
				}
			}
			check("after load")
			if _, err := r.Generate(context.Background(), Request{Prompt: "In the beginning", MaxTokens: 64, IgnoreEOS: true}, nil); err != nil {
				t.Fatal(err)
			}
			check("after generating")
		})
	}
}

// within reports whether got is want within a fraction tol of it.
func within(got, want int64, tol float64) bool {
	d := float64(got - want)
	return d <= tol*float64(want) && -d <= tol*float64(want)
}

// BenchmarkWindowPath compares greedy decode as the window runs it — the
// plan the window makes for a target dragged onto one device of its
// inventory (the GPUs the driver lists, or the host), loaded as planned,
// and Generate with greedy sampling — with `tandem bench`'s decode
// (Runner.Decode on the one device of Backend), in one process, and
// reports both and their ratio. The target is -engine.bench-model
// (default: the F16 demo target); packaging/gpu-engine.sh runs it on the
// H200 for synthetic Qwen3 shapes.
func BenchmarkWindowPath(b *testing.B) {
	target := *benchModel
	if target == "" {
		target = sharedtest.Path(b, "models", "factory-target-F16.gguf")
	}
	const prefill, decode = 512, 128
	f, err := gguf.Open(target)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	// The window's inventory: the GPUs, then the host.
	host := device.Host()
	inv := []device.Device{host}
	if *backend == "cuda" {
		infos, err := cuda.Devices()
		if err != nil {
			b.Fatal(err)
		}
		inv = inv[:0]
		for _, info := range infos {
			inv = append(inv, device.Device{Index: info.Ordinal, Name: info.Name, Kind: device.CUDA, MemoryTotal: uint64(info.TotalMemory)})
		}
		host.Index = len(inv)
		inv = append(inv, host)
	}
	kv, err := plan.ParseKVTypes("", "")
	if err != nil {
		b.Fatal(err)
	}
	window, err := plan.Make(plan.Input{Target: f, Devices: inv, KV: kv, TargetPlacement: plan.Placement{Devices: []int{inv[0].Index}}})
	if err != nil {
		b.Fatal(err)
	}
	var benchTokS, windowTokS []float64
	for b.Loop() {
		// tandem bench: -p 512 -n 128 on --backend, its context the larger.
		r, err := Load(context.Background(), Config{Target: target, Backend: *backend, Context: prefill}, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.Decode(context.Background(), 1, 0, 8); err != nil { // compile and capture
			b.Fatal(err)
		}
		start := b.Elapsed()
		if _, err := r.Decode(context.Background(), 1, 0, decode); err != nil {
			b.Fatal(err)
		}
		benchTokS = append(benchTokS, decode/(b.Elapsed()-start).Seconds())
		r.Close()

		w, err := Load(context.Background(), Config{Target: target, Plan: window}, nil)
		if err != nil {
			b.Fatal(err)
		}
		req := Request{Prompt: "In the beginning", MaxTokens: decode, IgnoreEOS: true}
		if _, err := w.Generate(context.Background(), Request{Prompt: req.Prompt, MaxTokens: 8, IgnoreEOS: true}, nil); err != nil {
			b.Fatal(err)
		}
		st, err := w.Generate(context.Background(), req, nil)
		if err != nil {
			b.Fatal(err)
		}
		windowTokS = append(windowTokS, st.DecodeTokS())
		w.Close()
	}
	bm, wm := median(benchTokS), median(windowTokS)
	b.ReportMetric(bm, "bench_tok/s")
	b.ReportMetric(wm, "window_tok/s")
	b.ReportMetric(wm/bm, "window/bench")
	fmt.Printf("WINDOWPATH %s: bench %.1f tok/s, window %.1f tok/s, window/bench %.3f (plan: %s, context %d)\n",
		target, bm, wm, wm/bm, window.Devices[0].Device.Label(), window.Ctx)
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
