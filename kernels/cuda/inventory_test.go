package cuda

import (
	"errors"
	"regexp"
	"slices"
	"testing"
)

// Inventory agrees with Devices on what both read, and adds well-formed
// PCI ids, UUIDs, free memory and symmetric peer access. Without a driver
// it says so with ErrNoDriver (a stub library: ErrNoDevice).
func TestInventory(t *testing.T) {
	gpus, err := Inventory()
	if errors.Is(err, ErrNoDriver) || errors.Is(err, ErrNoDevice) {
		t.Skipf("no CUDA device: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	infos, err := Devices()
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus) != len(infos) {
		t.Fatalf("%d GPUs in the inventory, %d devices", len(gpus), len(infos))
	}
	bus := regexp.MustCompile(`^[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.0$`)
	uuid := regexp.MustCompile(`^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	for i, g := range gpus {
		in := infos[i]
		switch {
		case g.Name != in.Name || g.TotalMemory != in.TotalMemory || g.ComputeMajor != in.ComputeMajor || g.ComputeMinor != in.ComputeMinor:
			t.Errorf("GPU %d: %+v, Devices says %+v", i, g, in)
		case !bus.MatchString(g.PCIBusID):
			t.Errorf("GPU %d: PCI bus id %q", i, g.PCIBusID)
		case g.UUID != "" && !uuid.MatchString(g.UUID):
			t.Errorf("GPU %d: UUID %q", i, g.UUID)
		case g.FreeMemory <= 0 || g.FreeMemory > g.TotalMemory:
			t.Errorf("GPU %d: free %d of %d", i, g.FreeMemory, g.TotalMemory)
		}
		for _, p := range g.Peers {
			if !slices.Contains(gpus[p].Peers, i) {
				t.Errorf("GPU %d reaches %d but not back", i, p)
			}
		}
		t.Logf("%+v", g)
	}
}
