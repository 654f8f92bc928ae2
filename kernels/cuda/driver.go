package cuda

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Handles the driver gives out. They are opaque pointers (or, for devices,
// ordinals) and never dereferenced on the Go side.
type (
	cuDevice    int32
	cuContext   uintptr
	cuModule    uintptr
	cuFunction  uintptr
	cuStream    uintptr
	cuEvent     uintptr
	cuGraph     uintptr
	cuGraphExec uintptr
	devicePtr   uint64
)

// driver holds the addresses of the driver API entry points Tandem uses.
// Versioned names (_v2) are the ones current drivers export for 64-bit sizes.
type driver struct {
	lib uintptr

	cuInit, cuDriverGetVersion, cuDeviceGetCount, cuDeviceGet, cuDeviceGetName,
	cuDeviceGetAttribute, cuDeviceTotalMem, cuDevicePrimaryCtxRetain,
	cuDevicePrimaryCtxRelease, cuCtxSetCurrent, cuCtxSynchronize,
	cuModuleLoadDataEx, cuModuleUnload, cuModuleGetFunction, cuFuncSetAttribute,
	cuMemAlloc, cuMemFree, cuMemAllocHost, cuMemFreeHost, cuMemGetInfo,
	cuMemcpyHtoDAsync, cuMemcpyDtoHAsync, cuMemcpyDtoDAsync, cuMemcpyPeerAsync,
	cuMemsetD8Async, cuMemsetD32Async,
	cuStreamCreate, cuStreamDestroy, cuStreamSynchronize, cuStreamWaitEvent,
	cuEventCreate, cuEventRecord, cuEventSynchronize, cuEventElapsedTime, cuEventDestroy,
	cuStreamBeginCapture, cuStreamEndCapture, cuGraphInstantiate, cuGraphLaunch,
	cuGraphExecDestroy, cuGraphDestroy, cuLaunchKernel,
	cuDeviceCanAccessPeer, cuCtxEnablePeerAccess uintptr

	// cuLaunchKernelEx (CUDA 12.0) takes launch attributes; 0 where the
	// driver is older, and kernels then launch without them.
	cuLaunchKernelEx uintptr
	// cuFuncLoad (CUDA 12.4) loads a function that lazy loading has not
	// yet put on the device; 0 where the driver lacks it.
	cuFuncLoad uintptr
	// cuGraphUpload (CUDA 11.1) puts a graph's device resources in place
	// before its first launch; 0 where the driver lacks it, and the first
	// launch does it.
	cuGraphUpload uintptr
}

// libraryNames are tried in order; the unversioned name exists only where
// the development package is installed.
var libraryNames = [...]string{"libcuda.so.1", "libcuda.so"}

// openDriver dlopens libcuda, resolves every entry point and runs cuInit.
// A machine without the driver gets ErrNoDriver; nothing here can panic.
func openDriver() (*driver, error) {
	if runtime.GOOS != "linux" {
		return nil, ErrNoDriver
	}
	d := &driver{}
	var err error
	for _, name := range libraryNames {
		if d.lib, err = purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL); err == nil {
			break
		}
	}
	if d.lib == 0 {
		return nil, fmt.Errorf("%w: %v", ErrNoDriver, err)
	}
	syms := []struct {
		name string
		addr *uintptr
	}{
		{"cuInit", &d.cuInit},
		{"cuDriverGetVersion", &d.cuDriverGetVersion},
		{"cuDeviceGetCount", &d.cuDeviceGetCount},
		{"cuDeviceGet", &d.cuDeviceGet},
		{"cuDeviceGetName", &d.cuDeviceGetName},
		{"cuDeviceGetAttribute", &d.cuDeviceGetAttribute},
		{"cuDeviceTotalMem_v2", &d.cuDeviceTotalMem},
		{"cuDevicePrimaryCtxRetain", &d.cuDevicePrimaryCtxRetain},
		{"cuDevicePrimaryCtxRelease_v2", &d.cuDevicePrimaryCtxRelease},
		{"cuCtxSetCurrent", &d.cuCtxSetCurrent},
		{"cuCtxSynchronize", &d.cuCtxSynchronize},
		{"cuModuleLoadDataEx", &d.cuModuleLoadDataEx},
		{"cuModuleUnload", &d.cuModuleUnload},
		{"cuModuleGetFunction", &d.cuModuleGetFunction},
		{"cuFuncSetAttribute", &d.cuFuncSetAttribute},
		{"cuMemAlloc_v2", &d.cuMemAlloc},
		{"cuMemFree_v2", &d.cuMemFree},
		{"cuMemAllocHost_v2", &d.cuMemAllocHost},
		{"cuMemFreeHost", &d.cuMemFreeHost},
		{"cuMemGetInfo_v2", &d.cuMemGetInfo},
		{"cuMemcpyHtoDAsync_v2", &d.cuMemcpyHtoDAsync},
		{"cuMemcpyDtoHAsync_v2", &d.cuMemcpyDtoHAsync},
		{"cuMemcpyDtoDAsync_v2", &d.cuMemcpyDtoDAsync},
		{"cuMemcpyPeerAsync", &d.cuMemcpyPeerAsync},
		{"cuMemsetD8Async", &d.cuMemsetD8Async},
		{"cuMemsetD32Async", &d.cuMemsetD32Async},
		{"cuStreamCreate", &d.cuStreamCreate},
		{"cuStreamDestroy_v2", &d.cuStreamDestroy},
		{"cuStreamSynchronize", &d.cuStreamSynchronize},
		{"cuStreamWaitEvent", &d.cuStreamWaitEvent},
		{"cuEventCreate", &d.cuEventCreate},
		{"cuEventRecord", &d.cuEventRecord},
		{"cuEventSynchronize", &d.cuEventSynchronize},
		{"cuEventElapsedTime", &d.cuEventElapsedTime},
		{"cuEventDestroy_v2", &d.cuEventDestroy},
		{"cuStreamBeginCapture_v2", &d.cuStreamBeginCapture},
		{"cuStreamEndCapture", &d.cuStreamEndCapture},
		{"cuGraphInstantiateWithFlags", &d.cuGraphInstantiate},
		{"cuGraphLaunch", &d.cuGraphLaunch},
		{"cuGraphExecDestroy", &d.cuGraphExecDestroy},
		{"cuGraphDestroy", &d.cuGraphDestroy},
		{"cuLaunchKernel", &d.cuLaunchKernel},
		{"cuDeviceCanAccessPeer", &d.cuDeviceCanAccessPeer},
		{"cuCtxEnablePeerAccess", &d.cuCtxEnablePeerAccess},
	}
	for _, s := range syms {
		addr, err := purego.Dlsym(d.lib, s.name)
		if err != nil || addr == 0 {
			purego.Dlclose(d.lib)
			return nil, fmt.Errorf("cuda: driver too old: no %s: %w", s.name, ErrNoDriver)
		}
		*s.addr = addr
	}
	d.cuLaunchKernelEx, _ = purego.Dlsym(d.lib, "cuLaunchKernelEx")
	d.cuFuncLoad, _ = purego.Dlsym(d.lib, "cuFuncLoad")
	d.cuGraphUpload, _ = purego.Dlsym(d.lib, "cuGraphUpload")
	if err := check("cuInit", d.call(d.cuInit, 0)); err != nil {
		purego.Dlclose(d.lib)
		return nil, err
	}
	return d, nil
}

