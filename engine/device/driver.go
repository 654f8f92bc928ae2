package device

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tandem-run/tandem/kernels/cuda"
)

// driverSource names inventories read through the CUDA driver API, which
// builds without cgo (the headless build) use in place of NVML.
const driverSource = "CUDA driver API, CUDA_DEVICE_ORDER=PCI_BUS_ID"

// probeDriver lists the GPUs through the CUDA driver API (libcuda, loaded
// with purego by kernels/cuda). It never fails: without a driver the
// inventory is empty and says why.
func probeDriver() Inventory {
	gpus, err := cuda.Inventory()
	return fromDriver(gpus, err)
}

// fromDriver turns the driver's view into an inventory: ordered by PCI
// bus id as NVML's is, peer access as links of unknown kind.
func fromDriver(gpus []cuda.GPU, err error) Inventory {
	inv := Inventory{Source: driverSource}
	switch {
	case errors.Is(err, cuda.ErrNoDriver):
		inv.Reason = "no NVIDIA driver: libcuda.so.1 was not found"
		return inv
	case errors.Is(err, cuda.ErrNoDevice):
		inv.Reason = "the NVIDIA driver reports no GPUs"
		return inv
	case err != nil:
		inv.Reason = "the CUDA driver could not list the GPUs: " + strings.ReplaceAll(err.Error(), "\n", " ")
		return inv
	case len(gpus) == 0:
		inv.Reason = "the NVIDIA driver reports no GPUs"
		return inv
	}
	type found struct {
		dev  Device
		addr busAddr
		ord  int
	}
	var all []found
	var skipped []string
	for _, g := range gpus {
		addr, err := parseBusID(g.PCIBusID)
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("CUDA device %d: %v", g.Ordinal, err))
			continue
		}
		all = append(all, found{Device{
			Name: g.Name, UUID: g.UUID, PCIBusID: g.PCIBusID,
			MemoryTotal: uint64(max(g.TotalMemory, 0)), MemoryFree: uint64(max(g.FreeMemory, 0)),
			ComputeCapability: fmt.Sprintf("%d.%d", g.ComputeMajor, g.ComputeMinor), Kind: CUDA,
		}, addr, g.Ordinal})
	}
	slices.SortFunc(all, func(a, b found) int { return compareBusAddr(a.addr, b.addr) })
	index := map[int]int{} // driver ordinal -> index in bus order
	for i := range all {
		all[i].dev.Index, all[i].dev.Physical = i, i
		index[all[i].ord] = i
	}
	for i, f := range all {
		for _, g := range gpus {
			if g.Ordinal != f.ord {
				continue
			}
			for _, p := range g.Peers {
				if j, ok := index[p]; ok {
					if all[i].dev.Links == nil {
						all[i].dev.Links = map[int]string{}
					}
					all[i].dev.Links[j] = LinkPeer
				}
			}
		}
		inv.Devices = append(inv.Devices, all[i].dev)
	}
	if len(skipped) > 0 {
		inv.Reason = "skipped " + strings.Join(skipped, "; ")
	}
	return inv
}
