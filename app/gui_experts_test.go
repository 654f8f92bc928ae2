//go:build !headless

package app

import (
	"strings"
	"testing"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/widgets"
)

// The window's layout with the target's experts in system RAM: the
// preview shows the CPU's bar beside the GPU's with the experts' bytes,
// the GPU's holds none, and the check box reads on; off, the GPU holds
// them. A machine without a CPU device says so.
func TestPreviewExpertsInRAM(t *testing.T) {
	path, experts := moeFixture(t)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	inv, err := device.ParseVirtual("cuda0:1GiB,cpu:1GiB")
	if err != nil {
		t.Fatal(err)
	}
	segment := func(d widgets.DeviceMemory, c widgets.Category) int64 {
		for _, s := range d.Segments {
			if s.Category == c {
				return s.Bytes
			}
		}
		return 0
	}
	for _, on := range []bool{true, false} {
		l := Layout{TargetDevices: []int{0}, DraftDevices: []int{0}, Ctx: 256, TargetCPUMoE: on}
		in, err := planInput(f, nil, l, inv)
		if err != nil {
			t.Fatal(err)
		}
		p, err := plan.Make(in)
		if err != nil {
			t.Fatal(err)
		}
		pv := previewOf(p, nil)
		if len(pv.Experts) != 1 || pv.Experts[0].On != on || pv.Experts[0].Draft || !strings.Contains(pv.Experts[0].Text, "2.3 MiB") {
			t.Errorf("on %v: options %+v", on, pv.Experts)
		}
		if !on {
			if len(pv.Devices) != 1 || segment(pv.Devices[0], widgets.Experts) != 0 {
				t.Errorf("off: %d bars, the GPU's experts %d", len(pv.Devices), segment(pv.Devices[0], widgets.Experts))
			}
			continue
		}
		if len(pv.Devices) != 2 || !strings.HasPrefix(pv.Devices[1].Label, "CPU") {
			t.Fatalf("on: bars %+v, want the GPU's and the CPU's", pv.Devices)
		}
		if got := segment(pv.Devices[1], widgets.Experts); got != experts || segment(pv.Devices[0], widgets.Experts) != 0 {
			t.Errorf("on: the CPU's bar holds %d bytes of experts, want %d; the GPU's %d", got, experts, segment(pv.Devices[0], widgets.Experts))
		}
		if pv.Devices[1].Total() != p.Devices[1].Total() {
			t.Errorf("on: the CPU's bar adds up to %d, the plan %d", pv.Devices[1].Total(), p.Devices[1].Total())
		}
	}
	gpus, err := device.ParseVirtual("cuda0:1GiB")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := planInput(f, nil, Layout{TargetDevices: []int{0}, TargetCPUMoE: true}, gpus); err == nil || !strings.Contains(err.Error(), "no CPU") {
		t.Errorf("no CPU device: %v", err)
	}
}

// The planner's suggestion to keep the experts on the CPU turns the
// layout's switch on.
func TestApplyExpertsChange(t *testing.T) {
	cpu := 1
	if l := applyChange(Layout{TargetDevices: []int{0}}, plan.Change{ExpertsDevice: &cpu}); !l.TargetCPUMoE || l.DraftCPUMoE {
		t.Errorf("layout %+v", l)
	}
}
