// Package cuda runs Tandem's kernels on NVIDIA GPUs through the CUDA driver
// API, with no cgo and no CUDA toolkit on the user's machine: libcuda.so.1 is
// opened with purego at run time and the kernels ship as PTX embedded in the
// binary, compiled by the driver on first use.
//
// The driver API is small and stable, so it is bound by hand here (driver.go)
// rather than through a generated binding that would need cgo. CUDA contexts
// are current per OS thread, so every driver call runs on a goroutine locked
// to its thread (worker.go): one per device, or one shared by the devices
// of a model placement, which switches contexts between their calls. The
// members of an all-reduce group always share one (allreduce.go says why).
//
// Sources of the kernels live in src/*.cu; `go generate` (gen.sh) turns them
// into ptx/*.ptx and the Hopper variant ptx/sm90/*.ptx with nvcc, which
// exists only where the GPU is, and the PTX is committed. src/sm90a/*.cu
// become ptx/sm90a/*.ptx, extra kernels on instructions only compute
// capability 9.0 has (wgmma: the F16 prefill tiles, which run there at
// 290-430 TFLOP/s against 170-220 for the mma.sync tiles every GPU from
// sm_80 runs; kernels/cuda/NOTES.md, hf16's call). The backend loads them
// on such a GPU alone, beside the variant it picked, and a driver too old
// to compile them costs only their speed.
package cuda
