package cuda

import (
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// buffer is device memory owned by one Backend.
type buffer struct {
	be    *Backend
	ptr   devicePtr
	size  int64
	label kernels.Label
}

func (b *buffer) Size() int64          { return b.size }
func (b *buffer) Label() kernels.Label { return b.label }

// Alloc returns size bytes of zeroed device memory counted under label.
// Every device allocation of this package goes through here, so Usage is
// the whole of what the backend holds.
func (be *Backend) Alloc(label kernels.Label, size int64) (kernels.Buffer, error) {
	b, err := be.alloc(label, size)
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

// Upload copies data (weights) to a new buffer.
func (be *Backend) Upload(label kernels.Label, data []byte) (kernels.Buffer, error) {
	b, err := be.alloc(label, int64(len(data)))
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

// Free releases b after the work that uses it (cuMemFree waits for it).
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
	be.held -= cb.size
	be.mu.Unlock()
	if cb.ptr == 0 {
		return nil
	}
	return be.do(func() error { return be.drv.memFree(cb.ptr) })
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