// call invokes a driver entry point. Pointer arguments are passed as
// uintptr(unsafe.Pointer(&x)) in the argument list; uintptrescapes keeps
// what they point to on the heap and alive for the duration of the call.
//
//go:uintptrescapes
func (d *driver) call(fn uintptr, args ...uintptr) Result {
	r, _, _ := purego.SyscallN(fn, args...)
	return Result(int32(uint32(r)))
}

// version is the driver's CUDA version as 1000*major + 10*minor.
func (d *driver) version() (int, error) {
	var v int32
	if err := check("cuDriverGetVersion", d.call(d.cuDriverGetVersion, uintptr(unsafe.Pointer(&v)))); err != nil {
		return 0, err
	}
	return int(v), nil
}

func (d *driver) deviceCount() (int, error) {
	var n int32
	if err := check("cuDeviceGetCount", d.call(d.cuDeviceGetCount, uintptr(unsafe.Pointer(&n)))); err != nil {
		return 0, err
	}
	return int(n), nil
}

func (d *driver) device(ordinal int) (cuDevice, error) {
	var dev cuDevice
	err := check("cuDeviceGet", d.call(d.cuDeviceGet, uintptr(unsafe.Pointer(&dev)), uintptr(ordinal)))
	return dev, err
}

func (d *driver) deviceName(dev cuDevice) (string, error) {
	buf := make([]byte, 256)
	if err := check("cuDeviceGetName", d.call(d.cuDeviceGetName, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(dev))); err != nil {
		return "", err
	}
	for i, c := range buf {
		if c == 0 {
			return string(buf[:i]), nil
		}
	}
	return string(buf), nil
}

