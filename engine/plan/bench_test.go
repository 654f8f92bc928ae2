package plan

import (
	"testing"

	"github.com/tandem-run/tandem/engine/plan/plantest"
	"github.com/tandem-run/tandem/kernels/quant"
)

// Planning a 100-block model (1,300 tensors) with an EAGLE-3 draft over
// eight GPUs; "no fit" adds the alternatives and every suggestion's re-plan.
func BenchmarkMake100Blocks(b *testing.B) {
	target := plantest.Blocks100()
	in := Input{Target: open(b, target), Draft: open(b, plantest.Eagle3(target)), Devices: inventory(b, "11x24GB.json"),
		Ctx: 65536, Batch: 512, KV: SameKV(quant.F16),
		TargetPlacement: Placement{Devices: seq(3, 11)}, DraftPlacement: Placement{Devices: []int{0}}}
	for _, tc := range []struct {
		name string
		gpus []int
		fits bool
	}{{"fits", seq(3, 11), true}, {"no fit", seq(3, 6), false}} {
		in.TargetPlacement.Devices = tc.gpus
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				p, err := Make(in)
				if err != nil || p.Fits != tc.fits {
					b.Fatalf("fits %v, error %v", p != nil && p.Fits, err)
				}
			}
		})
	}
}
