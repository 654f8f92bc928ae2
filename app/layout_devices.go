package app

import (
	"fmt"
	"slices"

	"github.com/tandem-run/tandem/engine/device"
)

// A layout names devices by inventory index, and indices move: the CPU is
// index 0 on a machine without GPUs and follows the GPUs once they appear,
// and a GPU added on a lower PCI bus shifts the others. So a saved layout
// also records which device each index was (Layout.DeviceIDs), and the
// next start maps it onto that run's inventory by identity (issue 26,
// item 7: a layout saved on the CPU became GPU 0 once GPUs appeared).

// deviceID is what identifies a device across runs: its UUID where NVML
// or the inventory file gives one, "cpu" for the host, and for the rest
// (virtual devices, GPUs without a UUID) their kind and index, which is
// all they have.
func deviceID(d device.Device) string {
	switch {
	case d.UUID != "":
		return d.UUID
	case d.Kind == device.CPU && !d.Virtual:
		return "cpu"
	case d.Virtual:
		return fmt.Sprintf("virtual %s %d", d.Kind, d.Index)
	}
	return fmt.Sprintf("%s %d", d.Kind, d.Index)
}

// withDeviceIDs records the identity of each device the layout uses.
func (l Layout) withDeviceIDs(inv device.Inventory) Layout {
	ids := make(map[int]string)
	for _, i := range slices.Concat(l.TargetDevices, l.DraftDevices) {
		if d, ok := inv.Device(i); ok {
			ids[i] = deviceID(d)
		}
	}
	l.DeviceIDs = ids
	if len(ids) == 0 {
		l.DeviceIDs = nil
	}
	return l
}

// onInventory maps a saved layout onto inv: each device goes to the index
// its identity has now, one that is gone leaves the layout (with its ratio;
// the others keep theirs). A layout saved without identities keeps its
// indices.
func (l Layout) onInventory(inv device.Inventory) Layout {
	if len(l.DeviceIDs) == 0 {
		return l
	}
	now := make(map[string]int)
	for _, d := range inv.Devices {
		now[deviceID(d)] = d.Index
	}
	mapIndex := func(i int) (int, bool) {
		id, ok := l.DeviceIDs[i]
		if !ok {
			_, known := inv.Device(i)
			return i, known
		}
		j, ok := now[id]
		return j, ok
	}
	var target []int
	var ratios []float64
	for k, i := range l.TargetDevices {
		if j, ok := mapIndex(i); ok && !slices.Contains(target, j) {
			target = append(target, j)
			if len(l.TargetRatios) == len(l.TargetDevices) {
				ratios = append(ratios, l.TargetRatios[k])
			}
		}
	}
	if len(ratios) != len(target) || len(target) < 2 {
		ratios = nil
	}
	var draft []int
	for _, i := range l.DraftDevices {
		if j, ok := mapIndex(i); ok && !slices.Contains(draft, j) {
			draft = append(draft, j)
		}
	}
	l.TargetDevices, l.TargetRatios, l.DraftDevices = target, ratios, draft
	return l.withDeviceIDs(inv)
}