// Device attributes (CUdevice_attribute) read at open.
const (
	attrMaxThreadsPerBlock   = 1
	attrMaxSharedPerBlock    = 8
	attrMultiprocessorCount  = 16
	attrComputeMajor         = 75
	attrComputeMinor         = 76
	attrMaxSharedOptin       = 97
	attrUnifiedAddressing    = 41
	attrMemoryBusWidth       = 37
	attrMemoryClockRate      = 36
	attrL2CacheSize          = 38
	attrCanUseHostPointer    = 34
	attrConcurrentManagedAcc = 89
)

func (d *driver) attribute(dev cuDevice, attr int) (int, error) {
	var v int32
	err := check("cuDeviceGetAttribute", d.call(d.cuDeviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(attr), uintptr(dev)))
	return int(v), err
}

func (d *driver) totalMem(dev cuDevice) (int64, error) {
	var n uint64
	err := check("cuDeviceTotalMem", d.call(d.cuDeviceTotalMem, uintptr(unsafe.Pointer(&n)), uintptr(dev)))
	return int64(n), err
}

func (d *driver) memInfo() (free, total int64, err error) {
	var f, t uint64
	err = check("cuMemGetInfo", d.call(d.cuMemGetInfo, uintptr(unsafe.Pointer(&f)), uintptr(unsafe.Pointer(&t))))
	return int64(f), int64(t), err
}

func (d *driver) retainPrimary(dev cuDevice) (cuContext, error) {
	var c cuContext
	err := check("cuDevicePrimaryCtxRetain", d.call(d.cuDevicePrimaryCtxRetain, uintptr(unsafe.Pointer(&c)), uintptr(dev)))
	return c, err
}

func (d *driver) releasePrimary(dev cuDevice) error {
	return check("cuDevicePrimaryCtxRelease", d.call(d.cuDevicePrimaryCtxRelease, uintptr(dev)))
}

func (d *driver) setCurrent(c cuContext) error {
	return check("cuCtxSetCurrent", d.call(d.cuCtxSetCurrent, uintptr(c)))
}

func (d *driver) memAlloc(n int64) (devicePtr, error) {
	var p devicePtr
	err := check("cuMemAlloc", d.call(d.cuMemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(n)))
	return p, err
}

func (d *driver) memFree(p devicePtr) error {
	return check("cuMemFree", d.call(d.cuMemFree, uintptr(p)))
}

// hostAlloc returns page-locked host memory, which async copies need to be
// truly asynchronous and which a captured graph may read.
func (d *driver) hostAlloc(n int) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	err := check("cuMemAllocHost", d.call(d.cuMemAllocHost, uintptr(unsafe.Pointer(&p)), uintptr(n)))
	return p, err
}

func (d *driver) hostFree(p unsafe.Pointer) error {
	return check("cuMemFreeHost", d.call(d.cuMemFreeHost, uintptr(p)))
}

func (d *driver) copyHtoD(dst devicePtr, src unsafe.Pointer, n int64, s cuStream) error {
	return check("cuMemcpyHtoDAsync", d.call(d.cuMemcpyHtoDAsync, uintptr(dst), uintptr(src), uintptr(n), uintptr(s)))
}

func (d *driver) copyDtoH(dst unsafe.Pointer, src devicePtr, n int64, s cuStream) error {
	return check("cuMemcpyDtoHAsync", d.call(d.cuMemcpyDtoHAsync, uintptr(dst), uintptr(src), uintptr(n), uintptr(s)))
}

func (d *driver) copyDtoD(dst, src devicePtr, n int64, s cuStream) error {
	return check("cuMemcpyDtoDAsync", d.call(d.cuMemcpyDtoDAsync, uintptr(dst), uintptr(src), uintptr(n), uintptr(s)))
}

func (d *driver) copyPeer(dst devicePtr, dstCtx cuContext, src devicePtr, srcCtx cuContext, n int64, s cuStream) error {
	return check("cuMemcpyPeerAsync", d.call(d.cuMemcpyPeerAsync, uintptr(dst), uintptr(dstCtx), uintptr(src), uintptr(srcCtx), uintptr(n), uintptr(s)))
}

func (d *driver) memset8(dst devicePtr, v byte, n int64, s cuStream) error {
	return check("cuMemsetD8Async", d.call(d.cuMemsetD8Async, uintptr(dst), uintptr(v), uintptr(n), uintptr(s)))
}

