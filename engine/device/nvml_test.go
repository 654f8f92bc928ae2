//go:build cgo && linux

package device

import (
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// A failed Init must be the only NVML call: the mock panics on any method
// whose function is not set, as the real library crashes.
func TestProbeFailedInitCallsNothingElse(t *testing.T) {
	for _, ret := range []nvml.Return{nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED, nvml.ERROR_UNKNOWN} {
		lib := &mock.Interface{InitFunc: func() nvml.Return { return ret }}
		inv := probe(lib)
		if len(inv.Devices) != 0 || inv.Reason == "" || strings.Contains(inv.Reason, "\n") {
			t.Errorf("Init %v: got %d devices, reason %q; want none and one line", ret, len(inv.Devices), inv.Reason)
		}
	}
}

// fakeGPU is a mock GPU with the queries probe makes.
func fakeGPU(name, bus string, totalMiB uint64, major, minor int) *mock.Device {
	var pci nvml.PciInfo
	for i := range bus {
		pci.BusId[i] = int8(bus[i])
	}
	return &mock.Device{
		GetPciInfoFunc: func() (nvml.PciInfo, nvml.Return) { return pci, nvml.SUCCESS },
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			return nvml.Memory{Total: totalMiB << 20, Free: totalMiB << 19}, nvml.SUCCESS
		},
		GetNameFunc: func() (string, nvml.Return) { return name, nvml.SUCCESS },
		GetUUIDFunc: func() (string, nvml.Return) { return "GPU-" + bus, nvml.SUCCESS },
		GetCudaComputeCapabilityFunc: func() (int, int, nvml.Return) {
			return major, minor, nvml.SUCCESS
		},
	}
}

func TestProbeOrdersByBusAndReadsLinks(t *testing.T) {
	// NVML enumerates in its own order; CUDA's PCI_BUS_ID order sorts by bus.
	h200a := fakeGPU("NVIDIA H200", "00000000:9A:00.0", 143771, 9, 0)
	h200b := fakeGPU("NVIDIA H200", "00000000:1B:00.0", 143771, 9, 0)
	l4 := fakeGPU("NVIDIA L4", "00000000:4C:00.0", 23034, 8, 9)
	gpus := []*mock.Device{h200a, h200b, l4}
	nvlinked := func(a, b nvml.Device) bool {
		return (a == h200a && b == h200b) || (a == h200b && b == h200a)
	}
	for _, g := range gpus {
		g.GetP2PStatusFunc = func(other nvml.Device, _ nvml.GpuP2PCapsIndex) (nvml.GpuP2PStatus, nvml.Return) {
			if nvlinked(g, other) {
				return nvml.P2P_STATUS_OK, nvml.SUCCESS
			}
			return nvml.P2P_STATUS_NOT_SUPPORTED, nvml.SUCCESS
		}
		g.GetTopologyCommonAncestorFunc = func(other nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
			return nvml.TOPOLOGY_SYSTEM, nvml.SUCCESS
		}
	}
	shutdowns := 0
	lib := &mock.Interface{
		InitFunc:           func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:       func() nvml.Return { shutdowns++; return nvml.SUCCESS },
		DeviceGetCountFunc: func() (int, nvml.Return) { return len(gpus), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			return gpus[i], nvml.SUCCESS
		},
	}
	inv := probe(lib)
	if shutdowns != 1 {
		t.Errorf("Shutdown called %d times, want 1", shutdowns)
	}
	if inv.Reason != "" || len(inv.Devices) != 3 {
		t.Fatalf("got %d devices, reason %q", len(inv.Devices), inv.Reason)
	}
	wantBus := []string{"00000000:1B:00.0", "00000000:4C:00.0", "00000000:9A:00.0"}
	for i, d := range inv.Devices {
		if d.Index != i || d.PCIBusID != wantBus[i] || d.Kind != CUDA {
			t.Errorf("device %d: index %d bus %s kind %s; want index %d bus %s", i, d.Index, d.PCIBusID, d.Kind, i, wantBus[i])
		}
	}
	h := inv.Devices[0]
	if h.Name != "NVIDIA H200" || h.ComputeCapability != "9.0" || h.MemoryTotal != 143771<<20 || h.MemoryFree != 143771<<19 || h.UUID != "GPU-00000000:1B:00.0" {
		t.Errorf("device 0 = %+v", h)
	}
	if got := inv.Devices[0].Links; got[2] != LinkNVLink || got[1] != LinkCrossSocket || len(got) != 2 {
		t.Errorf("device 0 links = %v; want 2: nvlink, 1: cross-socket", got)
	}
	if got := inv.Devices[1].Links; got[0] != LinkCrossSocket || got[2] != LinkCrossSocket {
		t.Errorf("device 1 links = %v; want cross-socket to both", got)
	}
}

func TestProbeSkipsUnreadableDevice(t *testing.T) {
	good := fakeGPU("NVIDIA L4", "00000000:4C:00.0", 23034, 8, 9)
	lib := &mock.Interface{
		InitFunc:           func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:       func() nvml.Return { return nvml.SUCCESS },
		DeviceGetCountFunc: func() (int, nvml.Return) { return 2, nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i == 0 {
				return nil, nvml.ERROR_GPU_IS_LOST
			}
			return good, nvml.SUCCESS
		},
	}
	inv := probe(lib)
	if len(inv.Devices) != 1 || inv.Devices[0].Index != 0 || !strings.Contains(inv.Reason, "NVML device 0") {
		t.Errorf("got %d devices, reason %q; want the readable one and a reason naming device 0", len(inv.Devices), inv.Reason)
	}
}

// Probe on this machine: no driver gives no devices and a reason; with a
// driver, every GPU is described, in PCI bus order, with sane links.
func TestProbeThisMachine(t *testing.T) {
	inv := Probe()
	t.Logf("source %q, reason %q", inv.Source, inv.Reason)
	if len(inv.Devices) == 0 {
		if inv.Reason == "" {
			t.Error("no devices and no reason")
		}
		return
	}
	var prev busAddr
	for i, d := range inv.Devices {
		t.Logf("%s: %s %s cc %s total %d free %d links %v", d.Label(), d.Name, d.PCIBusID, d.ComputeCapability, d.MemoryTotal, d.MemoryFree, d.Links)
		addr, err := parseBusID(d.PCIBusID)
		if err != nil || (i > 0 && compareBusAddr(prev, addr) >= 0) {
			t.Errorf("device %d: bus id %q (%v) is not after the previous one", i, d.PCIBusID, err)
		}
		prev = addr
		if d.Index != i || d.Name == "" || d.MemoryTotal == 0 || d.MemoryFree > d.MemoryTotal || d.Kind != CUDA {
			t.Errorf("device %d = %+v", i, d)
		}
		for other, kind := range d.Links {
			if other < 0 || other >= len(inv.Devices) || other == i || !KnownLink(kind) {
				t.Errorf("device %d: link %d %q", i, other, kind)
			}
		}
	}
}
