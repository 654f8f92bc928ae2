package device

import (
	"bytes"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The committed example inventories: name, device count, and the smallest
// and largest card in GB (decimal, as vendors sell them).
var examples = []struct {
	file         string
	n            int
	minGB, maxGB float64
}{
	{"1x24GB.json", 1, 24, 26},
	{"2x16GB.json", 2, 16, 18},
	{"2x12GB.json", 2, 12, 13},
	{"8x-mixed.json", 8, 11, 52},
	{"1x141GB.json", 1, 140, 151},
	{"11x24GB.json", 11, 24, 26},
}

func TestExampleInventories(t *testing.T) {
	for _, ex := range examples {
		t.Run(ex.file, func(t *testing.T) {
			inv, err := ReadFile(filepath.Join("testdata", ex.file))
			if err != nil {
				t.Fatal(err)
			}
			if len(inv.Devices) != ex.n {
				t.Fatalf("%d devices, want %d", len(inv.Devices), ex.n)
			}
			for i, d := range inv.Devices {
				gb := float64(d.MemoryTotal) / 1e9
				if d.Index != i || gb < ex.minGB || gb > ex.maxGB || d.Capacity() != d.MemoryFree || d.Kind != CUDA {
					t.Errorf("device %+v: want index %d, %.0f-%.0f GB, capacity = free", d, i, ex.minGB, ex.maxGB)
				}
				if len(d.Links) != 0 && len(d.Links) != ex.n-1 {
					t.Errorf("device %d has %d links, want none or %d", i, len(d.Links), ex.n-1)
				}
			}
			var buf bytes.Buffer
			if err := inv.WriteJSON(&buf); err != nil {
				t.Fatal(err)
			}
			back, err := Read(&buf)
			if err != nil {
				t.Fatalf("reading back what WriteJSON wrote: %v", err)
			}
			if !reflect.DeepEqual(back.Devices, inv.Devices) {
				t.Errorf("round trip changed the devices:\n%+v\n%+v", back.Devices, inv.Devices)
			}
		})
	}
}

func TestReadMirrorsLinks(t *testing.T) {
	inv, err := Read(strings.NewReader(`{"devices": [
		{"index": 1, "name": "b", "memory_total": 100, "memory_free": 0},
		{"index": 0, "name": "a", "memory_total": 100, "memory_free": 50, "links": {"1": "nvlink"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if inv.Devices[0].Name != "a" || inv.Devices[1].Links[0] != LinkNVLink {
		t.Errorf("devices %+v: want index order and the link mirrored", inv.Devices)
	}
	if inv.Devices[1].Capacity() != 100 || inv.Devices[0].Capacity() != 50 || inv.Devices[0].MemoryUsed() != 50 {
		t.Errorf("capacity: want total when free is unknown, free otherwise")
	}
}

func TestReadEmpty(t *testing.T) {
	inv, err := Read(strings.NewReader(`{"devices": []}`))
	if err != nil || len(inv.Devices) != 0 || inv.Reason == "" {
		t.Errorf("empty inventory: %+v, %v; want no devices and a reason", inv, err)
	}
	var buf bytes.Buffer
	if err := (Inventory{}).WriteJSON(&buf); err != nil || !strings.Contains(buf.String(), `"devices": []`) {
		t.Errorf("empty inventory writes %q, %v", buf.String(), err)
	}
}

func TestReadRejects(t *testing.T) {
	for _, tc := range []struct{ name, json, want string }{
		{"not json", `devices`, "invalid"},
		{"unknown field", `{"devices": [{"index": 0, "memory_totl": 5}]}`, "unknown field"},
		{"negative index", `{"devices": [{"index": -1, "memory_total": 5}]}`, "negative"},
		{"duplicate index", `{"devices": [{"index": 0, "memory_total": 5}, {"index": 0, "memory_total": 5}]}`, "twice"},
		{"no total", `{"devices": [{"index": 0, "memory_free": 5}]}`, "memory_total"},
		{"free over total", `{"devices": [{"index": 0, "memory_total": 5, "memory_free": 6}]}`, "exceeds"},
		{"bad bus id", `{"devices": [{"index": 0, "memory_total": 5, "pci_bus_id": "slot 3"}]}`, "pci bus id"},
		{"link to missing", `{"devices": [{"index": 0, "memory_total": 5, "links": {"4": "nvlink"}}]}`, "not another listed"},
		{"link to self", `{"devices": [{"index": 0, "memory_total": 5, "links": {"0": "nvlink"}}]}`, "not another listed"},
		{"unknown link", `{"devices": [{"index": 0, "memory_total": 5, "links": {"1": "wifi"}}, {"index": 1, "memory_total": 5}]}`, "link kind"},
		{"links disagree", `{"devices": [{"index": 0, "memory_total": 5, "links": {"1": "nvlink"}}, {"index": 1, "memory_total": 5, "links": {"0": "pcie-switch"}}]}`, "disagree"},
	} {
		_, err := Read(strings.NewReader(tc.json))
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "device: ") {
			t.Errorf("%s: error %v; want ErrInvalid mentioning %q", tc.name, err, tc.want)
		}
	}
}

func TestReadFileMissing(t *testing.T) {
	if _, err := ReadFile(filepath.Join(t.TempDir(), "none.json")); err == nil {
		t.Error("missing file: no error")
	}
}

func TestParseBusIDOrder(t *testing.T) {
	ids := []string{"00000000:1B:00.0", "0000:1b:00.1", "00000001:01:00.0", "00000000:9A:00.0"}
	var addrs []busAddr
	for _, s := range ids {
		a, err := parseBusID(s)
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, a)
	}
	// domain first, then bus, device and function
	if compareBusAddr(addrs[0], addrs[1]) >= 0 || compareBusAddr(addrs[1], addrs[3]) >= 0 || compareBusAddr(addrs[3], addrs[2]) >= 0 {
		t.Errorf("order of %v is wrong", ids)
	}
}
