package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/engine/plan"
)

// virtualCPUs parses a spec of CPU virtual devices; with -engine.backend=cuda
// they become virtual devices of the same sizes on GPU 0.
func virtualCPUs(t testing.TB, spec string) []device.Device {
	t.Helper()
	if *backend == "cuda" {
		spec = strings.ReplaceAll(spec, "cpu:", "cuda0:")
	}
	inv, err := device.ParseVirtual(spec)
	if err != nil {
		t.Fatal(err)
	}
	return inv.Devices
}

// The demo pair on CPU virtual devices, the draft on a device of its own,
// generates the oracle's greedy continuation, and each device holds what
// the plan says.
func TestPlacedPairIsTheTargets(t *testing.T) {
	prompts := loadOracle(t)
	devs := virtualCPUs(t, "cpu:256MiB,cpu:256MiB,cpu:256MiB")
	for _, tc := range []struct {
		name   string
		target plan.Placement
	}{
		{"target by layers on 0-1, draft on 2", plan.Placement{Devices: []int{0, 1}, Ratios: []float64{1, 3}}},
		{"target by tensors on 0-1, head split, draft on 2", plan.Placement{Devices: []int{0, 1}, Split: plan.SplitTensor, Head: plan.HeadSplit}},
		{"target by tensors on 0-1, head replicated, draft on 2", plan.Placement{Devices: []int{0, 1}, Split: plan.SplitTensor, Head: plan.HeadReplicated}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Load(context.Background(), Config{
				Target: modelPath(t, "factory-target-F16.gguf"), Draft: modelPath(t, "factory-draft-Q8_0.gguf"),
				DraftMax: 4, DraftPMin: -1, Context: 256,
				Placement: &Placement{Devices: devs, Target: tc.target, Draft: plan.Placement{Devices: []int{2}}, Batch: 64},
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			one := load(t, Config{Target: modelPath(t, "factory-target-F16.gguf"), Context: 256})
			for i, p := range prompts[:3] {
				var got, want []int32
				st, err := r.Generate(context.Background(), Request{Prompt: p.Text, MaxTokens: 24, IgnoreEOS: true},
					func(e Event) { got = append(got, e.IDs...) })
				if err != nil {
					t.Fatal(err)
				}
				if _, err := one.Generate(context.Background(), Request{Prompt: p.Text, MaxTokens: 24, IgnoreEOS: true},
					func(e Event) { want = append(want, e.IDs...) }); err != nil {
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
				if d := float64(got-want) / float64(want); d < -0.03 || d > 0.03 {
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
		Target: modelPath(t, "factory-target-Q8_0.gguf"), Context: 256,
		Placement: &Placement{Devices: virtualCPUs(t, "cpu:6MiB,cpu:12MiB"), Target: plan.Placement{Devices: []int{0, 1}, Ratios: []float64{1, 1}}},
	}, nil)
	if !errors.Is(err, ErrNoFit) || !strings.Contains(err.Error(), "over by") {
		t.Fatalf("got %v, want the planner's refusal", err)
	}
	t.Log(err)
}
