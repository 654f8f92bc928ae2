package cuda

import (
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/cuda/workspace"
	"github.com/tandem-run/tandem/kernels/quant"
)

// Options selects and limits a device.
type Options struct {
	// Ordinal is the CUDA device number (0 for the first GPU).
	Ordinal int
	// Name is the backend's name in messages and plans; "cuda<Ordinal>"
	// when empty. Virtual devices on one GPU need distinct names.
	Name string
	// MemoryLimit caps the bytes this backend may allocate (0: no cap). It
	// makes one GPU act as several smaller virtual devices.
	MemoryLimit int64
	// Kernels holds the PTX files to load (ptx/*.ptx and ptx/sm90/*.ptx)
	// instead of the ones embedded in the binary; for trying kernels
	// without a rebuild.
	Kernels fs.FS
	// Worker is the thread to make this backend's driver calls on, shared
	// with other backends (see Worker); nil: a thread of its own.
	Worker *Worker
	// SerialLaunch turns programmatic dependent launch off on GPUs that
	// have it (compute capability 9.0 and later): each kernel is then
	// scheduled only once the one before it has finished, as on older
	// GPUs. For measuring what dependent launch gains.
	SerialLaunch bool
	// MatVecRows is the most rows a product runs with the matrix-vector
	// kernels (a warp per weight row or two, reading each weight once for
	// all rows); larger batches run on tensor cores where the weight type
	// has a kernel for them. 0: the default of each weight type
	// (defaultVecRows); at most workspace.MaxVectorRows. For measuring one
	// path against the other: 1 runs every batch above one row on tensor
	// cores.
	MatVecRows int
	// MatVecWeightRows is how many weight rows a warp of the integer and
	// F16 matrix-vector kernels takes, 1 or 2; 0: the default
	// (defaultWeightRows). For measuring one against the other.
	MatVecWeightRows int
	// MVXBlockRows is how many weight rows a block of the Q4_K verification
	// kernel takes for 2-8 rows: 16 (mvx_q4_k_8) or 32 (mvx2_q4_k_8, two
	// blocks a multiprocessor); 0: the default (mvxBlockRows). For
	// measuring one against the other.
	MVXBlockRows int
	// MVXPairRows is the most rows the Q4_K and Q6_K verification products
	// run on mvxp_<type> (an mma's columns two batch rows times four decode
	// lanes' groups or quarters, no idle columns), 2, 4 or 8 (Q4_K's
	// kernels go to 4; Q6_K's start at 3 rows, its 2 rows staying on the
	// matrix-vector kernels); above, and with -1, they run on mvx_<type>.
	// 0: the default (defaultMVXPairRows: Q4_K up to 4, Q6_K none). For
	// measuring one against the other.
	MVXPairRows int
	// Blocking makes the backend's own thread (not a Worker's) and its
	// callers wait for work by blocking at once, as before spinning was
	// added (see worker.next and worker.do). For measuring what the spin
	// saves.
	Blocking bool
	// PrefillTile picks the tensor-core tile of products of more than 32
	// rows, for measuring one against another: 0 the default (mmaShape),
	// 64 or 128 the shared-memory tiles of 128 weight rows by that many
	// batch rows (mmt, on every weight type that has them), -1 the
	// register tiles (mmq, mmf16).
	PrefillTile int
	// PrefillF32 makes the prefill tiles of integer weights read F32
	// activations rather than their 8-bit copy (for measuring).
	PrefillF32 bool
	// PrefillDepth is how many steps of 32 ahead the register-set
	// prefill tiles (mmt) of 8-bit and F16 activations issue their loads,
	// 2 to 4; 0: the default (mmtDepth). For measuring.
	PrefillDepth int
	// PrefillRing picks the prefill tiles of F16, Q4_K and Q6_K weights:
	// 0 the default (mmtcStages), 3 or 4 the cp.async tiles of that many
	// shared-memory stages (mmtc, sm_80 and later), -1 the register-set
	// tiles (mmt). For measuring one against the other.
	PrefillRing int
	// PrefillWGMMA picks the prefill tile of F16 weights on compute
	// capability 9.0, where the wgmma tiles (ptx/sm90a, mmtw) load: 0 the
	// default (mmtwDefault stages), 4 to 6 that many shared-memory stages,
	// -1 none (the mma.sync tiles of PrefillRing). A PrefillRing other than
	// 0 also leaves them out. For measuring one against the other.
	PrefillWGMMA int
}

