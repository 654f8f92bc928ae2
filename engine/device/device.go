// Package device lists the devices Tandem can place models on: NVIDIA GPUs
// found through NVML (or, in builds without cgo such as the headless one,
// through the CUDA driver API), an inventory read from a JSON file (for tests and for
// "what if I had two 3090s" planning), and virtual devices carved out of one
// GPU or out of host memory, each with a memory cap.
//
// GPUs are ordered by PCI bus id, which is how CUDA numbers them under
// CUDA_DEVICE_ORDER=PCI_BUS_ID; so Index N here is CUDA device N once the
// CUDA backend uses that order (its default, FASTEST_FIRST, may differ).
package device

import (
	"fmt"

	"github.com/dustin/go-humanize"
)

// Kind says which backend runs a device.
type Kind string

const (
	CUDA Kind = "cuda"
	CPU  Kind = "cpu"
)

// Device is one place to put tensors. The JSON names are those of the
// inventory file (`tandem devices --json`, `--devices-file`).
type Device struct {
	Index             int            `json:"index"` // CUDA ordinal under CUDA_DEVICE_ORDER=PCI_BUS_ID
	Name              string         `json:"name"`
	UUID              string         `json:"uuid"`
	PCIBusID          string         `json:"pci_bus_id"` // "00000000:1B:00.0"
	MemoryTotal       uint64         `json:"memory_total"`
	MemoryFree        uint64         `json:"memory_free"`
	ComputeCapability string         `json:"compute_capability"` // "8.6"
	Links             map[int]string `json:"links,omitempty"`    // other device's Index -> Link* kind

	// Kind is CUDA for inventories (NVML and JSON files hold GPUs only).
	Kind Kind `json:"-"`
	// Virtual devices come from a spec string: MemoryTotal is their cap, and
	// Physical is the CUDA ordinal they live on (-1 for the CPU).
	Virtual  bool `json:"-"`
	Physical int  `json:"-"`
	// Simulated devices are not there: planned for, never loaded onto
	// (simulated.go).
	Simulated bool `json:"-"`
}

// MemoryUsed is what other processes (and the driver) hold now.
func (d Device) MemoryUsed() uint64 {
	if d.MemoryFree > d.MemoryTotal {
		return 0
	}
	return d.MemoryTotal - d.MemoryFree
}

// Capacity is the memory a plan may use: the cap of a virtual device, the
// free memory of a real one (its total when the free amount is unknown).
func (d Device) Capacity() uint64 {
	if d.Virtual || d.MemoryFree == 0 {
		return d.MemoryTotal
	}
	return d.MemoryFree
}

// Label is the short name people see in tables: "GPU 3", "cuda0/2", and
// "CPU" for the host (one per machine, so the window's chip and the
// planner's words name it alike) or "CPU 1" for a virtual one, of which
// there may be several.
func (d Device) Label() string {
	switch {
	case d.Kind == CPU && !d.Virtual:
		return "CPU"
	case d.Kind == CPU:
		return fmt.Sprintf("CPU %d", d.Index)
	case d.Virtual:
		return fmt.Sprintf("cuda%d/%d", d.Physical, d.Index)
	}
	return fmt.Sprintf("GPU %d", d.Index)
}

func (d Device) String() string {
	return fmt.Sprintf("%s %s (%s)", d.Label(), d.Name, humanize.IBytes(d.MemoryTotal))
}

// Inventory is the list of devices one source found, in index order.
type Inventory struct {
	Devices []Device `json:"devices"`
	// Reason says, in one line, why Devices is empty or short (no driver,
	// built without cgo, a device NVML could not read).
	Reason string `json:"-"`
	// Source says where the list came from: "NVML, CUDA_DEVICE_ORDER=PCI_BUS_ID",
	// "file PATH" or "virtual SPEC".
	Source string `json:"-"`
}

// Device finds a device by its index.
func (inv Inventory) Device(index int) (Device, bool) {
	for _, d := range inv.Devices {
		if d.Index == index {
			return d, true
		}
	}
	return Device{}, false
}
