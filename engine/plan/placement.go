package plan

import (
	"fmt"
	"math"
	"slices"

	"github.com/tandem-run/tandem/engine/device"
)

// Role says which model a tensor, buffer or byte belongs to.
type Role string

const (
	Target Role = "target"
	Draft  Role = "draft"
)

// Split is how one model is spread over several devices.
type Split string

const (
	// SplitLayer puts whole blocks on devices, in order, by ratio; the
	// activations are copied once at each boundary.
	SplitLayer Split = "layer"
	// SplitTensor cuts every block matrix across all the devices; each block
	// ends with a sum of partial results across devices.
	SplitTensor Split = "tensor"
)

// HeadMode is where the output head (and a tied embedding) lives.
type HeadMode string

const (
	// HeadAuto is HeadSingle on the last device for a layer split and
	// HeadSplit for a tensor split.
	HeadAuto HeadMode = ""
	// HeadSingle keeps the whole head on Placement.HeadDevice.
	HeadSingle HeadMode = "single"
	// HeadReplicated puts a full copy on every device of the model.
	HeadReplicated HeadMode = "replicated"
	// HeadSplit cuts the head by vocabulary rows, by the placement's ratios.
	HeadSplit HeadMode = "split"
)

// Borrow is how a draft uses the target tensors it lacks (an EAGLE-3 draft
// has no token embedding or head of its own).
type Borrow string

const (
	// BorrowInPlace uses them where the target keeps them: the draft's
	// hidden states go to the target's head devices and results come back.
	BorrowInPlace Borrow = "target"
	// BorrowCopy puts copies on the draft's own devices.
	BorrowCopy Borrow = "copy"
)

// Experts is where a mixture-of-experts model keeps its routed experts.
type Experts string

const (
	// ExpertsWithBlocks keeps each block's experts with the rest of it.
	ExpertsWithBlocks Experts = ""
	// ExpertsOnDevice keeps every block's experts, and the router that
	// picks them, on Placement.ExpertDevice, the host's memory in practice
	// (llama.cpp's --cpu-moe): the block's attention, norms and the head
	// stay on Devices, and each block's normalised FFN input crosses to the
	// expert device and its output comes back.
	ExpertsOnDevice Experts = "device"
)

// Placement says where one model runs.
type Placement struct {
	// Devices are device indices, in pipeline order for a layer split.
	Devices []int
	// Ratios weigh the devices (blocks, KV heads, FFN rows, head rows); nil
	// means in proportion to each device's capacity.
	Ratios []float64
	Split  Split    // "" is SplitLayer
	Head   HeadMode // see HeadAuto
	// HeadDevice is the device of a HeadSingle head; it is ignored for the
	// other modes, so the zero value cannot move a head by accident.
	HeadDevice int
	// Borrow applies to drafts that borrow target tensors; "" is BorrowInPlace.
	Borrow Borrow
	// Experts and ExpertDevice say where routed experts live; ExpertDevice
	// is read only for ExpertsOnDevice and must not be one of Devices.
	Experts      Experts
	ExpertDevice int
}

