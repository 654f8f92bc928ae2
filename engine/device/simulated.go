package device

import (
	"fmt"
	"strings"
)

// Simulated devices are GPUs one does not have, for planning only: what
// fits on the cards one is about to buy. They come from a list of common
// cards or from sizes, carry Simulated, and an engine must never load onto
// them (the window refuses; there is nothing behind them to allocate).

// Card is a common GPU as its maker's spec sheet gives it.
type Card struct {
	Key               string // what a spec names it by: "rtx4090"
	Name              string // as NVML names it
	Memory            uint64 // the memory on the spec sheet
	ComputeCapability string
}

// Cards is the short list of common cards a simulation is made of, each
// with the memory of its spec sheet (whose "GB" of GDDR and HBM are GiB).
// NVML reports a little less (the driver's reserve); the planner takes the
// overhead from Overhead as for a real card.
func Cards() []Card {
	const gib = 1 << 30
	return []Card{
		{"rtx3060", "NVIDIA GeForce RTX 3060", 12 * gib, "8.6"},
		{"rtx3090", "NVIDIA GeForce RTX 3090", 24 * gib, "8.6"},
		{"rtx4060ti", "NVIDIA GeForce RTX 4060 Ti 16GB", 16 * gib, "8.9"},
		{"rtx4070tis", "NVIDIA GeForce RTX 4070 Ti SUPER", 16 * gib, "8.9"},
		{"rtx4090", "NVIDIA GeForce RTX 4090", 24 * gib, "8.9"},
		{"rtx5090", "NVIDIA GeForce RTX 5090", 32 * gib, "12.0"},
		{"rtxa6000", "NVIDIA RTX A6000", 48 * gib, "8.6"},
		{"l40s", "NVIDIA L40S", 48 * gib, "8.9"},
		{"a100-40", "NVIDIA A100-SXM4-40GB", 40 * gib, "8.0"},
		{"a100-80", "NVIDIA A100-SXM4-80GB", 80 * gib, "8.0"},
		{"h100", "NVIDIA H100 80GB HBM3", 80 * gib, "9.0"},
		{"h200", "NVIDIA H200", 141 * gib, "9.0"},
	}
}

// ParseSimulated reads a list of simulated GPUs: comma-separated card
// keys (Cards) and sizes, as in "rtx4090,rtx4090,rtx3090" or
// "cuda:24GiB,cuda0:12GiB" (a size names a GPU of that memory; cudaN and
// cuda mean the same here, so virtual-device specs read as simulations).
// Devices are numbered in the spec's order.
func ParseSimulated(spec string) (Inventory, error) {
	items := strings.Split(spec, ",")
	if strings.TrimSpace(spec) == "" || len(items) > maxVirtual {
		return Inventory{}, fmt.Errorf("device: simulated devices %q: want 1 to %d cards like rtx4090 or sizes like cuda:24GiB", spec, maxVirtual)
	}
	inv := Inventory{Source: "simulated " + spec}
	for i, item := range items {
		d, err := simulatedItem(strings.ToLower(strings.TrimSpace(item)))
		if err != nil {
			return Inventory{}, fmt.Errorf("device: simulated device %d (%q): %w", i, item, err)
		}
		d.Index, d.Physical, d.Simulated = i, i, true
		d.UUID = fmt.Sprintf("simulated-%d", i)
		inv.Devices = append(inv.Devices, d)
	}
	return inv, nil
}

func simulatedItem(item string) (Device, error) {
	for _, c := range Cards() {
		if item == c.Key {
			return Device{Kind: CUDA, Name: c.Name, MemoryTotal: c.Memory, MemoryFree: c.Memory, ComputeCapability: c.ComputeCapability}, nil
		}
	}
	kind, size, ok := strings.Cut(item, ":")
	if !ok || !strings.HasPrefix(kind, "cuda") {
		var keys []string
		for _, c := range Cards() {
			keys = append(keys, c.Key)
		}
		return Device{}, fmt.Errorf("want a card (%s) or cuda:SIZE", strings.Join(keys, ", "))
	}
	d, err := parseVirtualItem("cuda0:" + size)
	if err != nil {
		return Device{}, err
	}
	d.Virtual = false
	d.Name = "simulated GPU"
	return d, nil
}

// Simulate marks every device of inv simulated (an inventory file read to
// plan for another machine's GPUs).
func Simulate(inv Inventory) Inventory {
	devs := make([]Device, len(inv.Devices))
	for i, d := range inv.Devices {
		d.Simulated = true
		if d.UUID == "" {
			d.UUID = fmt.Sprintf("simulated-%d", d.Index)
		}
		devs[i] = d
	}
	inv.Devices = devs
	return inv
}
