package device

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
)

// Limits on an inventory file, which may come from anywhere.
const (
	maxInventoryBytes = 4 << 20
	maxDevices        = 1024
)

// ErrInvalid marks an inventory file that does not describe devices sanely.
var ErrInvalid = errors.New("invalid inventory")

// ReadFile reads an inventory written by `tandem devices --json` or by hand.
func ReadFile(path string) (Inventory, error) {
	f, err := os.Open(path)
	if err != nil {
		return Inventory{}, fmt.Errorf("device: %w", err)
	}
	defer f.Close()
	inv, err := Read(f)
	if err != nil {
		return Inventory{}, fmt.Errorf("device: %s: %w", path, err)
	}
	inv.Source = "file " + path
	return inv, nil
}

// Read decodes and checks an inventory: unique non-negative indices, a total
// memory for every device, free memory within it, links to devices that
// exist with known kinds. A link given one way only is mirrored. Unknown
// fields are refused so that a typo in a hand-written file is not silently a
// zero. Devices come back in index order, with Kind CUDA.
func Read(r io.Reader) (Inventory, error) {
	dec := json.NewDecoder(io.LimitReader(r, maxInventoryBytes))
	dec.DisallowUnknownFields()
	var inv Inventory
	if err := dec.Decode(&inv); err != nil {
		return Inventory{}, fmt.Errorf("device: %w: %w", ErrInvalid, err)
	}
	if len(inv.Devices) > maxDevices {
		return Inventory{}, fmt.Errorf("device: %w: %d devices (at most %d)", ErrInvalid, len(inv.Devices), maxDevices)
	}
	slices.SortFunc(inv.Devices, func(a, b Device) int { return a.Index - b.Index })
	for i := range inv.Devices {
		inv.Devices[i].Kind = CUDA
		inv.Devices[i].Physical = inv.Devices[i].Index
	}
	if err := inv.check(); err != nil {
		return Inventory{}, err
	}
	if len(inv.Devices) == 0 {
		inv.Reason = "the inventory lists no devices"
	}
	return inv, nil
}

// check validates a decoded inventory and mirrors one-way links.
func (inv Inventory) check() error {
	pos := make(map[int]int, len(inv.Devices))
	for i, d := range inv.Devices {
		switch {
		case d.Index < 0:
			return fmt.Errorf("device: %w: index %d is negative", ErrInvalid, d.Index)
		case i > 0 && inv.Devices[i-1].Index == d.Index:
			return fmt.Errorf("device: %w: index %d appears twice", ErrInvalid, d.Index)
		case d.MemoryTotal == 0:
			return fmt.Errorf("device: %w: device %d: memory_total is missing or zero", ErrInvalid, d.Index)
		case d.MemoryFree > d.MemoryTotal:
			return fmt.Errorf("device: %w: device %d: memory_free %d exceeds memory_total %d", ErrInvalid, d.Index, d.MemoryFree, d.MemoryTotal)
		}
		if d.PCIBusID != "" {
			if _, err := parseBusID(d.PCIBusID); err != nil {
				return fmt.Errorf("device: %w: device %d: %w", ErrInvalid, d.Index, err)
			}
		}
		pos[d.Index] = i
	}
	for _, d := range inv.Devices {
		for other, kind := range d.Links {
			j, ok := pos[other]
			switch {
			case !ok || other == d.Index:
				return fmt.Errorf("device: %w: device %d: link to device %d, which is not another listed device", ErrInvalid, d.Index, other)
			case !KnownLink(kind):
				return fmt.Errorf("device: %w: device %d: link kind %q (want nvlink, same-board, pcie-switch, host-bridge, numa-node or cross-socket)", ErrInvalid, d.Index, kind)
			}
			peer := &inv.Devices[j]
			if back, ok := peer.Links[d.Index]; ok && back != kind {
				return fmt.Errorf("device: %w: devices %d and %d disagree on their link (%s / %s)", ErrInvalid, d.Index, other, kind, back)
			}
			if peer.Links == nil {
				peer.Links = make(map[int]string)
			}
			peer.Links[d.Index] = kind
		}
	}
	return nil
}

// WriteJSON writes the inventory in the file format Read accepts.
func (inv Inventory) WriteJSON(w io.Writer) error {
	out := inv
	if out.Devices == nil {
		out.Devices = []Device{} // "devices": [] rather than null
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("device: %w", err)
	}
	return nil
}
