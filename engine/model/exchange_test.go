package model

import (
	"context"
	"slices"
	"testing"

	"github.com/tandem-run/tandem/kernels"
)

// hostOnly hides a backend's device copies, as a GPU beside a CPU device
// would: activations to and from it go through the host.
type hostOnly struct{ kernels.Backend }

// TestPlacedHostExchange runs layouts with device 1 reachable only through
// the host (every tensor-split sum then runs on the host, and layer-split
// boundaries into or out of device 1 are read and written) and with every
// device copying directly: the logits agree to the bit, since both paths
// add the shares in the same order.
func TestPlacedHostExchange(t *testing.T) {
	o := loadOracle(t)
	const file = "factory-target-F16.gguf"
	seq := o.Prompts[0].IDs
	for _, l := range []placedLayout{placedLayouts[1], placedLayouts[2], placedLayouts[4], placedLayouts[5]} {
		t.Run(l.name, func(t *testing.T) {
			run := func(wrap func(int, kernels.Backend) kernels.Backend) ([]float32, []int32) {
				r := placeModelOn(t, file, "cpu:1GiB,cpu:1GiB,cpu:1GiB", l.placement(), 128, 32, wrap)
				if r.m.direct == (wrap != nil) {
					t.Fatalf("direct %v with device 1 wrapped %v", r.m.direct, wrap != nil)
				}
				logits, err := r.m.Forward(context.Background(), seq, 0, allRows(len(seq)))
				if err != nil {
					t.Fatal(err)
				}
				return slices.Clone(logits), greedy(t, r.m, seq, 4)
			}
			direct, directGreedy := run(nil)
			host, hostGreedy := run(func(dev int, be kernels.Backend) kernels.Backend {
				if dev == 1 {
					return hostOnly{be}
				}
				return be
			})
			for i := range direct {
				if direct[i] != host[i] {
					t.Fatalf("logit %d: %v through the host, %v device to device", i, host[i], direct[i])
				}
			}
			if !slices.Equal(directGreedy, hostGreedy) {
				t.Errorf("greedy: %v through the host, %v device to device", hostGreedy, directGreedy)
			}
		})
	}
}
