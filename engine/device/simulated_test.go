package device

import (
	"strings"
	"testing"
)

func TestParseSimulated(t *testing.T) {
	inv, err := ParseSimulated("rtx4090, RTX3090,cuda:12GiB,cuda1:512MiB")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		label, name string
		mem         uint64
	}{
		{"GPU 0", "NVIDIA GeForce RTX 4090", 24 << 30},
		{"GPU 1", "NVIDIA GeForce RTX 3090", 24 << 30},
		{"GPU 2", "simulated GPU", 12 << 30},
		{"GPU 3", "simulated GPU", 512 << 20},
	}
	if len(inv.Devices) != len(want) {
		t.Fatalf("%d devices: %+v", len(inv.Devices), inv.Devices)
	}
	uuids := map[string]bool{}
	for i, w := range want {
		d := inv.Devices[i]
		if d.Label() != w.label || d.Name != w.name || d.MemoryTotal != w.mem || d.Capacity() != w.mem ||
			!d.Simulated || d.Virtual || d.Kind != CUDA || d.Index != i {
			t.Errorf("device %d: %+v, want %s %s %d", i, d, w.label, w.name, w.mem)
		}
		if uuids[d.UUID] || d.UUID == "" {
			t.Errorf("device %d: UUID %q not its own", i, d.UUID)
		}
		uuids[d.UUID] = true
	}
	for _, bad := range []string{"", "rtx9999", "cuda:12", "cpu:8GiB", strings.Repeat("rtx4090,", maxVirtual+1)} {
		if _, err := ParseSimulated(bad); err == nil {
			t.Errorf("ParseSimulated(%.30q) took it", bad)
		}
	}
	if _, err := ParseSimulated("rtx9999"); err == nil || !strings.Contains(err.Error(), "rtx4090") {
		t.Errorf("an unknown card's error does not list the cards: %v", err)
	}
}

func TestCardsAreDistinct(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Cards() {
		if seen[c.Key] || c.Memory < 8<<30 || c.Name == "" || c.ComputeCapability == "" {
			t.Errorf("card %+v", c)
		}
		seen[c.Key] = true
	}
}

func TestSimulateAFile(t *testing.T) {
	inv, err := ReadFile("testdata/2x12GB.json")
	if err != nil {
		t.Fatal(err)
	}
	sim := Simulate(inv)
	for i, d := range sim.Devices {
		if !d.Simulated || d.UUID == "" || inv.Devices[i].Simulated {
			t.Errorf("device %d: %+v (the file's: %+v)", i, d, inv.Devices[i])
		}
	}
}
