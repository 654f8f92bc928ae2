//go:build !(cgo && linux)

package device

// Probe lists the GPUs through the CUDA driver API: builds without cgo
// (the headless one) have no NVML, which go-nvml reaches through cgo.
// Without a driver the inventory is empty and says why; a JSON inventory
// file still works.
func Probe() Inventory {
	return probeDriver()
}
