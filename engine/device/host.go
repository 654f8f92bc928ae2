package device

import (
	"bufio"
	"io"
	"os"
	"strconv"
	"strings"
)

// Host is this computer's CPU as a device: Kind CPU, index 0, its memory
// the total and the available now of /proc/meminfo (both zero where that
// cannot be read).
func Host() Device {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return HostFrom(nil)
	}
	defer f.Close()
	return HostFrom(f)
}

// HostFrom is Host with meminfo, /proc/meminfo's text, read from r (nil:
// memory unknown).
func HostFrom(meminfo io.Reader) Device {
	d := Device{Kind: CPU, Name: "host memory", Physical: -1}
	if meminfo != nil {
		d.MemoryTotal, d.MemoryFree = parseMeminfo(meminfo)
	}
	return d
}

// parseMeminfo reads MemTotal and MemAvailable (kB) from /proc/meminfo.
func parseMeminfo(r io.Reader) (total, avail uint64) {
	s := bufio.NewScanner(r)
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) < 2 {
			continue
		}
		n, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "MemTotal:":
			total = n << 10
		case "MemAvailable:":
			avail = n << 10
		}
	}
	return total, avail
}
