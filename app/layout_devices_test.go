//go:build !headless

package app

import (
	"slices"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/engine/device"
)

// gpus is an inventory of GPUs with these UUIDs, in PCI order, and the CPU.
func gpus(uuids ...string) device.Inventory {
	var inv device.Inventory
	for i, u := range uuids {
		inv.Devices = append(inv.Devices, device.Device{Index: i, Name: "NVIDIA GeForce RTX 4090", UUID: u, Kind: device.CUDA,
			MemoryTotal: 24 << 30, MemoryFree: 24 << 30, ComputeCapability: "8.9"})
	}
	return withCPU(inv, strings.NewReader("MemTotal: 2097152 kB\nMemAvailable: 1048576 kB\n"))
}

// savedLayout is the layout the window saved after edit, on inv.
func savedLayout(t *testing.T, inv device.Inventory, edit func(*mainWindow)) Layout {
	t.Helper()
	h := newHarnessOn(t, inv, nil, nil)
	h.m.chooseModel("target", h.demo.Target)
	h.settle()
	edit(h.m)
	h.m.changed()
	h.settle()
	saved, _, err := h.m.store.loadSettings()
	if err != nil {
		t.Fatal(err)
	}
	return saved.Layout
}

// A saved layout follows its devices, not their numbers: the CPU stays the
// CPU once GPUs appear, GPUs are found by UUID when a new one takes a lower
// number, and the ratios typed for them stay. Issue 26, item 7.
func TestLayoutFollowsDevicesByUUID(t *testing.T) {
	t.Run("CPU, then GPUs appear", func(t *testing.T) {
		l := savedLayout(t, cpuOnly(), func(m *mainWindow) {
			m.set.Layout.TargetDevices, m.set.Layout.DraftDevices = []int{0}, []int{0}
		})
		h := newHarnessOn(t, gpus("GPU-a", "GPU-b", "GPU-c"), func(s *Settings) { s.Layout = l }, nil)
		if got := h.m.set.Layout; !slices.Equal(got.TargetDevices, []int{3}) || !slices.Equal(got.DraftDevices, []int{3}) {
			t.Errorf("the CPU's layout on three GPUs: target %v, draft %v; want the CPU, 3", got.TargetDevices, got.DraftDevices)
		}
		if p := h.m.gpus.Placement(); !slices.Equal(p.Target, []int{3}) {
			t.Errorf("canvas target %v", p.Target)
		}
	})
	t.Run("a GPU added before the others", func(t *testing.T) {
		l := savedLayout(t, gpus("GPU-a", "GPU-b"), func(m *mainWindow) {
			m.set.Layout.TargetDevices, m.set.Layout.TargetRatios, m.set.Layout.DraftDevices = []int{1, 0}, []float64{3, 1}, []int{2}
		})
		h := newHarnessOn(t, gpus("GPU-new", "GPU-a", "GPU-b"), func(s *Settings) { s.Layout = l }, nil)
		got := h.m.set.Layout
		if !slices.Equal(got.TargetDevices, []int{2, 1}) || !slices.Equal(got.TargetRatios, []float64{3, 1}) || !slices.Equal(got.DraftDevices, []int{3}) {
			t.Errorf("target %v ratios %v draft %v; want GPU-b, GPU-a at 3:1 and the draft on the CPU", got.TargetDevices, got.TargetRatios, got.DraftDevices)
		}
		h.m.chooseModel("target", h.demo.Target)
		h.settle()
		if h.m.plan == nil || !slices.Equal(h.m.plan.Target.Placement.Devices, []int{2, 1}) {
			t.Errorf("plan %v", h.m.plan)
		}
	})
	t.Run("a GPU gone", func(t *testing.T) {
		l := savedLayout(t, gpus("GPU-a", "GPU-b", "GPU-c"), func(m *mainWindow) {
			m.set.Layout.TargetDevices, m.set.Layout.TargetRatios, m.set.Layout.DraftDevices = []int{0, 1, 2}, []float64{5, 3, 2}, []int{1}
		})
		h := newHarnessOn(t, gpus("GPU-a", "GPU-c"), func(s *Settings) { s.Layout = l }, nil)
		got := h.m.set.Layout
		if !slices.Equal(got.TargetDevices, []int{0, 1}) || !slices.Equal(got.TargetRatios, []float64{5, 2}) || len(got.DraftDevices) != 0 {
			t.Errorf("target %v ratios %v draft %v; want GPU-a, GPU-c at 5:2 and no draft device", got.TargetDevices, got.TargetRatios, got.DraftDevices)
		}
	})
}
