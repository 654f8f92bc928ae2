package device

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
)

// busAddr is a PCI address, domain:bus:device.function, in the order CUDA's
// PCI_BUS_ID ordering compares them.
type busAddr [4]uint64

// parseBusID reads NVML's "00000000:1B:00.0" (or the short "0000:1b:00.0").
func parseBusID(s string) (busAddr, error) {
	var a busAddr
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return a, fmt.Errorf("pci bus id %q: want DOMAIN:BUS:DEVICE.FUNCTION", s)
	}
	devFn := strings.Split(parts[2], ".")
	if len(devFn) != 2 {
		return a, fmt.Errorf("pci bus id %q: want DOMAIN:BUS:DEVICE.FUNCTION", s)
	}
	fields := []string{parts[0], parts[1], devFn[0], devFn[1]}
	for i, f := range fields {
		v, err := strconv.ParseUint(f, 16, 32)
		if err != nil {
			return a, fmt.Errorf("pci bus id %q: %w", s, err)
		}
		a[i] = v
	}
	return a, nil
}

func compareBusAddr(x, y busAddr) int {
	for i := range x {
		if c := cmp.Compare(x[i], y[i]); c != 0 {
			return c
		}
	}
	return 0
}
