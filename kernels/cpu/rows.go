package cpu

import (
	"fmt"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// getRows gathers rows of Src (any supported type) into F32 rows of Dst.
type getRows struct {
	dst, src, idx view
	errs          []error // per output row
}

func supportsDequant(t quant.Type) bool {
	var src [512]byte
	var dst [256]float32
	n := t.BlockSize()
	if n <= 0 || n > len(dst) || t.TypeSize() > len(src) {
		return false
	}
	return quant.Dequantize(t, src[:t.TypeSize()], dst[:n]) == nil
}

func (b *Backend) newGetRows(o kernels.GetRows) (*getRows, error) {
	dst, src, idx, err := b.rowOperands(o.Dst, o.Src, o.Idx)
	if err != nil {
		return nil, err
	}
	return &getRows{dst: dst, src: src, idx: idx, errs: make([]error, dst.rows)}, nil
}

// rowOperands are the views of a row gather or scatter: a destination to
// write, and the source and indices to read.
func (b *Backend) rowOperands(dstT, srcT, idxT kernels.Tensor) (dst, src, idx view, err error) {
	if dst, err = b.writable(dstT); err != nil {
		return
	}
	if src, err = b.rows(srcT); err != nil {
		return
	}
	idx, err = b.rows(idxT)
	return
}

func (s *getRows) exec(p *pool) error {
	if err := checkIndices(s.idx.i32(0), s.src.rows); err != nil {
		return err
	}
	p.parallel(s, s.dst.rows, p.grainFor(s.dst.rows, 8))
	return firstErr(s.errs)
}

func (s *getRows) run(_, lo, hi int) {
	ids := s.idx.i32(0)
	for i := lo; i < hi; i++ {
		s.errs[i] = quant.Dequantize(s.src.typ, s.src.row(int(ids[i])), s.dst.f32(i))
	}
}

// setRows scatters F32 rows into rows of Dst (F32 or F16): the KV write.
type setRows struct {
	dst, src, idx view
	errs          []error
}

func (b *Backend) newSetRows(o kernels.SetRows) (*setRows, error) {
	dst, src, idx, err := b.rowOperands(o.Dst, o.Src, o.Idx)
	if err != nil {
		return nil, err
	}
	return &setRows{dst: dst, src: src, idx: idx, errs: make([]error, src.rows)}, nil
}

func (s *setRows) exec(p *pool) error {
	if err := checkIndices(s.idx.i32(0), s.dst.rows); err != nil {
		return err
	}
	p.parallel(s, s.src.rows, p.grainFor(s.src.rows, 8))
	return firstErr(s.errs)
}

func (s *setRows) run(_, lo, hi int) {
	ids := s.idx.i32(0)
	for i := lo; i < hi; i++ {
		s.errs[i] = quant.Quantize(s.dst.typ, s.src.f32(i), s.dst.row(int(ids[i])))
	}
}

// checkIndices rejects row indices outside [0, n): the ids and positions
// come from the caller at run time, so they are checked on every run.
func checkIndices(ids []int32, n int) error {
	for i, id := range ids {
		if id < 0 || int(id) >= n {
			return fmt.Errorf("index %d at %d outside [0, %d): %w", id, i, n, kernels.ErrShape)
		}
	}
	return nil
}

func firstErr(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