// DeviceInfo describes a GPU as the driver reports it.
type DeviceInfo struct {
	Ordinal         int
	Name            string
	ComputeMajor    int
	ComputeMinor    int
	Multiprocessors int
	TotalMemory     int64
	L2Bytes         int
	SharedOptin     int // bytes of shared memory a block may ask for (cuFuncSetAttribute)
	DriverVersion   int // 1000*major + 10*minor, e.g. 13000
}

// Devices lists the GPUs the driver sees. It needs no context, so it is
// cheap; with no driver it returns ErrNoDriver.
func Devices() ([]DeviceInfo, error) {
	d, err := openDriver()
	if err != nil {
		return nil, err
	}
	n, err := d.deviceCount()
	if err != nil {
		return nil, err
	}
	infos := make([]DeviceInfo, 0, n)
	for i := 0; i < n; i++ {
		info, err := d.describe(i)
		if err != nil {
			return nil, err
		}
		infos = append(infos, info)
	}
	return infos, nil
}

func (d *driver) describe(ordinal int) (DeviceInfo, error) {
	info := DeviceInfo{Ordinal: ordinal}
	dev, err := d.device(ordinal)
	if err != nil {
		return info, err
	}
	if info.Name, err = d.deviceName(dev); err != nil {
		return info, err
	}
	if info.TotalMemory, err = d.totalMem(dev); err != nil {
		return info, err
	}
	if info.DriverVersion, err = d.version(); err != nil {
		return info, err
	}
	for _, a := range []struct {
		attr int
		dst  *int
	}{
		{attrComputeMajor, &info.ComputeMajor},
		{attrComputeMinor, &info.ComputeMinor},
		{attrMultiprocessorCount, &info.Multiprocessors},
		{attrL2CacheSize, &info.L2Bytes},
		{attrMaxSharedOptin, &info.SharedOptin},
	} {
		if *a.dst, err = d.attribute(dev, a.attr); err != nil {
			return info, err
		}
	}
	return info, nil
}

// Backend is one CUDA device (or a capped share of one: a virtual device)
// as a kernels.Backend. All its driver work runs on one locked thread (its
// own, or a Worker shared with other backends), in order, on one stream.
type Backend struct {
	name  string
	info  DeviceInfo
	limit int64

	drv *driver
	// w is the thread of the backend's driver calls: its own, a Worker's,
	// or, once in a reduce group, the group's (Group). Set before any
	// other call that may race with it.
	w       *worker
	errs    pending     // failures of posted work, reported by the next wait
	gone    atomic.Bool // closed: its context is released, calls fail
	dev     cuDevice
	ctx     cuContext
	stream  cuStream
	modules []cuModule
	kernels kernelIndex
	args    *launchArgs // touched only on the device thread
	depend  bool        // kernels launch with programmatic dependent launch
	vecRows int         // Options.MatVecRows (0: defaultVecRows)
	wRows   int         // Options.MatVecWeightRows (0: defaultWeightRows)
	pTile   int         // Options.PrefillTile
	pF32    bool        // Options.PrefillF32
	pDepth  int         // Options.PrefillDepth
	pRing   int         // Options.PrefillRing
	pWG     int         // Options.PrefillWGMMA
	wgmma   bool        // the sm_90a kernels (ptx/sm90a) are loaded
	// shape overrides mmaShape (benchmarks of every tile shape); nil: mmaShape
	shape func(nb int) (mt, nt int)
	// warps overrides mmaWarps for the few-row shapes (benchmarks); 0: mmaWarps
	warps int
	// mvxRows is the weight rows a block of mvx_q4_k takes, 16 or 32
	// (benchmarks); 0: mvxBlockRows
	mvxRows int
	// mvxpRows is Options.MVXPairRows (0: defaultMVXPairRows, -1: none)
	mvxpRows int
	// mvxpOcc4 puts Q4_K products of 2 rows on mvxp4_q4_k_2 (benchmarks)
	mvxpOcc4 bool
	prof     *profiler // device thread only; nil unless profiling
	scratch  sharedScratch
	peers    peerLinks // copies from other backends

	mu     sync.Mutex // guards the fields below
	usage  kernels.Usage
	held   int64
	live   map[*buffer]struct{}
	slab   *slab // where Alloc and Upload put buffers next (ReserveSlab)
	closed bool
}

