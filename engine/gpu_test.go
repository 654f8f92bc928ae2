package engine

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/engine/plan"
)

// On a real GPU the process's memory, as the driver reports it, is the
// plan's total for the device: the weights, caches and scratch the backend
// allocates from the plan plus the CUDA context. packaging/gpu-engine.sh
// samples nvidia-smi while this runs and compares with the line it prints.
func TestGPUMemoryMatchesPlan(t *testing.T) {
	if *backend != "cuda" {
		t.Skip("needs -engine.backend=cuda")
	}
	gpu := []device.Device{{Index: 0, Name: "GPU 0", MemoryTotal: 140 << 30, MemoryFree: 140 << 30, Kind: device.CUDA}}
	r := load(t, Config{
		Target: modelPath(t, "factory-target-F16.gguf"), Draft: modelPath(t, "factory-draft-Q8_0.gguf"),
		Placement: &Placement{Devices: gpu, Target: plan.Placement{Devices: []int{0}}, Draft: plan.Placement{Devices: []int{0}}},
	})
	planned := r.Plan().Devices[0]
	report := func(when string) {
		held := r.DeviceUsage()[0].Total()
		line := fmt.Sprintf("GPUMEM %s: plan %d bytes (%d allocations + %d context), backend holds %d", when,
			planned.Total(), planned.Total()-plan.Overhead(gpu[0]), plan.Overhead(gpu[0]), held)
		t.Log(line)
		fmt.Fprintln(os.Stderr, line)
		time.Sleep(time.Second) // let the sampler see this state
	}
	report("after load")
	st, err := r.Generate(context.Background(), Request{Prompt: "In the beginning", MaxTokens: 1800, IgnoreEOS: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("generated %d tokens at %.0f tok/s (drafted %d, accepted %d)", st.GeneratedTokens, st.DecodeTokS(), st.Drafted, st.Accepted)
	report("after a long generation")
}