func (d *driver) memset32(dst devicePtr, v uint32, n int64, s cuStream) error {
	return check("cuMemsetD32Async", d.call(d.cuMemsetD32Async, uintptr(dst), uintptr(v), uintptr(n), uintptr(s)))
}

func (d *driver) streamCreate() (cuStream, error) {
	var s cuStream
	const nonBlocking = 1 // never serialise with the legacy default stream
	err := check("cuStreamCreate", d.call(d.cuStreamCreate, uintptr(unsafe.Pointer(&s)), nonBlocking))
	return s, err
}

func (d *driver) streamDestroy(s cuStream) error {
	return check("cuStreamDestroy", d.call(d.cuStreamDestroy, uintptr(s)))
}

func (d *driver) streamSync(s cuStream) error {
	return check("cuStreamSynchronize", d.call(d.cuStreamSynchronize, uintptr(s)))
}

func (d *driver) streamWaitEvent(s cuStream, e cuEvent) error {
	return check("cuStreamWaitEvent", d.call(d.cuStreamWaitEvent, uintptr(s), uintptr(e), 0))
}

func (d *driver) eventCreate(timed bool) (cuEvent, error) {
	var e cuEvent
	flags := uintptr(2) // CU_EVENT_DISABLE_TIMING
	if timed {
		flags = 0
	}
	err := check("cuEventCreate", d.call(d.cuEventCreate, uintptr(unsafe.Pointer(&e)), flags))
	return e, err
}

func (d *driver) eventRecord(e cuEvent, s cuStream) error {
	return check("cuEventRecord", d.call(d.cuEventRecord, uintptr(e), uintptr(s)))
}

func (d *driver) eventSync(e cuEvent) error {
	return check("cuEventSynchronize", d.call(d.cuEventSynchronize, uintptr(e)))
}

func (d *driver) eventElapsed(start, end cuEvent) (float32, error) {
	var ms float32
	err := check("cuEventElapsedTime", d.call(d.cuEventElapsedTime, uintptr(unsafe.Pointer(&ms)), uintptr(start), uintptr(end)))
	return ms, err
}

func (d *driver) eventDestroy(e cuEvent) error {
	return check("cuEventDestroy", d.call(d.cuEventDestroy, uintptr(e)))
}

// jit options of cuModuleLoadDataEx (CUjit_option).
const (
	jitErrorLogBuffer     = 5
	jitErrorLogBufferSize = 6
)

// moduleLoad JIT-compiles a PTX image. On failure the JIT's own log is
// part of the error: it names the line of PTX it could not take.
func (d *driver) moduleLoad(ptx []byte) (cuModule, error) {
	image := make([]byte, len(ptx)+1) // NUL-terminated
	copy(image, ptx)
	logBuf := make([]byte, 4096)
	opts := []int32{jitErrorLogBuffer, jitErrorLogBufferSize}
	vals := []uintptr{uintptr(unsafe.Pointer(&logBuf[0])), uintptr(len(logBuf))}
	var m cuModule
	r := d.call(d.cuModuleLoadDataEx, uintptr(unsafe.Pointer(&m)), uintptr(unsafe.Pointer(&image[0])),
		uintptr(len(opts)), uintptr(unsafe.Pointer(&opts[0])), uintptr(unsafe.Pointer(&vals[0])))
	runtime.KeepAlive(logBuf)
	if r != 0 {
		log := logBuf
		for i, c := range log {
			if c == 0 {
				log = log[:i]
				break
			}
		}
		return 0, fmt.Errorf("cuda: cuModuleLoadDataEx: %w: %s", r, log)
	}
	return m, nil
}

func (d *driver) moduleUnload(m cuModule) error {
	return check("cuModuleUnload", d.call(d.cuModuleUnload, uintptr(m)))
}

func (d *driver) moduleFunction(m cuModule, name string) (cuFunction, error) {
	cname := append([]byte(name), 0)
	var f cuFunction
	err := check("cuModuleGetFunction "+name, d.call(d.cuModuleGetFunction, uintptr(unsafe.Pointer(&f)), uintptr(m), uintptr(unsafe.Pointer(&cname[0]))))
	return f, err
}

// funcMaxDynamicShared is CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES.
const funcMaxDynamicShared = 8

func (d *driver) funcSetAttribute(f cuFunction, attr, value int) error {
	return check("cuFuncSetAttribute", d.call(d.cuFuncSetAttribute, uintptr(f), uintptr(attr), uintptr(value)))
}

