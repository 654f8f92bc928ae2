package cuda

import (
	"errors"
	"fmt"
)

// Result is a CUresult: the status every driver call returns.
type Result int32

// Driver statuses this package looks at by value. Compare errors with
// errors.Is(err, cuda.ErrOutOfMemory).
const (
	ErrInvalidValue   Result = 1
	ErrOutOfMemory    Result = 2
	ErrNotInitialized Result = 3
	ErrNoDevice       Result = 100
	ErrInvalidDevice  Result = 101
	ErrInvalidContext Result = 201
	ErrInvalidPTX     Result = 218
	ErrUnsupportedPTX Result = 222
	ErrNotFound       Result = 500
	ErrNotReady       Result = 600
	ErrIllegalAddress Result = 700
	ErrLaunchFailed   Result = 719
)

// resultNames covers the statuses a user can meet in practice; any other
// is printed by number (the driver's own cuGetErrorName needs a live library,
// and an error must print after the library is gone).
var resultNames = map[Result]string{
	1:   "CUDA_ERROR_INVALID_VALUE",
	2:   "CUDA_ERROR_OUT_OF_MEMORY",
	3:   "CUDA_ERROR_NOT_INITIALIZED",
	4:   "CUDA_ERROR_DEINITIALIZED",
	34:  "CUDA_ERROR_STUB_LIBRARY",
	46:  "CUDA_ERROR_DEVICE_UNAVAILABLE",
	100: "CUDA_ERROR_NO_DEVICE",
	101: "CUDA_ERROR_INVALID_DEVICE",
	200: "CUDA_ERROR_INVALID_IMAGE",
	201: "CUDA_ERROR_INVALID_CONTEXT",
	209: "CUDA_ERROR_NO_BINARY_FOR_GPU",
	218: "CUDA_ERROR_INVALID_PTX",
	221: "CUDA_ERROR_JIT_COMPILER_NOT_FOUND",
	222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
	400: "CUDA_ERROR_INVALID_HANDLE",
	500: "CUDA_ERROR_NOT_FOUND",
	600: "CUDA_ERROR_NOT_READY",
	700: "CUDA_ERROR_ILLEGAL_ADDRESS",
	701: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
	702: "CUDA_ERROR_LAUNCH_TIMEOUT",
	704: "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
	709: "CUDA_ERROR_CONTEXT_IS_DESTROYED",
	715: "CUDA_ERROR_ILLEGAL_INSTRUCTION",
	716: "CUDA_ERROR_MISALIGNED_ADDRESS",
	719: "CUDA_ERROR_LAUNCH_FAILED",
	801: "CUDA_ERROR_NOT_SUPPORTED",
	900: "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
	901: "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
	999: "CUDA_ERROR_UNKNOWN",
}

func (r Result) Error() string {
	if n, ok := resultNames[r]; ok {
		return n
	}
	return fmt.Sprintf("CUresult %d", int32(r))
}

// ErrNoDriver means libcuda could not be opened: no NVIDIA driver on this
// machine (or not on this OS). Callers fall back to the CPU.
var ErrNoDriver = errors.New("cuda: no NVIDIA driver (libcuda.so.1 not found)")

// ErrClosed is returned by calls on a device after Close.
var ErrClosed = errors.New("cuda: device closed")

// ErrBadOption is an Options field out of its range.
var ErrBadOption = errors.New("cuda: bad option")

// ErrMemoryLimit is an allocation refused by a device's own cap (a virtual
// device), before the driver is asked.
var ErrMemoryLimit = errors.New("cuda: device memory limit reached")

// check turns a driver status into an error naming the call.
func check(call string, r Result) error {
	if r == 0 {
		return nil
	}
	return fmt.Errorf("cuda: %s: %w", call, r)
}
