package app

import (
	"bufio"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/tandem-run/tandem/engine/device"
)

// withCPU adds the host as one more device after the GPUs, so the CPU can
// be dragged into a zone like any GPU. Its index follows the GPUs' (NVML
// numbers them from 0), and its capacity is the memory available now.
func withCPU(inv device.Inventory, meminfo io.Reader) device.Inventory {
	cpu := device.Device{Kind: device.CPU, Name: "host memory", Physical: -1}
	for _, d := range inv.Devices {
		cpu.Index = max(cpu.Index, d.Index+1)
	}
	if meminfo != nil {
		cpu.MemoryTotal, cpu.MemoryFree = parseMeminfo(meminfo)
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

// parseMeminfo reads MemTotal and MemAvailable (kB) from /proc/meminfo.
func parseMeminfo(r io.Reader) (total, avail uint64) {
	s := bufio.NewScanner(r)
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) < 2 {
			continue
		}
		n, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "MemTotal:":
			total = n << 10
		case "MemAvailable:":
			avail = n << 10
		}
	}
	return total, avail
}
