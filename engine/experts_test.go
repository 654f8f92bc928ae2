package engine

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/engine/plan"
)

// TestPlacedExpertsOnCPU runs the qwen3moe fixture with its routed experts
// on a CPU device and the rest on a virtual device of -engine.backend (a
// GPU with -engine.backend=cuda, which needs no MoE kernel then): alone,
// with the demo draft, and with the fixture as its own draft whose experts
// are apart too, drafting 4 tokens every step, greedy output is the
// fixture's alone on one CPU device, and each device holds what the plan
// says, the CPU device the experts' bytes.
func TestPlacedExpertsOnCPU(t *testing.T) {
	prompts := loadOracle(t)
	target := filepath.Join("model", "testdata", "qwen3moe-tiny-F16.gguf")
	host, err := device.ParseVirtual("cpu:256MiB")
	if err != nil {
		t.Fatal(err)
	}
	cpu := host.Devices[0]
	cpu.Index = 1
	devs := append(virtualCPUs(t, "cpu:256MiB"), cpu)
	apart := plan.Placement{Devices: []int{0}, Experts: plan.ExpertsOnDevice, ExpertDevice: 1}
	alone, err := Load(context.Background(), Config{Target: target, Context: 256, Backend: "cpu"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer alone.Close()
	for _, tc := range []struct {
		name  string
		draft string
		place plan.Placement
	}{
		{"target alone", "", plan.Placement{}},
		{"demo draft on 0", modelPath(t, "factory-draft-Q8_0.gguf"), plan.Placement{Devices: []int{0}}},
		{"itself as draft, experts apart", target, apart},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Load(context.Background(), Config{
				Target: target, Draft: tc.draft, Context: 256, Batch: 64,
				Placement: &Placement{Devices: devs, Target: apart, Draft: tc.place},
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			drafted := 0
			for i, p := range prompts[:3] {
				req := Request{Prompt: p.Text, MaxTokens: 24, IgnoreEOS: true}
				want, _, err := collect(context.Background(), alone, req, nil)
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
				drafted += st.Drafted
			}
			if tc.draft != "" && drafted == 0 {
				t.Error("nothing drafted")
			}
			held := r.DeviceUsage()
			for _, b := range r.Plan().Devices {
				got, want := held[b.Device.Index].Total(), b.Total()
				t.Logf("device %d (%s): holds %d bytes, plan %d (%+.3f%%); experts %d target, %d draft",
					b.Device.Index, b.Device.Label(), got, want, 100*float64(got-want)/float64(want), b.Target.Experts, b.Draft.Experts)
				if d := float64(got-want) / float64(want); d < -0.01 || d > 0.01 {
					t.Errorf("device %d holds %d bytes, plan %d", b.Device.Index, got, want)
				}
			}
			if e := r.Plan().Devices[1]; e.Device.Kind != device.CPU || e.Target.Experts == 0 || tc.place.Experts != "" && e.Draft.Experts == 0 {
				t.Errorf("device 1 (%s) holds %d target and %d draft bytes of experts", e.Device.Kind, e.Target.Experts, e.Draft.Experts)
			}
		})
	}
}
