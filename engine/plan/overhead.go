package plan

import "github.com/tandem-run/tandem/engine/device"

// CUDAContextBytes is what a CUDA context takes on a GPU before any tensor:
// provisional, from llama.cpp on an H200 (527 MiB on an otherwise idle GPU,
// ../shared/bench/anchors.md), until the CUDA backend measures its own.
const CUDAContextBytes int64 = 527 << 20

// Overhead is the memory a device costs before the plan's allocations: a
// CUDA context on a real GPU; nothing on the CPU, and nothing inside a
// virtual device's cap (its GPU's context is outside every cap).
func Overhead(d device.Device) int64 {
	if d.Kind == device.CUDA && !d.Virtual {
		return CUDAContextBytes
	}
	return 0
}
