package engine

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

var benchModel = flag.String("engine.bench-model", "", "target GGUF for BenchmarkHeadModes (default: the demo F16 target)")

// BenchmarkHeadModes prices the output head's placement when a target is
// split by tensors over two devices: replicated (a full copy on each) or
// split by vocabulary rows. It reports decode tokens/s and what each device
// holds for the head and in all. With -engine.backend=cuda the two devices
// are virtual devices of one GPU.
func BenchmarkHeadModes(b *testing.B) {
	target := *benchModel
	if target == "" {
		target = sharedtest.Path(b, "models", "factory-target-F16.gguf")
	}
	devs := virtualCPUs(b, "cpu:40GiB,cpu:40GiB")
	for _, c := range []struct {
		name string
		tp   plan.Placement
	}{
		{"one-device", plan.Placement{Devices: []int{0}}},
		{"layer-split", plan.Placement{Devices: []int{0, 1}}},
		{"tensor-split-head-replicated", plan.Placement{Devices: []int{0, 1}, Split: plan.SplitTensor, Head: plan.HeadReplicated}},
		{"tensor-split-head-split", plan.Placement{Devices: []int{0, 1}, Split: plan.SplitTensor, Head: plan.HeadSplit}},
	} {
		b.Run(c.name, func(b *testing.B) {
			r, err := Load(context.Background(), Config{Target: target, Context: 512,
				Placement: &Placement{Devices: devs, Target: c.tp, Batch: 64}}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			const n = 64
			tokens := make([]int32, n)
			for i := range tokens {
				tokens[i] = int32(100 + 7*i)
			}
			var secs float64
			for b.Loop() {
				start := time.Now()
				for i := range n {
					if _, err := r.Forward(context.Background(), tokens[i:i+1], i, nil); err != nil {
						b.Fatal(err)
					}
				}
				secs += time.Since(start).Seconds()
			}
			b.ReportMetric(float64(n*b.N)/secs, "tok/s")
			for d, u := range r.DeviceUsage() {
				var head int64
				for l, v := range u {
					if l.Cat == kernels.Head {
						head += v
					}
				}
				b.ReportMetric(float64(head)/(1<<20), fmt.Sprintf("head-MiB-dev%d", d))
				b.ReportMetric(float64(u.Total())/(1<<20), fmt.Sprintf("MiB-dev%d", d))
			}
		})
	}
}
