package engine

import (
	"context"
	"errors"
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
// split by vocabulary rows, next to one device and a layer split. It
// reports, as llama-bench's pp512 and tg128 do, prefill tokens/s of one
// 512-token batch and decode tokens/s of 128 steps from an empty context,
// and what each device holds for the head and in all. With
// -engine.backend=cuda the two devices are virtual devices of one GPU, or
// of two with -engine.gpus=0,1.
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
			const pp, tg = 512, 128
			r, err := Load(context.Background(), Config{Target: target, Context: pp + tg,
				Batch: pp, Placement: &Placement{Devices: devs, Target: c.tp}}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			tokens := make([]int32, pp)
			for i := range tokens {
				tokens[i] = int32(100 + 7*i)
			}
			// prefill times one batch; decode, tg steps one token at a time
			prefill := func() error {
				_, err := r.Forward(context.Background(), tokens, 0, nil)
				return err
			}
			decode := func() error {
				for i := range tg {
					if _, err := r.Forward(context.Background(), tokens[i:i+1], i, nil); err != nil {
						return err
					}
				}
				return nil
			}
			// The first passes compile and capture; they are not timed.
			if err := errors.Join(prefill(), decode()); err != nil {
				b.Fatal(err)
			}
			var ppSecs, tgSecs float64
			for b.Loop() {
				start := time.Now()
				if err := prefill(); err != nil {
					b.Fatal(err)
				}
				mid := time.Now()
				if err := decode(); err != nil {
					b.Fatal(err)
				}
				ppSecs += mid.Sub(start).Seconds()
				tgSecs += time.Since(mid).Seconds()
			}
			b.ReportMetric(float64(pp*b.N)/ppSecs, "pp-tok/s")
			b.ReportMetric(float64(tg*b.N)/tgSecs, "tok/s")
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
