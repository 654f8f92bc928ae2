package app

import (
	"math"
	"slices"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/engine/plan"
)

// hostExperts applies --cpu-moe and --cpu-moe-draft (llama.cpp's names):
// the routed experts of the models asked for go to the inventory's CPU
// device, a virtual one where the inventory has one, else the host's
// memory (host()) added after the GPUs. The models' other tensors stay on
// the GPUs: a target given no devices gets every device but that one.
func hostExperts(inv device.Inventory, target, draft *plan.Placement, forTarget, forDraft bool, host func() device.Device) device.Inventory {
	if !forTarget && !forDraft {
		return inv
	}
	cpu := -1
	for _, d := range inv.Devices {
		if d.Kind == device.CPU {
			cpu = d.Index
		}
	}
	if cpu < 0 {
		h := host()
		if h.MemoryTotal == 0 { // unknown: the plan cannot be checked against it
			h.MemoryTotal = math.MaxInt64
		}
		h.Index = 0
		for _, d := range inv.Devices {
			h.Index = max(h.Index, d.Index+1)
		}
		inv.Devices = append(slices.Clone(inv.Devices), h)
		cpu = h.Index
	}
	if len(target.Devices) == 0 {
		for _, d := range inv.Devices {
			if d.Index != cpu {
				target.Devices = append(target.Devices, d.Index)
			}
		}
	}
	if forTarget {
		target.Experts, target.ExpertDevice = plan.ExpertsOnDevice, cpu
	}
	if forDraft {
		draft.Experts, draft.ExpertDevice = plan.ExpertsOnDevice, cpu
	}
	return inv
}
