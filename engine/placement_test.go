package engine

import (
	"context"
	"errors"
	"flag"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/engine/sample"
)

// gpus spreads the placement tests' virtual devices over GPUs: on two,
// packaging/multigpu.sh runs them with -engine.gpus=0,1,1 and 0,1,0.
var gpus = flag.String("engine.gpus", "0", "with -engine.backend=cuda, the GPUs the placement tests' virtual devices take in turn, e.g. 0,1")

// virtualCPUs parses a spec of CPU virtual devices; with -engine.backend=cuda
// they become virtual devices of the same sizes on the GPUs of -engine.gpus.
func virtualCPUs(t testing.TB, spec string) []device.Device {
	t.Helper()
	if *backend == "cuda" {
		spec = onGPUs(spec, *gpus)
	}
	inv, err := device.ParseVirtual(spec)
	if err != nil {
		t.Fatal(err)
	}
	return inv.Devices
}

// onGPUs moves the CPU devices of a virtual-device spec onto GPUs: item i
// onto ordinals[i % len], ordinals a comma-separated list such as "0,1".
func onGPUs(spec, ordinals string) string {
	ords := strings.Split(ordinals, ",")
	items := strings.Split(spec, ",")
	for i, item := range items {
		items[i] = strings.Replace(item, "cpu:", "cuda"+strings.TrimSpace(ords[i%len(ords)])+":", 1)
	}
	return strings.Join(items, ",")
}

func TestOnGPUs(t *testing.T) {
	for _, c := range []struct {
		ordinals string
		want     []int
	}{
		{"0", []int{0, 0, 0}},
		{"0,1", []int{0, 1, 0}},
		{"1, 0,0", []int{1, 0, 0}},
	} {
		inv, err := device.ParseVirtual(onGPUs("cpu:1GiB,cpu:2GiB,cpu:3GiB", c.ordinals))
		if err != nil {
			t.Fatal(err)
		}
		for i, d := range inv.Devices {
			if d.Kind != device.CUDA || d.Physical != c.want[i] || d.MemoryTotal != uint64(i+1)<<30 {
				t.Errorf("GPUs %q: device %d is %s %d (%d bytes), want cuda %d", c.ordinals, i, d.Kind, d.Physical, d.MemoryTotal, c.want[i])
			}
		}
	}
	if _, err := device.ParseVirtual(onGPUs("cpu:1GiB", "x")); err == nil {
		t.Error("a GPU list that is not numbers was accepted")
	}
}