// resolve checks p against the devices and fills in the defaults: Split,
// Head, Borrow and normalised Ratios (summing to 1).
func (p Placement) resolve(role Role, devs []device.Device) (Placement, error) {
	r := p
	r.Devices = slices.Clone(p.Devices)
	if len(r.Devices) == 0 {
		return r, fmt.Errorf("plan: %s: no devices", role)
	}
	seen := make(map[int]bool)
	for _, d := range r.Devices {
		if _, ok := findDevice(devs, d); !ok {
			return r, fmt.Errorf("plan: %s: device %d is not in the inventory", role, d)
		}
		if seen[d] {
			return r, fmt.Errorf("plan: %s: device %d is listed twice", role, d)
		}
		seen[d] = true
	}
	switch r.Split {
	case "":
		r.Split = SplitLayer
	case SplitLayer, SplitTensor:
	default:
		return r, fmt.Errorf("plan: %s: split %q (want layer or tensor)", role, r.Split)
	}
	switch r.Head {
	case HeadAuto:
		if r.Split == SplitTensor {
			r.Head = HeadSplit
		} else {
			r.Head, r.HeadDevice = HeadSingle, r.Devices[len(r.Devices)-1]
		}
	case HeadSingle:
		if !seen[r.HeadDevice] {
			return r, fmt.Errorf("plan: %s: head device %d is not one of the model's devices %v", role, r.HeadDevice, r.Devices)
		}
	case HeadReplicated, HeadSplit:
	default:
		return r, fmt.Errorf("plan: %s: head %q (want single, replicated or split)", role, r.Head)
	}
	if r.Head != HeadSingle {
		r.HeadDevice = -1
	}
	switch r.Borrow {
	case "":
		r.Borrow = BorrowInPlace
	case BorrowInPlace, BorrowCopy:
	default:
		return r, fmt.Errorf("plan: %s: borrow %q (want target or copy)", role, r.Borrow)
	}
	switch r.Experts {
	case ExpertsWithBlocks:
		r.ExpertDevice = -1
	case ExpertsOnDevice:
		if _, ok := findDevice(devs, r.ExpertDevice); !ok {
			return r, fmt.Errorf("plan: %s: expert device %d is not in the inventory", role, r.ExpertDevice)
		}
		if seen[r.ExpertDevice] {
			return r, fmt.Errorf("plan: %s: expert device %d is also one of the model's devices %v", role, r.ExpertDevice, r.Devices)
		}
	default:
		return r, fmt.Errorf("plan: %s: experts %q (want \"\" or device)", role, r.Experts)
	}
	ratios, err := normRatios(role, p.Ratios, r.Devices, devs)
	if err != nil {
		return r, err
	}
	r.Ratios = ratios
	return r, nil
}

// normRatios returns ratios summing to 1, one per device.
func normRatios(role Role, ratios []float64, idx []int, devs []device.Device) ([]float64, error) {
	if ratios == nil {
		for _, i := range idx {
			d, _ := findDevice(devs, i)
			ratios = append(ratios, float64(d.Capacity()))
		}
	} else if len(ratios) != len(idx) {
		return nil, fmt.Errorf("plan: %s: %d ratios for %d devices", role, len(ratios), len(idx))
	}
	var sum float64
	for _, r := range ratios {
		if !(r > 0) || math.IsInf(r, 0) {
			return nil, fmt.Errorf("plan: %s: ratios %v: each must be a positive number", role, ratios)
		}
		sum += r
	}
	out := make([]float64, len(ratios))
	for i, r := range ratios {
		out[i] = r / sum
	}
	return out, nil
}

func findDevice(devs []device.Device, index int) (device.Device, bool) {
	for _, d := range devs {
		if d.Index == index {
			return d, true
		}
	}
	return device.Device{}, false
}

// Range is a half-open interval [Lo, Hi) of rows, columns, heads or blocks.
type Range struct{ Lo, Hi int64 }

// Len is Hi - Lo.
func (r Range) Len() int64 { return r.Hi - r.Lo }

// splitByRatio cuts [0, total) into len(ratios) consecutive ranges whose
// lengths follow the ratios, each boundary a multiple of unit (the last
// range takes any remainder). Boundaries are rounded cumulatively so the
// lengths always add up to total.
func splitByRatio(total, unit int64, ratios []float64) []Range {
	out := make([]Range, len(ratios))
	units := total / unit
	var cum float64
	var lo int64
	for i, r := range ratios {
		cum += r
		hi := int64(math.Round(cum*float64(units))) * unit
		if i == len(ratios)-1 {
			hi = total
		}
		hi = max(hi, lo)
		out[i] = Range{lo, hi}
		lo = hi
	}
	return out
}
