package cpu

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// Options configure a CPU backend.
type Options struct {
	// Name is the device name in messages and plans; "cpu" when empty.
	Name string
	// Threads is the number of cores to compute on; runtime.NumCPU() when <= 0.
	Threads int
	// MemoryLimit caps Alloc (a virtual device of a given size); 0 is no cap.
	// Uploaded weights count against it too.
	MemoryLimit int64
}

// Backend computes on the host's cores. It implements kernels.Backend.
type Backend struct {
	name  string
	limit int64
	pool  *pool
	// panels are the workers' weight panels for products of several rows,
	// shared by every program (one pool runs one loop at a time).
	panels []quant.MulScratch

	mu    sync.Mutex // guards usage and held, which Free may touch from a finaliser-free Close
	usage kernels.Usage
	held  int64
}

// New starts a CPU backend and its worker goroutines; Close stops them.
func New(opts Options) *Backend {
	threads := opts.Threads
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	name := opts.Name
	if name == "" {
		name = "cpu"
	}
	p := newPool(threads)
	return &Backend{name: name, limit: opts.MemoryLimit, pool: p, panels: make([]quant.MulScratch, p.size), usage: kernels.Usage{}}
}

// buffer is host memory; data aliases the file mapping for uploaded weights.
type buffer struct {
	data     []byte
	label    kernels.Label
	owner    *Backend
	readOnly bool
}

func (b *buffer) Size() int64          { return int64(len(b.data)) }
func (b *buffer) Label() kernels.Label { return b.label }

// Name implements kernels.Backend.
func (b *Backend) Name() string { return b.name }

// Threads is the number of cores the backend computes on.
func (b *Backend) Threads() int { return b.pool.size }

func (b *Backend) reserve(label kernels.Label, size int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if size < 0 {
		return fmt.Errorf("cpu: %v: negative size %d", label, size)
	}
	if b.limit > 0 && b.held+size > b.limit {
		return fmt.Errorf("cpu: %s: %v: %d bytes with %d of %d held: %w",
			b.name, label, size, b.held, b.limit, kernels.ErrOutOfMemory)
	}
	b.held += size
	b.usage[label] += size
	return nil
}

// Alloc implements kernels.Backend.
func (b *Backend) Alloc(label kernels.Label, size int64) (kernels.Buffer, error) {
	if err := b.reserve(label, size); err != nil {
		return nil, err
	}
	return &buffer{data: make([]byte, size), label: label, owner: b}, nil
}

// Upload implements kernels.Backend: the bytes are used in place, never
// copied, so mapped weights cost no extra memory.
func (b *Backend) Upload(label kernels.Label, data []byte) (kernels.Buffer, error) {
	if err := b.reserve(label, int64(len(data))); err != nil {
		return nil, err
	}
	return &buffer{data: data, label: label, owner: b, readOnly: true}, nil
}

// Free implements kernels.Backend.
func (b *Backend) Free(kb kernels.Buffer) error {
	buf, err := b.own(kb)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if buf.data == nil {
		return fmt.Errorf("cpu: %v: buffer freed twice", buf.label)
	}
	b.held -= int64(len(buf.data))
	b.usage[buf.label] -= int64(len(buf.data))
	if b.usage[buf.label] == 0 {
		delete(b.usage, buf.label)
	}
	buf.data = nil
	return nil
}

// Usage implements kernels.Backend.
func (b *Backend) Usage() kernels.Usage {
	b.mu.Lock()
	defer b.mu.Unlock()
	u := make(kernels.Usage, len(b.usage))
	for k, v := range b.usage {
		u[k] = v
	}
	return u
}

func (b *Backend) own(kb kernels.Buffer) (*buffer, error) {
	buf, ok := kb.(*buffer)
	if !ok || buf.owner != b {
		return nil, fmt.Errorf("cpu: %s: %w", b.name, kernels.ErrForeignBuffer)
	}
	if buf.data == nil {
		return nil, fmt.Errorf("cpu: %v: buffer used after Free", buf.label)
	}
	return buf, nil
}

// bytesOf is the packed byte range of t, checked.
func (b *Backend) bytesOf(t kernels.Tensor) ([]byte, error) {
	buf, err := b.own(t.Buf)
	if err != nil {
		return nil, err
	}
	if !t.Packed() {
		return nil, fmt.Errorf("cpu: %v: %w: not packed", t, kernels.ErrShape)
	}
	if t.Rows < 0 || t.Off < 0 || t.Off+t.Bytes() > int64(len(buf.data)) {
		return nil, fmt.Errorf("cpu: %v at %d: %w: outside its %d-byte buffer", t, t.Off, kernels.ErrShape, len(buf.data))
	}
	return buf.data[t.Off : t.Off+t.Bytes()], nil
}

// Write implements kernels.Backend.
func (b *Backend) Write(dst kernels.Tensor, src []byte) error {
	if _, err := b.writable(dst); err != nil {
		return fmt.Errorf("cpu: write: %w", err)
	}
	d, err := b.bytesOf(dst)
	if err != nil {
		return fmt.Errorf("cpu: write: %w", err)
	}
	if len(src) != len(d) {
		return fmt.Errorf("cpu: write: %v: %d bytes for %d: %w", dst, len(src), len(d), kernels.ErrShape)
	}
	copy(d, src)
	return nil
}

// Read implements kernels.Backend.
func (b *Backend) Read(dst []byte, src kernels.Tensor) error {
	s, err := b.bytesOf(src)
	if err != nil {
		return fmt.Errorf("cpu: read: %w", err)
	}
	if len(dst) != len(s) {
		return fmt.Errorf("cpu: read: %v: %d bytes for %d: %w", src, len(dst), len(s), kernels.ErrShape)
	}
	copy(dst, s)
	return nil
}

// Copy implements kernels.Backend, for any type, row by row.
func (b *Backend) Copy(dst, src kernels.Tensor) error {
	if dst.Type != src.Type || !kernels.SameShape(dst, src) {
		return fmt.Errorf("cpu: copy: %v to %v: %w", src, dst, kernels.ErrShape)
	}
	d, err := b.writable(dst)
	if err != nil {
		return fmt.Errorf("cpu: copy: %w", err)
	}
	s, err := b.rows(src)
	if err != nil {
		return fmt.Errorf("cpu: copy: %w", err)
	}
	for r := range src.Rows {
		copy(d.row(r), s.row(r))
	}
	return nil
}

// Sync implements kernels.Backend; CPU work is finished when its call returns.
func (b *Backend) Sync() error { return nil }

// Close stops the workers. Buffers stay readable Go memory until dropped.
func (b *Backend) Close() error {
	if b.pool != nil {
		b.pool.close()
		b.pool = nil
	}
	return nil
}
