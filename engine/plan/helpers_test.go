package plan

import (
	"path/filepath"
	"testing"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/plan/plantest"
	"github.com/tandem-run/tandem/kernels/quant"
)

// open writes m as a header-only GGUF and opens it.
func open(t testing.TB, m plantest.Model) *gguf.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), m.Arch+".gguf")
	if err := m.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// inventory reads one of the example inventories of engine/device.
func inventory(t testing.TB, name string) []device.Device {
	t.Helper()
	inv, err := device.ReadFile(filepath.Join("..", "device", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return inv.Devices
}

// cpus is n virtual CPU devices of the given size each.
func cpus(n int, bytes uint64) []device.Device {
	var out []device.Device
	for i := range n {
		out = append(out, device.Device{Index: i, Name: "cpu", Kind: device.CPU, Virtual: true, Physical: -1, MemoryTotal: bytes, MemoryFree: bytes})
	}
	return out
}

func seq(lo, hi int) []int {
	var out []int
	for i := lo; i < hi; i++ {
		out = append(out, i)
	}
	return out
}

func mustMake(t testing.TB, in Input) *Plan {
	t.Helper()
	p, err := Make(in)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// elemBytes is the bytes per value of a plain or q8_0 KV cache.
func elemBytes(k quant.Type) float64 { return float64(k.TypeSize()) / float64(k.BlockSize()) }

// sumUsage adds a usage category over the plan's devices.
func sumUsage(p *Plan, role Role, f func(Usage) int64) int64 {
	var n int64
	for _, b := range p.Devices {
		n += f(*b.usage(role))
	}
	return n
}

func weightsOf(u Usage) int64 { return u.Weights + u.Embedding + u.Head }