var _ kernels.Backend = (*Backend)(nil)

// maxParams bounds a kernel's parameter count.
const maxParams = 32

// launchArgs is what a launch hands the driver: the parameter block
// (ptrs[i] points at vals[i]) and, for cuLaunchKernelEx, the launch's
// configuration and attribute. It lives on the heap (never moves) and is
// pinned for the driver's sake.
type launchArgs struct {
	vals [maxParams]uint64
	ptrs [maxParams]uintptr
	cfg  launchConfig
	attr launchAttribute
	pin  runtime.Pinner
}

// Open makes the device's primary context current on the backend's thread
// (o.Worker's, or a new one of its own), creates a stream and loads the
// kernels (ptx/sm90 on compute capability 9.0 and later, else ptx). Without a driver
// or a device it returns an error (ErrNoDriver, ErrInvalidDevice, ...).
func Open(o Options) (*Backend, error) {
	if o.MatVecRows < 0 || o.MatVecRows > workspace.MaxVectorRows {
		return nil, fmt.Errorf("%w: MatVecRows %d (0 to %d)", ErrBadOption, o.MatVecRows, workspace.MaxVectorRows)
	}
	if t := o.PrefillTile; t != 0 && t != 64 && t != 128 && t != -1 {
		return nil, fmt.Errorf("%w: PrefillTile %d (0, 64, 128 or -1)", ErrBadOption, t)
	}
	if d := o.PrefillDepth; d != 0 && (d < 2 || d > 4) {
		return nil, fmt.Errorf("%w: PrefillDepth %d (0, or 2 to 4)", ErrBadOption, d)
	}
	if r := o.PrefillRing; r != 0 && r != -1 && r != 3 && r != 4 {
		return nil, fmt.Errorf("%w: PrefillRing %d (0, -1, 3 or 4)", ErrBadOption, r)
	}
	if g := o.PrefillWGMMA; g != 0 && g != -1 && (g < 4 || g > 6) {
		return nil, fmt.Errorf("%w: PrefillWGMMA %d (0, -1, or 4 to 6)", ErrBadOption, g)
	}
	if o.MatVecWeightRows < 0 || o.MatVecWeightRows > 2 {
		return nil, fmt.Errorf("%w: MatVecWeightRows %d (0 to 2)", ErrBadOption, o.MatVecWeightRows)
	}
	if r := o.MVXBlockRows; r != 0 && r != 16 && r != 32 {
		return nil, fmt.Errorf("%w: MVXBlockRows %d (0, 16 or 32)", ErrBadOption, r)
	}
	if r := o.MVXPairRows; r != 0 && r != -1 && r != 2 && r != 4 && r != 8 {
		return nil, fmt.Errorf("%w: MVXPairRows %d (0, -1, 2, 4 or 8)", ErrBadOption, r)
	}
	d, err := openDriver()
	if err != nil {
		return nil, err
	}
	n, err := d.deviceCount()
	if err != nil {
		return nil, err
	}
	if o.Ordinal < 0 || o.Ordinal >= n {
		return nil, fmt.Errorf("cuda: device %d of %d: %w", o.Ordinal, n, ErrInvalidDevice)
	}
	info, err := d.describe(o.Ordinal)
	if err != nil {
		return nil, err
	}
	be := &Backend{
		name: o.Name, info: info, limit: o.MemoryLimit, drv: d, vecRows: o.MatVecRows, wRows: o.MatVecWeightRows,
		pTile: o.PrefillTile, pF32: o.PrefillF32, pDepth: o.PrefillDepth, pRing: o.PrefillRing,
		pWG: o.PrefillWGMMA, mvxRows: o.MVXBlockRows, mvxpRows: o.MVXPairRows,
		usage: kernels.Usage{}, live: map[*buffer]struct{}{},
		args: new(launchArgs),
	}
	if be.name == "" {
		be.name = fmt.Sprintf("cuda%d", o.Ordinal)
	}
	be.args.pin.Pin(be.args)
	for i := range be.args.ptrs {
		be.args.ptrs[i] = uintptr(unsafe.Pointer(&be.args.vals[i]))
	}
	be.args.attr.id = attrProgrammaticSerialization
	be.args.attr.value[0] = 1
	be.args.cfg.attrs = uintptr(unsafe.Pointer(&be.args.attr))
	be.args.cfg.numAttrs = 1
	kernelFS := o.Kernels
	if kernelFS == nil {
		kernelFS = ptxFiles
	}
	variant := "ptx"
	if info.ComputeMajor >= 9 && d.cuLaunchKernelEx != 0 && !o.SerialLaunch && hasDir(kernelFS, dependentPTX) {
		variant, be.depend = dependentPTX, true
	}
	if o.Worker != nil {
		be.w = o.Worker.w
	} else {
		be.w = newWorker(d, !o.Blocking)
		be.w.auto = true
	}
	if !be.w.hold() {
		be.args.pin.Unpin()
		return nil, ErrClosed
	}
	if err := be.w.do(0, nil, func() error { return be.setup(o.Ordinal, kernelFS, variant) }); err != nil {
		be.w.release()
		be.args.pin.Unpin()
		return nil, err
	}
	return be, nil
}

