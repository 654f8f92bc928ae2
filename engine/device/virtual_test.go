package device

import (
	"strings"
	"testing"
)

func TestParseVirtual(t *testing.T) {
	inv, err := ParseVirtual("cuda0:12GiB, cuda0:12GiB,cuda1:512MiB,cpu:8GB")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		kind     Kind
		physical int
		bytes    uint64
	}{{CUDA, 0, 12 << 30}, {CUDA, 0, 12 << 30}, {CUDA, 1, 512 << 20}, {CPU, -1, 8e9}}
	if len(inv.Devices) != len(want) {
		t.Fatalf("%d devices, want %d", len(inv.Devices), len(want))
	}
	for i, w := range want {
		d := inv.Devices[i]
		if d.Index != i || d.Kind != w.kind || d.Physical != w.physical || d.Capacity() != w.bytes || !d.Virtual {
			t.Errorf("device %d = %+v; want %+v", i, d, w)
		}
	}
	if got := inv.Devices[1].Label(); got != "cuda0/1" {
		t.Errorf("label %q, want cuda0/1", got)
	}
	if got := inv.Devices[3].Label(); got != "CPU 3" {
		t.Errorf("a virtual CPU's label %q, want CPU 3 (there may be several)", got)
	}
}

// The host's CPU is one device, named as the window's chip names it, not
// "CPU 3" after the GPUs' numbers (issue 26, item 10).
func TestHostCPULabel(t *testing.T) {
	if got := (Device{Kind: CPU, Index: 3, Physical: -1}).Label(); got != "CPU" {
		t.Errorf("host CPU label %q", got)
	}
}

func TestParseVirtualRejects(t *testing.T) {
	for _, spec := range []string{"", "cuda0", "cuda0:", "cuda0:12", "gpu0:12GiB", "cuda-1:1GiB", "cudax:1GiB", "cpu:0GiB", "cpu:lots", "cuda0:1GiB,,cpu:1GiB"} {
		if _, err := ParseVirtual(spec); err == nil || !strings.HasPrefix(err.Error(), "device: ") {
			t.Errorf("ParseVirtual(%q): error %v; want one", spec, err)
		}
	}
}

func TestCheckVirtual(t *testing.T) {
	phys := Inventory{Devices: []Device{{Index: 0, Name: "H200", Kind: CUDA, MemoryTotal: 140 << 30, MemoryFree: 100 << 30}}}
	for _, tc := range []struct {
		spec string
		ok   bool
	}{
		{"cuda0:50GiB,cuda0:50GiB,cpu:500GiB", true},
		{"cuda0:50GiB,cuda0:51GiB", false},
		{"cuda1:1GiB", false},
	} {
		v, err := ParseVirtual(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckVirtual(v, phys); (err == nil) != tc.ok {
			t.Errorf("CheckVirtual(%s) = %v, want ok=%v", tc.spec, err, tc.ok)
		}
	}
}