// The demo pair on CPU virtual devices, the draft on a device of its own,
// generates the oracle's greedy continuation, and each device holds what
// the plan says.
func TestPlacedPairIsTheTargets(t *testing.T) {
	prompts := loadOracle(t)
	target := placedTargetPath(t)
	devs := virtualCPUs(t, "cpu:256MiB,cpu:256MiB,cpu:256MiB")
	for _, tc := range []struct {
		name   string
		target plan.Placement
	}{
		{"target on 0, draft on 2", plan.Placement{Devices: []int{0}}},
		{"target by layers on 0-1, draft on 2", plan.Placement{Devices: []int{0, 1}, Ratios: []float64{1, 3}}},
		{"target by tensors on 0-1, head split, draft on 2", plan.Placement{Devices: []int{0, 1}, Split: plan.SplitTensor, Head: plan.HeadSplit}},
		{"target by tensors on 0-1, head replicated, draft on 2", plan.Placement{Devices: []int{0, 1}, Split: plan.SplitTensor, Head: plan.HeadReplicated}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Load(context.Background(), Config{
				Target: target, Draft: modelPath(t, "factory-draft-Q8_0.gguf"),
				Context: 256, Batch: 64,
				Placement: &Placement{Devices: devs, Target: tc.target, Draft: plan.Placement{Devices: []int{2}}},
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			one := load(t, Config{Target: target, Context: 256})
			for i, p := range prompts[:3] {
				req := Request{Prompt: p.Text, MaxTokens: 24, IgnoreEOS: true}
				want, _, err := collect(context.Background(), one, req, nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Drafting = Drafting{Max: 4, Min: 4, PMin: -1}
				got, st, err := collect(context.Background(), r, req, nil)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want) {
					t.Errorf("prompt %d:\n got %v\nwant %v", i, got, want)
				}
				if st.Accepted == 0 {
					t.Errorf("prompt %d: no drafted token accepted", i)
				}
			}
			held := r.DeviceUsage()
			for _, b := range r.Plan().Devices {
				u := held[b.Device.Index]
				got, want := u.Total(), b.Total()
				t.Logf("device %d (%s): holds %d bytes, plan %d", b.Device.Index, b.Device.Label(), got, want)
				if d := float64(got-want) / float64(want); d < -0.005 || d > 0.005 {
					t.Errorf("device %d holds %d bytes, plan %d", b.Device.Index, got, want)
				}
				if b.Device.Index == 2 && (u.Of("target") != 0 || u.Of("draft") == 0) {
					t.Errorf("device 2 holds %d target and %d draft bytes; want the draft alone", u.Of("target"), u.Of("draft"))
				}
			}
		})
	}
}

// A placement over its caps is the planner's refusal, with its reason and
// suggestions, and nothing is allocated.
func TestPlacementOverBudgetRefused(t *testing.T) {
	_, err := Load(context.Background(), Config{
		Target: modelPath(t, "factory-target-Q4_K_M.gguf"), Context: 256,
		Placement: &Placement{Devices: virtualCPUs(t, "cpu:4MiB,cpu:6MiB"), Target: plan.Placement{Devices: []int{0, 1}, Ratios: []float64{1, 1}}},
	}, nil)
	if !errors.Is(err, ErrNoFit) || !strings.Contains(err.Error(), "over by") {
		t.Fatalf("got %v, want the planner's refusal", err)
	}
	t.Log(err)
}

// A plan for simulated GPUs (hardware one does not have) is shown, never
// loaded: Load refuses it before opening a backend.
func TestSimulatedPlanRefused(t *testing.T) {
	inv, err := device.ParseSimulated("rtx4090,rtx4090")
	if err != nil {
		t.Fatal(err)
	}
	target := modelPath(t, "factory-target-Q4_K_M.gguf")
	f, err := gguf.Open(target)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := plan.Make(plan.Input{Target: f, Devices: inv.Devices, Ctx: 256, TargetPlacement: plan.Placement{Devices: []int{0, 1}}})
	if err != nil || !p.Fits {
		t.Fatalf("plan on two simulated 4090s: %v, %v", p, err)
	}
	_, err = Load(context.Background(), Config{Target: target, Plan: p}, nil)
	if err == nil || !strings.Contains(err.Error(), "simulated") {
		t.Fatalf("Load of a simulated plan: %v", err)
	}
}

// The target alone over two and three virtual devices, by layers with
// uneven ratios and by tensors with either head mode: greedy output and
// teacher-forced top-1 equal one device's, and logits agree within the
// engine's tolerance against the oracle (2e-3 of the largest): a tensor
// split adds partial attention outputs in another order, and with the F16
// KV cache attention accumulates in F16 as llama.cpp's does.
func TestPlacedTargetLayouts(t *testing.T) {
	prompts := loadOracle(t)
	target := placedTargetPath(t)
	devs := virtualCPUs(t, "cpu:256MiB,cpu:256MiB,cpu:256MiB")
	one := load(t, Config{Target: target, Context: 256})
	for _, tc := range []struct {
		name string
		tp   plan.Placement
	}{
		{"layers 2 devices 1:3", plan.Placement{Devices: []int{0, 1}, Ratios: []float64{1, 3}}},
		{"layers 3 devices 2:1:5", plan.Placement{Devices: []int{0, 1, 2}, Ratios: []float64{2, 1, 5}}},
		{"tensors 2 devices head split", plan.Placement{Devices: []int{0, 1}, Split: plan.SplitTensor, Head: plan.HeadSplit}},
		{"tensors 3 devices head split", plan.Placement{Devices: []int{0, 1, 2}, Split: plan.SplitTensor, Head: plan.HeadSplit}},
		{"tensors 3 devices head replicated", plan.Placement{Devices: []int{0, 1, 2}, Split: plan.SplitTensor, Head: plan.HeadReplicated}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := load(t, Config{Target: target, Context: 256, Batch: 64, Placement: &Placement{Devices: devs, Target: tc.tp}})
			for i, p := range prompts[:3] {
				var got, want []int32
				req := Request{Prompt: p.Text, MaxTokens: 24, IgnoreEOS: true}
				if _, err := r.Generate(context.Background(), req, func(e Event) { got = append(got, e.IDs...) }); err != nil {
					t.Fatal(err)
				}
				if _, err := one.Generate(context.Background(), req, func(e Event) { want = append(want, e.IDs...) }); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want) {
					t.Errorf("prompt %d greedy:\n got %v\nwant %v", i, got, want)
				}
				// Teacher-forced over prompt and continuation.
				seq := append(slices.Clone(p.IDs), p.Target.Greedy[:24]...)
				rows := make([]int, len(seq))
				for j := range rows {
					rows[j] = j
				}
				a, err := r.Forward(context.Background(), seq, 0, rows)
				if err != nil {
					t.Fatal(err)
				}
				a = slices.Clone(a)
				b, err := one.Forward(context.Background(), seq, 0, rows)
				if err != nil {
					t.Fatal(err)
				}
				vocab := len(a) / len(rows)
				for j := range rows {
					ra, rb := a[j*vocab:(j+1)*vocab], b[j*vocab:(j+1)*vocab]
					if sample.Argmax(ra) != sample.Argmax(rb) {
						t.Fatalf("prompt %d position %d: top-1 %d, one device %d", i, j, sample.Argmax(ra), sample.Argmax(rb))
					}
					scale := float64(0)
					for _, v := range rb {
						scale = max(scale, math.Abs(float64(v)))
					}
					for k := range ra {
						if d := math.Abs(float64(ra[k] - rb[k])); d > 2e-3*scale {
							t.Fatalf("prompt %d position %d logit %d: %v vs %v", i, j, k, ra[k], rb[k])
						}
					}
				}
			}
		})
	}
}
