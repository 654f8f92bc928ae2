package app

import (
	"io"
	"os"
	"slices"

	"github.com/tandem-run/tandem/engine/device"
)

// withCPU adds the host as one more device after the GPUs, so the CPU can
// be dragged into a zone like any GPU. Its index follows the GPUs' (NVML
// numbers them from 0), and its capacity is the memory available now.
func withCPU(inv device.Inventory, meminfo io.Reader) device.Inventory {
	cpu := device.HostFrom(meminfo)
	for _, d := range inv.Devices {
		cpu.Index = max(cpu.Index, d.Index+1)
	}
	inv.Devices = append(slices.Clone(inv.Devices), cpu)
	return inv
}

// hostInventory is this machine's GPUs and its CPU.
func hostInventory() device.Inventory {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return withCPU(device.Probe(), nil)
	}
	defer f.Close()
	return withCPU(device.Probe(), f)
}
