package plan

import "github.com/tandem-run/tandem/engine/device"

// CUDAContextBytes is what a process's CUDA context and Tandem's loaded
// kernel modules take on a GPU before any tensor. Measured on an H200
// (driver 580): engine's TestGPUMemoryMatchesPlan held 115 MiB of tensors
// while nvidia-smi counted 642 MiB for the process, i.e. 527 MiB of context,
// the same as llama.cpp's idle context on that GPU (../shared/bench/anchors.md).
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