// setup runs on the device thread; on error it undoes what it did.
func (be *Backend) setup(ordinal int, kernelFS fs.FS, variant string) (err error) {
	d := be.drv
	if be.dev, err = d.device(ordinal); err != nil {
		return err
	}
	if be.ctx, err = d.retainPrimary(be.dev); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			be.teardown()
		}
	}()
	if err = be.w.use(be.ctx); err != nil {
		return err
	}
	if be.stream, err = d.streamCreate(); err != nil {
		return err
	}
	if err = be.loadModules(kernelFS, variant); err != nil {
		return err
	}
	be.loadArchModules(kernelFS)
	return nil
}

// teardown releases the context's resources; device thread only.
func (be *Backend) teardown() error {
	d := be.drv
	var errs []error
	for _, m := range be.modules {
		errs = append(errs, d.moduleUnload(m))
	}
	be.modules = nil
	if be.stream != 0 {
		errs = append(errs, d.streamDestroy(be.stream))
		be.stream = 0
	}
	if be.ctx != 0 {
		errs = append(errs, d.releasePrimary(be.dev))
		be.w.forget(be.ctx)
		be.ctx = 0
	}
	return errors.Join(errs...)
}

// mmaShape is the tensor-core tile for a product of nb rows of weights t
// with rows outputs.
func (be *Backend) mmaShape(t quant.Type, nb, rows int) (mt, nt int) {
	if be.shape != nil {
		return be.shape(nb)
	}
	if nb > 32 && be.pTile != 0 {
		switch {
		case be.pTile > 0 && mmtType(t):
			return 0, be.pTile / 8
		case be.pTile < 0 || mmtType(t):
			if t == quant.Q8_0 {
				return 2, 8
			}
			return 2, 4
		}
	}
	mt, nt = mmaShape(t, nb, rows)
	if mt != 0 && t == quant.F16 && be.wgmma && be.pWG >= 0 && be.pRing == 0 && nb > workspace.TileRows &&
		(rows+127)/128*((nb+63)/64) >= mmtwBlocks {
		return 0, 8
	}
	return mt, nt
}

