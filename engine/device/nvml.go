//go:build cgo && linux

package device

import (
	"fmt"
	"slices"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

const nvmlSource = "NVML, CUDA_DEVICE_ORDER=PCI_BUS_ID"

// Probe lists the NVIDIA GPUs through NVML, or through the CUDA driver
// API where NVML cannot start but the driver can (a driver installed
// without its NVML library). Without a driver it returns an empty
// inventory and the reason; it never fails otherwise.
func Probe() Inventory {
	inv := probe(nvml.New())
	if len(inv.Devices) == 0 && inv.Reason != "" {
		if d := probeDriver(); len(d.Devices) > 0 {
			return d
		}
	}
	return inv
}

// probe does the work on any NVML implementation, so tests can use a mock.
// Every call after Init is made only once Init has succeeded: after a failed
// Init, go-nvml's lazily bound symbols kill the process when called.
func probe(lib nvml.Interface) Inventory {
	inv := Inventory{Source: nvmlSource}
	if ret := lib.Init(); ret != nvml.SUCCESS {
		inv.Reason = initReason(ret)
		return inv
	}
	defer lib.Shutdown()

	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		inv.Reason = "NVML could not count the GPUs: " + ret.Error()
		return inv
	}
	type found struct {
		dev    Device
		addr   busAddr
		handle nvml.Device
	}
	var all []found
	var skipped []string
	for i := range n {
		h, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			skipped = append(skipped, fmt.Sprintf("NVML device %d: %v", i, ret))
			continue
		}
		d, addr, err := describe(h)
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("NVML device %d: %v", i, err))
			continue
		}
		all = append(all, found{d, addr, h})
	}
	slices.SortFunc(all, func(a, b found) int { return compareBusAddr(a.addr, b.addr) })
	for i := range all {
		all[i].dev.Index = i
		all[i].dev.Physical = i
	}
	for i := range all {
		for j := range all {
			if i == j {
				continue
			}
			if kind, ok := link(all[i].handle, all[j].handle); ok {
				if all[i].dev.Links == nil {
					all[i].dev.Links = make(map[int]string)
				}
				all[i].dev.Links[j] = kind
			}
		}
		inv.Devices = append(inv.Devices, all[i].dev)
	}
	switch {
	case len(skipped) > 0:
		inv.Reason = "skipped " + strings.Join(skipped, "; ")
	case n == 0:
		inv.Reason = "the NVIDIA driver reports no GPUs"
	}
	return inv
}

// initReason turns a failed nvml.Init into the one line users see.
func initReason(ret nvml.Return) string {
	switch ret {
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return "no NVIDIA driver: libnvidia-ml.so.1 was not found"
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return "the NVIDIA driver is installed but not loaded"
	case nvml.ERROR_NO_PERMISSION:
		return "no permission to talk to the NVIDIA driver"
	case nvml.ERROR_LIB_RM_VERSION_MISMATCH:
		return "the NVIDIA driver and its NVML library have different versions (reboot after a driver update?)"
	}
	return "NVML did not start: " + ret.Error()
}

// describe reads one GPU's identity and memory.
func describe(h nvml.Device) (Device, busAddr, error) {
	d := Device{Kind: CUDA}
	pci, ret := h.GetPciInfo()
	if ret != nvml.SUCCESS {
		return d, busAddr{}, fmt.Errorf("PCI info: %v", ret)
	}
	d.PCIBusID = cString(pci.BusId[:])
	addr, err := parseBusID(d.PCIBusID)
	if err != nil {
		return d, busAddr{}, err
	}
	mem, ret := h.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return d, busAddr{}, fmt.Errorf("memory info: %v", ret)
	}
	d.MemoryTotal, d.MemoryFree = mem.Total, mem.Free
	// Name, UUID and compute capability are for people; a GPU whose driver
	// does not report them is still usable.
	if name, ret := h.GetName(); ret == nvml.SUCCESS {
		d.Name = name
	}
	if uuid, ret := h.GetUUID(); ret == nvml.SUCCESS {
		d.UUID = uuid
	}
	if major, minor, ret := h.GetCudaComputeCapability(); ret == nvml.SUCCESS {
		d.ComputeCapability = fmt.Sprintf("%d.%d", major, minor)
	}
	return d, addr, nil
}

// link says how a reaches b: NVLink when peer access over it is possible,
// otherwise the PCIe topology level of their closest common ancestor.
func link(a, b nvml.Device) (string, bool) {
	if st, ret := a.GetP2PStatus(b, nvml.P2P_CAPS_INDEX_NVLINK); ret == nvml.SUCCESS && st == nvml.P2P_STATUS_OK {
		return LinkNVLink, true
	}
	level, ret := a.GetTopologyCommonAncestor(b)
	if ret != nvml.SUCCESS {
		return "", false
	}
	switch level {
	case nvml.TOPOLOGY_INTERNAL:
		return LinkSameBoard, true
	case nvml.TOPOLOGY_SINGLE, nvml.TOPOLOGY_MULTIPLE:
		return LinkPCIeSwitch, true
	case nvml.TOPOLOGY_HOSTBRIDGE:
		return LinkHostBridge, true
	case nvml.TOPOLOGY_NODE:
		return LinkNUMANode, true
	case nvml.TOPOLOGY_SYSTEM:
		return LinkCrossSocket, true
	}
	return "", false
}

// cString reads a NUL-terminated C char array.
func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}
