package cuda

import (
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// buffer is device memory owned by one Backend: an allocation of its own,
// or a piece of an upload slab.
type buffer struct {
	be    *Backend
	ptr   devicePtr
	size  int64
	label kernels.Label
	slab  *slab // nil: ptr is an allocation of its own
}

// slab is one allocation that holds many buffers back to back
// (ReserveSlab). It is freed with the last of them.
type slab struct {
	ptr        devicePtr
	size, used int64
	pieces     int // buffers in it not yet freed
}

// slabAlign is where each buffer in a slab starts: enough for any kernel's
// vector loads.
const slabAlign = 256

func alignUp(n int64) int64 { return (n + slabAlign - 1) &^ (slabAlign - 1) }

func (b *buffer) Size() int64          { return b.size }
func (b *buffer) Label() kernels.Label { return b.label }

// Alloc returns size bytes of zeroed device memory counted under label: in
// the slab that ReserveSlab set aside, where it fits, else an allocation of
// its own.
func (be *Backend) Alloc(label kernels.Label, size int64) (kernels.Buffer, error) {
	return be.allocZeroed(label, size, true)
}

// allocZeroed is Alloc; carve says whether the reserved slab may serve it.
func (be *Backend) allocZeroed(label kernels.Label, size int64, carve bool) (kernels.Buffer, error) {
	b, err := be.place(label, size, carve)
	if err != nil {
		return nil, err
	}
	if size > 0 {
		err = be.do(func() error { return be.drv.memset8(b.ptr, 0, size, be.stream) })
	}
	if err != nil {
		be.Free(b)
		return nil, err
	}
	return b, nil
}

// alloc makes an allocation of its own for label. Every device allocation
// of this package goes through here or ReserveSlab, so Usage is the whole
// of what the backend holds.
func (be *Backend) alloc(label kernels.Label, size int64) (*buffer, error) {
	if size < 0 {
		return nil, fmt.Errorf("cuda: alloc %d bytes: %w", size, kernels.ErrShape)
	}
	be.mu.Lock()
	if be.closed {
		be.mu.Unlock()
		return nil, ErrClosed
	}
	if be.limit > 0 && be.held+size > be.limit {
		held := be.held
		be.mu.Unlock()
		return nil, fmt.Errorf("cuda: %s: %d bytes for %v with %d of %d held: %w (%w)",
			be.name, size, label, held, be.limit, kernels.ErrOutOfMemory, ErrMemoryLimit)
	}
	be.held += size // reserve before asking the driver, so racing allocs see it
	be.mu.Unlock()

	b := &buffer{be: be, size: size, label: label}
	var err error
	if size > 0 {
		err = be.do(func() error {
			b.ptr, err = be.drv.memAlloc(size)
			return err
		})
	}
	be.mu.Lock()
	defer be.mu.Unlock()
	if err != nil {
		be.held -= size
		if errors.Is(err, ErrOutOfMemory) {
			return nil, fmt.Errorf("cuda: %s: %d bytes for %v: %w (%w)", be.name, size, label, kernels.ErrOutOfMemory, err)
		}
		return nil, err
	}
	be.usage[label] += size
	be.live[b] = struct{}{}
	return b, nil
}

// ReserveSlab sets aside one allocation for the Allocs and Uploads that
// follow, of sizes (a model's weights, or its caches, on this device),
// which then lie in it back to back. The driver rounds each allocation up
// to its page (2 MiB for large ones), so a model placed one allocation per
// tensor held up to that much more per tensor than it counts (measured on
// the H200: +266 MiB, 22%, for a 1.7B Q4_K_M model) and the memory plan fell
// short by as much. A buffer that does not fit what is left gets an
// allocation of its own. The memory counts against the backend's limit at
// once; the buffers count under their labels as they come.
func (be *Backend) ReserveSlab(sizes []int64) error {
	var n int64
	for _, size := range sizes {
		if size < 0 {
			return fmt.Errorf("cuda: reserve %d bytes: %w", size, kernels.ErrShape)
		}
		n += alignUp(size)
	}
	be.mu.Lock()
	if be.closed {
		be.mu.Unlock()
		return ErrClosed
	}
	old := be.slab
	if old != nil && old.pieces == 0 { // reserved, never used: replaced
		be.slab = nil
		be.held -= old.size
	} else {
		old = nil
	}
	if n == 0 {
		be.mu.Unlock()
		return be.freeSlab(old)
	}
	if be.limit > 0 && be.held+n > be.limit {
		held := be.held
		be.mu.Unlock()
		return errors.Join(be.freeSlab(old), fmt.Errorf("cuda: %s: a slab of %d bytes with %d of %d held: %w (%w)",
			be.name, n, held, be.limit, kernels.ErrOutOfMemory, ErrMemoryLimit))
	}
	be.held += n
	be.mu.Unlock()
	if err := be.freeSlab(old); err != nil {
		return err
	}
	sl := &slab{size: n}
	err := be.do(func() error {
		var err error
		sl.ptr, err = be.drv.memAlloc(n)
		return err
	})
	be.mu.Lock()
	defer be.mu.Unlock()
	if err != nil {
		be.held -= n
		if errors.Is(err, ErrOutOfMemory) {
			return fmt.Errorf("cuda: %s: a slab of %d bytes: %w (%w)", be.name, n, kernels.ErrOutOfMemory, err)
		}
		return err
	}
	be.slab = sl
	return nil
}

// freeSlab returns a slab's memory to the driver (nil: nothing).
func (be *Backend) freeSlab(sl *slab) error {
	if sl == nil {
		return nil
	}
	return be.do(func() error { return be.drv.memFree(sl.ptr) })
}

// place finds size bytes for label: in the reserved slab when carve is set
// and it fits, else an allocation of its own.
func (be *Backend) place(label kernels.Label, size int64, carve bool) (*buffer, error) {
	if carve {
		if b := be.carve(label, size); b != nil {
			return b, nil
		}
	}
	return be.alloc(label, size)
}

// carve takes size bytes for label from the reserved slab, or returns nil
// when there is none or too little of it is left.
func (be *Backend) carve(label kernels.Label, size int64) *buffer {
	be.mu.Lock()
	defer be.mu.Unlock()
	sl := be.slab
	if sl == nil || be.closed || size == 0 || sl.used+size > sl.size {
		return nil
	}
	b := &buffer{be: be, ptr: sl.ptr + devicePtr(sl.used), size: size, label: label, slab: sl}
	sl.used += alignUp(size)
	sl.pieces++
	be.usage[label] += size
	be.live[b] = struct{}{}
	return b
}

// Upload copies data (weights) to device memory: into the slab that
// ReserveSlab set aside, where it fits, else an allocation of its own.
func (be *Backend) Upload(label kernels.Label, data []byte) (kernels.Buffer, error) {
	b, err := be.place(label, int64(len(data)), true)
	if err != nil {
		return nil, err
	}
	if len(data) > 0 {
		err = be.do(func() error {
			if err := be.drv.copyHtoD(b.ptr, unsafe.Pointer(&data[0]), int64(len(data)), be.stream); err != nil {
				return err
			}
			// The source may be a file mapping the caller unmaps next.
			return be.drv.streamSync(be.stream)
		})
	}
	if err != nil {
		be.Free(b)
		return nil, err
	}
	return b, nil
}

// own checks that b was made by this backend and is still live.
func (be *Backend) own(b kernels.Buffer) (*buffer, error) {
	cb, ok := b.(*buffer)
	if !ok || cb.be != be {
		return nil, fmt.Errorf("cuda: %s: %w", be.name, kernels.ErrForeignBuffer)
	}
	return cb, nil
}

// Free releases b after the work that uses it (cuMemFree waits for it); a
// piece of a slab releases the slab with the last of its pieces.
func (be *Backend) Free(b kernels.Buffer) error {
	cb, err := be.own(b)
	if err != nil {
		return err
	}
	be.mu.Lock()
	if _, ok := be.live[cb]; !ok {
		be.mu.Unlock()
		return fmt.Errorf("cuda: %s: free of a freed buffer", be.name)
	}
	delete(be.live, cb)
	be.usage[cb.label] -= cb.size
	if be.usage[cb.label] == 0 {
		delete(be.usage, cb.label)
	}
	ptr := cb.ptr
	if sl := cb.slab; sl != nil {
		ptr = 0
		if sl.pieces--; sl.pieces == 0 {
			ptr = sl.ptr
			be.held -= sl.size
			if be.slab == sl {
				be.slab = nil
			}
		}
	} else {
		be.held -= cb.size
	}
	be.mu.Unlock()
	if ptr == 0 {
		return nil
	}
	return be.do(func() error { return be.drv.memFree(ptr) })
}

// Usage is the bytes held per label.
func (be *Backend) Usage() kernels.Usage {
	be.mu.Lock()
	defer be.mu.Unlock()
	u := make(kernels.Usage, len(be.usage))
	for l, n := range be.usage {
		u[l] = n
	}
	return u
}

// addr is the device address of t's first byte.
func (be *Backend) addr(t kernels.Tensor) (devicePtr, error) {
	b, err := be.own(t.Buf)
	if err != nil {
		return 0, err
	}
	return b.ptr + devicePtr(t.Off), nil
}

func (be *Backend) packedView(t kernels.Tensor, n int) (devicePtr, error) {
	if err := kernels.CheckView(t); err != nil {
		return 0, fmt.Errorf("cuda: %w", err)
	}
	if !t.Packed() || t.Bytes() != int64(n) {
		return 0, fmt.Errorf("cuda: %v (stride %d) and %d host bytes: %w", t, t.Stride, n, kernels.ErrShape)
	}
	return be.addr(t)
}

// Write copies src into dst, ordered after earlier work. A small write (a
// step's token ids and positions) is queued without waiting for the device
// thread: src is copied first, and a failure of the copy is reported by the
// next call that waits (Read, Sync), as for Program.Run. That keeps the
// host's hand-offs between two decode steps off the GPU's critical path.
// Larger writes wait, so that src is not held twice.
func (be *Backend) Write(dst kernels.Tensor, src []byte) error {
	p, err := be.packedView(dst, len(src))
	if err != nil {
		return err
	}
	if len(src) <= queuedWriteBytes {
		b := slices.Clone(src)
		return be.post(func() error {
			return be.drv.copyHtoD(p, unsafe.Pointer(&b[0]), int64(len(b)), be.stream)
		})
	}
	return be.do(func() error {
		return be.drv.copyHtoD(p, unsafe.Pointer(&src[0]), int64(len(src)), be.stream)
	})
}

// queuedWriteBytes is the largest Write queued without waiting.
const queuedWriteBytes = 64 << 10

// Read copies src into dst after all earlier work.
func (be *Backend) Read(dst []byte, src kernels.Tensor) error {
	p, err := be.packedView(src, len(dst))
	if err != nil {
		return err
	}
	return be.do(func() error {
		if err := be.drv.copyDtoH(unsafe.Pointer(&dst[0]), p, int64(len(dst)), be.stream); err != nil {
			return err
		}
		return be.drv.streamSync(be.stream)
	})
}

// Copy copies src to dst on the device: same type and shape, any strides.
func (be *Backend) Copy(dst, src kernels.Tensor) error {
	for _, t := range []kernels.Tensor{dst, src} {
		if err := kernels.CheckView(t); err != nil {
			return fmt.Errorf("cuda: copy: %w", err)
		}
	}
	if dst.Type != src.Type || !kernels.SameShape(dst, src) {
		return fmt.Errorf("cuda: copy %v to %v: %w", src, dst, kernels.ErrShape)
	}
	d, err := be.addr(dst)
	if err != nil {
		return err
	}
	s, err := be.addr(src)
	if err != nil {
		return err
	}
	if dst.Packed() && src.Packed() {
		return be.do(func() error { return be.drv.copyDtoD(d, s, src.Bytes(), be.stream) })
	}
	row := src.RowBytes()
	return be.do(func() error {
		for r := 0; r < src.Rows; r++ {
			if err := be.drv.copyDtoD(d+devicePtr(int64(r)*dst.Stride), s+devicePtr(int64(r)*src.Stride), row, be.stream); err != nil {
				return err
			}
		}
		return nil
	})
}

// elemSize is the byte size of one element of an F32/F16/I32 tensor.
func elemSize(t quant.Type) int64 { return int64(t.TypeSize() / t.BlockSize()) }
