//go:build !(cgo && linux)

package device

// Probe cannot reach NVML in this build: go-nvml needs cgo on Linux. The
// inventory is empty and says why; a JSON inventory file still works.
func Probe() Inventory {
	return Inventory{
		Source: "none",
		Reason: "this build has no NVML (it needs cgo on Linux); use an inventory file (--devices-file)",
	}
}
