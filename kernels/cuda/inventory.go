package cuda

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego"
)

// GPU is one device as the driver API describes it: what a GPU inventory
// needs where NVML (which wants cgo) is not there.
type GPU struct {
	Ordinal      int
	Name         string
	UUID         string // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi prints it; "" if the driver has no cuDeviceGetUuid
	PCIBusID     string // "00000000:1B:00.0", as NVML writes it
	ComputeMajor int
	ComputeMinor int
	TotalMemory  int64
	FreeMemory   int64 // 0 when it could not be read (the device refused a context)
	Peers        []int // ordinals of the GPUs this one can reach directly (cuDeviceCanAccessPeer)
}

// PCI attributes of CUdevice_attribute.
const (
	attrPCIBusID    = 33
	attrPCIDeviceID = 34
	attrPCIDomainID = 50
)

// Inventory lists the GPUs the driver sees, with their PCI addresses,
// UUIDs, free memory and peer access. Free memory needs each device's
// primary context for a moment (the driver API has no other way to ask),
// made and released on one locked thread. With no driver it returns
// ErrNoDriver.
func Inventory() ([]GPU, error) {
	d, err := openDriver()
	if err != nil {
		return nil, err
	}
	n, err := d.deviceCount()
	if err != nil {
		return nil, err
	}
	// cuDeviceGetUuid_v2 (CUDA 11.4) or the older one; either fills 16 bytes.
	uuidFn, _ := purego.Dlsym(d.lib, "cuDeviceGetUuid_v2")
	if uuidFn == 0 {
		uuidFn, _ = purego.Dlsym(d.lib, "cuDeviceGetUuid")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	gpus := make([]GPU, 0, n)
	devs := make([]cuDevice, n)
	for i := range n {
		g := GPU{Ordinal: i}
		dev, err := d.device(i)
		if err != nil {
			return nil, err
		}
		devs[i] = dev
		if g.Name, err = d.deviceName(dev); err != nil {
			return nil, err
		}
		if g.TotalMemory, err = d.totalMem(dev); err != nil {
			return nil, err
		}
		var bus, slot, domain int
		for _, a := range []struct {
			attr int
			dst  *int
		}{
			{attrComputeMajor, &g.ComputeMajor}, {attrComputeMinor, &g.ComputeMinor},
			{attrPCIBusID, &bus}, {attrPCIDeviceID, &slot}, {attrPCIDomainID, &domain},
		} {
			if *a.dst, err = d.attribute(dev, a.attr); err != nil {
				return nil, err
			}
		}
		g.PCIBusID = fmt.Sprintf("%08X:%02X:%02X.0", domain, bus, slot)
		if uuidFn != 0 {
			var u [16]byte
			if d.call(uuidFn, uintptr(unsafe.Pointer(&u[0])), uintptr(dev)) == 0 {
				g.UUID = fmt.Sprintf("GPU-%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
			}
		}
		g.FreeMemory = d.freeMemory(dev)
		gpus = append(gpus, g)
	}
	for i := range gpus {
		for j := range gpus {
			if i == j {
				continue
			}
			if ok, err := d.canAccessPeer(devs[i], devs[j]); err == nil && ok {
				gpus[i].Peers = append(gpus[i].Peers, j)
			}
		}
	}
	return gpus, nil
}

// freeMemory reads a device's free memory through its primary context,
// on the calling (locked) thread; 0 when the device refuses a context
// (exclusive compute mode held by another process, say).
func (d *driver) freeMemory(dev cuDevice) int64 {
	ctx, err := d.retainPrimary(dev)
	if err != nil {
		return 0
	}
	defer d.releasePrimary(dev)
	if d.setCurrent(ctx) != nil {
		return 0
	}
	defer d.setCurrent(0)
	free, _, err := d.memInfo()
	if err != nil {
		return 0
	}
	return free
}