// mmtwBlocks is how many blocks of the 128x64 tile an F16 product must
// make to leave mmaShape's register tiles (2x4) for the wgmma tile where
// that runs: half of the 256 the mma.sync tiles need, as the wgmma tile
// runs at 1.5-1.8x theirs. hf16's second call: 1.7B F16 pp512 (its 2048-row
// products make 128) 46685 -> 67459-68231 tok/s; every product on 128x64
// (-prefill-tile 64) 63114.
const mmtwBlocks = 128

// Name is the backend's name ("cuda0").
func (be *Backend) Name() string { return be.name }

// Info describes the GPU under this backend.
func (be *Backend) Info() DeviceInfo { return be.info }

// DependentLaunch reports whether kernels launch with programmatic
// dependent launch (the sm_90 kernels of ptx/sm90; see Options.SerialLaunch).
func (be *Backend) DependentLaunch() bool { return be.depend }

// MemoryInfo is the driver's free and total memory of the whole GPU (all
// processes, all virtual devices on it).
func (be *Backend) MemoryInfo() (free, total int64, err error) {
	err = be.do(func() error {
		free, total, err = be.drv.memInfo()
		return err
	})
	return free, total, err
}

// Sync waits for all enqueued work and reports its first error.
func (be *Backend) Sync() error {
	return be.do(func() error { return be.drv.streamSync(be.stream) })
}

// post queues f on the backend's thread, with its context current.
func (be *Backend) post(f func() error) error {
	if be.gone.Load() {
		return ErrClosed
	}
	return be.w.post(be.ctx, &be.errs, f)
}

// postLaunch queues f, which only launches kernels (a program's run), on
// the backend's thread; unlike post, it may run while a reduce round is
// open (allreduce.go).
func (be *Backend) postLaunch(f func() error) error {
	if be.gone.Load() {
		return ErrClosed
	}
	return be.w.postLaunch(be.ctx, &be.errs, f)
}

// do runs f on the backend's thread, with its context current, and waits;
// it reports the first failure of earlier posted work before f's.
func (be *Backend) do(f func() error) error {
	if be.gone.Load() {
		return ErrClosed
	}
	return be.w.do(be.ctx, &be.errs, f)
}

// Close frees every buffer, the workspace too, and releases the device.
// Programs compiled on the backend must be closed first.
func (be *Backend) Close() error {
	be.mu.Lock()
	if be.closed {
		be.mu.Unlock()
		return nil
	}
	be.closed = true
	var ptrs []devicePtr // allocations: own buffers' and slabs'
	slabs := map[*slab]bool{}
	if be.slab != nil {
		slabs[be.slab] = true
	}
	for b := range be.live {
		switch {
		case b.slab != nil:
			slabs[b.slab] = true
		case b.ptr != 0:
			ptrs = append(ptrs, b.ptr)
		}
	}
	for sl := range slabs {
		ptrs = append(ptrs, sl.ptr)
	}
	be.live = map[*buffer]struct{}{}
	be.slab = nil
	be.mu.Unlock()
	linkErr := be.closeLinks()
	err := be.do(func() error {
		errs := []error{be.drv.streamSync(be.stream)}
		for _, p := range ptrs {
			errs = append(errs, be.drv.memFree(p))
		}
		errs = append(errs, be.teardown())
		return errors.Join(errs...)
	})
	be.gone.Store(true)
	be.w.release()
	be.args.pin.Unpin()
	return errors.Join(linkErr, err)
}

// launch starts kernel f with the given parameter values; device thread only.
func (be *Backend) launch(f cuFunction, grid, block [3]uint32, shared uint32, vals []uint64) error {
	if len(vals) > maxParams {
		return fmt.Errorf("cuda: %d kernel parameters, at most %d", len(vals), maxParams)
	}
	copy(be.args.vals[:], vals)
	params := unsafe.Pointer(&be.args.ptrs[0])
	if be.depend {
		cfg := &be.args.cfg
		cfg.grid, cfg.block, cfg.shared, cfg.stream = grid, block, shared, be.stream
		return be.drv.launchEx(cfg, f, params)
	}
	return be.drv.launch(f, grid, block, shared, be.stream, params)
}