// launch starts a kernel. params points at an array of pointers, one per
// kernel parameter, each pointing at that parameter's value.
func (d *driver) launch(f cuFunction, grid, block [3]uint32, shared uint32, s cuStream, params unsafe.Pointer) error {
	return check("cuLaunchKernel", d.call(d.cuLaunchKernel, uintptr(f),
		uintptr(grid[0]), uintptr(grid[1]), uintptr(grid[2]),
		uintptr(block[0]), uintptr(block[1]), uintptr(block[2]),
		uintptr(shared), uintptr(s), uintptr(params), 0))
}

// launchConfig is CUlaunchConfig: a launch's shape, its stream and its
// attributes (attrs points at numAttrs launchAttribute values).
type launchConfig struct {
	grid, block [3]uint32
	shared      uint32
	_           uint32
	stream      cuStream
	attrs       uintptr
	numAttrs    uint32
	_           uint32
}

// launchAttribute is CUlaunchAttribute: an id and a 64-byte value union.
type launchAttribute struct {
	id    uint32
	_     uint32
	value [16]uint32
}

// attrProgrammaticSerialization is
// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION: with a non-zero
// value the kernel may start before the previous kernel in the stream has
// finished, and waits for it itself (griddepcontrol.wait).
const attrProgrammaticSerialization = 6

// launchEx starts a kernel as cfg describes (cfg must not move: it is
// pinned by the caller). params is as for launch.
func (d *driver) launchEx(cfg *launchConfig, f cuFunction, params unsafe.Pointer) error {
	return check("cuLaunchKernelEx", d.call(d.cuLaunchKernelEx, uintptr(unsafe.Pointer(cfg)), uintptr(f), uintptr(params), 0))
}

// Stream capture mode CU_STREAM_CAPTURE_MODE_THREAD_LOCAL: only this
// thread's unsafe calls are refused while capturing.
const captureThreadLocal = 1

func (d *driver) beginCapture(s cuStream) error {
	return check("cuStreamBeginCapture", d.call(d.cuStreamBeginCapture, uintptr(s), captureThreadLocal))
}

func (d *driver) endCapture(s cuStream) (cuGraph, error) {
	var g cuGraph
	err := check("cuStreamEndCapture", d.call(d.cuStreamEndCapture, uintptr(s), uintptr(unsafe.Pointer(&g))))
	return g, err
}

func (d *driver) graphInstantiate(g cuGraph) (cuGraphExec, error) {
	var e cuGraphExec
	err := check("cuGraphInstantiate", d.call(d.cuGraphInstantiate, uintptr(unsafe.Pointer(&e)), uintptr(g), 0))
	return e, err
}

func (d *driver) graphLaunch(e cuGraphExec, s cuStream) error {
	return check("cuGraphLaunch", d.call(d.cuGraphLaunch, uintptr(e), uintptr(s)))
}

// graphUpload puts e's device resources in place, ordered on s, so that
// its first launch is a launch alone; a no-op where the driver lacks it.
func (d *driver) graphUpload(e cuGraphExec, s cuStream) error {
	if d.cuGraphUpload == 0 {
		return nil
	}
	return check("cuGraphUpload", d.call(d.cuGraphUpload, uintptr(e), uintptr(s)))
}

func (d *driver) graphExecDestroy(e cuGraphExec) error {
	return check("cuGraphExecDestroy", d.call(d.cuGraphExecDestroy, uintptr(e)))
}

func (d *driver) graphDestroy(g cuGraph) error {
	return check("cuGraphDestroy", d.call(d.cuGraphDestroy, uintptr(g)))
}

func (d *driver) canAccessPeer(dev, peer cuDevice) (bool, error) {
	var v int32
	err := check("cuDeviceCanAccessPeer", d.call(d.cuDeviceCanAccessPeer, uintptr(unsafe.Pointer(&v)), uintptr(dev), uintptr(peer)))
	return v != 0, err
}

// funcLoad puts f on the device now if the driver's lazy loading has not
// yet; a driver without cuFuncLoad loads eagerly or at cuModuleGetFunction.
func (d *driver) funcLoad(f cuFunction) error {
	if d.cuFuncLoad == 0 {
		return nil
	}
	return check("cuFuncLoad", d.call(d.cuFuncLoad, uintptr(f)))
}

// enablePeer lets the current context reach peer's memory; enabling twice
// is not an error.
func (d *driver) enablePeer(peer cuContext) error {
	r := d.call(d.cuCtxEnablePeerAccess, uintptr(peer), 0)
	if r == 704 { // CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
		return nil
	}
	return check("cuCtxEnablePeerAccess", r)
}
