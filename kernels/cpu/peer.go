package cpu

import (
	"fmt"

	"github.com/tandem-run/tandem/kernels"
)

var _ kernels.DeviceCopier = (*Backend)(nil)

// CanCopyFrom reports whether from is a CPU backend: all of them share the
// process's memory.
func (b *Backend) CanCopyFrom(from kernels.Backend) bool {
	_, ok := from.(*Backend)
	return ok
}

// CopyFrom copies src, a tensor of the CPU backend from, into dst: a
// memmove between two host buffers. CPU work is done when its call
// returns, so there is nothing to order.
func (b *Backend) CopyFrom(dst kernels.Tensor, from kernels.Backend, src kernels.Tensor) error {
	fb, ok := from.(*Backend)
	if !ok {
		return fmt.Errorf("cpu: copy from %s: %w", from.Name(), kernels.ErrForeignBuffer)
	}
	if dst.Type != src.Type || !kernels.SameShape(dst, src) {
		return fmt.Errorf("cpu: copy %v to %v: %w", src, dst, kernels.ErrShape)
	}
	if _, err := b.writable(dst); err != nil {
		return fmt.Errorf("cpu: copy from %s: %w", fb.name, err)
	}
	d, err := b.bytesOf(dst)
	if err != nil {
		return fmt.Errorf("cpu: copy from %s: %w", fb.name, err)
	}
	s, err := fb.bytesOf(src)
	if err != nil {
		return fmt.Errorf("cpu: copy from %s: %w", fb.name, err)
	}
	copy(d, s)
	return nil
}
