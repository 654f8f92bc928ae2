// Package cuda runs Tandem's kernels on NVIDIA GPUs through the CUDA driver
// API, with no cgo and no CUDA toolkit on the user's machine: libcuda.so.1 is
// opened with purego at run time and the kernels ship as PTX embedded in the
// binary, compiled by the driver on first use.
//
// The driver API is small and stable, so it is bound by hand here (driver.go)
// rather than through a generated binding that would need cgo. CUDA contexts
// belong to OS threads, so every device has one worker goroutine locked to its
// thread, and every driver call for that device runs there (worker.go).
//
// Sources of the kernels live in src/*.cu; `go generate` (gen.sh) turns them
// into ptx/*.ptx with nvcc, which exists only where the GPU is, and the PTX is
// committed.
package cuda
