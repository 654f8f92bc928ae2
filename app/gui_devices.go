package app

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/widgets"
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

// hostInventory is this machine's GPUs (NVML) and its CPU.
func hostInventory() device.Inventory {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return withCPU(device.Probe(), nil)
	}
	defer f.Close()
	return withCPU(device.Probe(), f)
}

// chipsFor describes the devices for the GPU canvas.
func chipsFor(inv device.Inventory) []widgets.ChipInfo {
	var out []widgets.ChipInfo
	for _, d := range inv.Devices {
		c := widgets.ChipInfo{ID: d.Index, Name: deviceName(d), Model: d.Name, CPU: d.Kind == device.CPU}
		switch {
		case d.MemoryTotal == 0:
			c.Memory = "memory unknown"
		case d.MemoryFree > 0:
			c.Memory = fmt.Sprintf("%s free of %s", ibytes(int64(d.MemoryFree)), ibytes(int64(d.MemoryTotal)))
		default:
			c.Memory = ibytes(int64(d.MemoryTotal))
		}
		for _, other := range slices.Sorted(maps.Keys(d.Links)) {
			c.Badges = append(c.Badges, fmt.Sprintf("%s %d", linkName(d.Links[other]), other))
		}
		out = append(out, c)
	}
	return out
}

// deviceName is what a chip and a bar are titled.
func deviceName(d device.Device) string {
	if d.Kind == device.CPU {
		return "CPU"
	}
	return d.Label()
}

func linkName(kind string) string {
	switch kind {
	case device.LinkNVLink:
		return "NVLink"
	case device.LinkSameBoard:
		return "board"
	case device.LinkPCIeSwitch:
		return "PCIe switch"
	case device.LinkHostBridge:
		return "PCIe"
	case device.LinkNUMANode:
		return "NUMA"
	case device.LinkCrossSocket:
		return "socket"
	}
	return kind
}
