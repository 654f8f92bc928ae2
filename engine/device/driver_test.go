package device

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/kernels/cuda"
)

// The driver's GPUs come out in PCI bus order, with peer access as links
// between the reordered indexes.
func TestFromDriver(t *testing.T) {
	gpus := []cuda.GPU{
		{Ordinal: 0, Name: "B", PCIBusID: "00000000:3B:00.0", ComputeMajor: 9, TotalMemory: 80 << 30, FreeMemory: 70 << 30, Peers: []int{1}},
		{Ordinal: 1, Name: "A", PCIBusID: "00000000:1B:00.0", ComputeMajor: 8, ComputeMinor: 6, TotalMemory: 24 << 30, UUID: "GPU-1", Peers: []int{0}},
		{Ordinal: 2, Name: "C", PCIBusID: "junk", TotalMemory: 1},
	}
	inv := fromDriver(gpus, nil)
	if len(inv.Devices) != 2 {
		t.Fatalf("%d devices: %+v", len(inv.Devices), inv)
	}
	a, b := inv.Devices[0], inv.Devices[1]
	if a.Name != "A" || a.Index != 0 || a.ComputeCapability != "8.6" || a.UUID != "GPU-1" || a.MemoryTotal != 24<<30 || a.Kind != CUDA ||
		b.Name != "B" || b.Index != 1 || b.MemoryFree != 70<<30 || b.ComputeCapability != "9.0" {
		t.Errorf("devices %+v", inv.Devices)
	}
	if a.Links[1] != LinkPeer || b.Links[0] != LinkPeer || !KnownLink(LinkPeer) {
		t.Errorf("links %v %v", a.Links, b.Links)
	}
	if !strings.Contains(inv.Reason, "CUDA device 2") || !strings.Contains(inv.Source, "CUDA driver API") {
		t.Errorf("reason %q source %q", inv.Reason, inv.Source)
	}
	for _, err := range []error{cuda.ErrNoDriver, fmt.Errorf("cuda: cuInit: %w", cuda.ErrNoDevice), errors.New("cuda: odd\nfailure")} {
		inv := fromDriver(nil, err)
		if len(inv.Devices) != 0 || inv.Reason == "" || strings.Contains(inv.Reason, "\n") {
			t.Errorf("%v: %+v", err, inv)
		}
	}
}

// On a machine without a usable GPU (this one, CI), Probe falls back
// cleanly: no devices, one line saying why, no crash, in every build.
func TestProbeWithoutGPU(t *testing.T) {
	inv := Probe()
	if len(inv.Devices) > 0 {
		t.Skipf("this machine has GPUs: %v", inv.Devices)
	}
	if inv.Reason == "" || strings.Contains(inv.Reason, "\n") {
		t.Errorf("reason %q", inv.Reason)
	}
}
