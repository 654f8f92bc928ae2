package device

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"
)

// maxVirtual bounds a spec string, which comes from a command line.
const maxVirtual = 256

// ParseVirtual reads a virtual-device spec, a comma-separated list of
// KIND:CAP items such as "cuda0:12GiB,cuda0:12GiB,cpu:8GiB": two logical
// 12 GiB devices on CUDA device 0 and one 8 GiB CPU device. KIND is cudaN or
// cpu; CAP is a size with a unit (12GiB, 12GB, 512MiB). Several logical
// devices may share one physical device; each gets its own cap, so the whole
// multi-device path can run on one GPU or on the CPU. Indices follow the
// order of the spec. Whether cudaN exists and has room is CheckVirtual's job.
func ParseVirtual(spec string) (Inventory, error) {
	items := strings.Split(spec, ",")
	if strings.TrimSpace(spec) == "" || len(items) > maxVirtual {
		return Inventory{}, fmt.Errorf("device: virtual devices %q: want 1 to %d items like cuda0:12GiB or cpu:8GiB", spec, maxVirtual)
	}
	inv := Inventory{Source: "virtual " + spec}
	for i, item := range items {
		d, err := parseVirtualItem(strings.TrimSpace(item))
		if err != nil {
			return Inventory{}, fmt.Errorf("device: virtual device %d (%q): %w", i, item, err)
		}
		d.Index = i
		inv.Devices = append(inv.Devices, d)
	}
	return inv, nil
}

func parseVirtualItem(item string) (Device, error) {
	kind, size, ok := strings.Cut(item, ":")
	if !ok {
		return Device{}, fmt.Errorf("want KIND:CAP, e.g. cuda0:12GiB")
	}
	if strings.TrimLeft(size, "0123456789. ") == "" {
		return Device{}, fmt.Errorf("cap %q needs a unit (GiB, GB, MiB)", size)
	}
	capBytes, err := humanize.ParseBytes(size)
	if err != nil {
		return Device{}, fmt.Errorf("cap: %w", err)
	}
	if capBytes == 0 {
		return Device{}, fmt.Errorf("cap is zero")
	}
	d := Device{Virtual: true, MemoryTotal: capBytes, MemoryFree: capBytes}
	switch {
	case kind == "cpu":
		d.Kind, d.Physical = CPU, -1
	case strings.HasPrefix(kind, "cuda"):
		n, err := strconv.Atoi(strings.TrimPrefix(kind, "cuda"))
		if err != nil || n < 0 {
			return Device{}, fmt.Errorf("kind %q: want cudaN (N a CUDA device index) or cpu", kind)
		}
		d.Kind, d.Physical = CUDA, n
	default:
		return Device{}, fmt.Errorf("kind %q: want cudaN (N a CUDA device index) or cpu", kind)
	}
	d.Name = fmt.Sprintf("virtual %s, %s cap", kind, humanize.IBytes(capBytes))
	return d, nil
}

// CheckVirtual says whether the physical GPUs can hold the virtual CUDA
// devices: each cudaN must exist and the caps placed on it must fit in its
// free memory. CPU devices are not checked (host memory is not inventoried).
func CheckVirtual(virtual, physical Inventory) error {
	want := make(map[int]uint64)
	for _, d := range virtual.Devices {
		if d.Kind == CUDA {
			want[d.Physical] += d.MemoryTotal
		}
	}
	for n, total := range want {
		p, ok := physical.Device(n)
		if !ok {
			return fmt.Errorf("device: virtual devices on cuda%d, which does not exist (%d GPUs found)", n, len(physical.Devices))
		}
		if total > p.Capacity() {
			return fmt.Errorf("device: virtual devices on cuda%d ask for %s in all, but %s has %s free",
				n, humanize.IBytes(total), p.Name, humanize.IBytes(p.Capacity()))
		}
	}
	return nil
}
