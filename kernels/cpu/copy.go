package cpu

import (
	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// copyOp copies rows, converting between F32 and F16.
type copyOp struct {
	dst, src view
	errs     []error
}

func (b *Backend) newCopy(o kernels.Copy) (*copyOp, error) {
	dst, err := b.writable(o.Dst)
	if err != nil {
		return nil, err
	}
	src, err := b.rows(o.Src)
	if err != nil {
		return nil, err
	}
	return &copyOp{dst: dst, src: src, errs: make([]error, src.rows)}, nil
}

func (s *copyOp) exec(p *pool) error {
	p.parallel(s, s.src.rows, p.grainFor(s.src.rows, rowGrain(s.src.cols)))
	return firstErr(s.errs)
}

func (s *copyOp) run(_, lo, hi int) {
	for r := lo; r < hi; r++ {
		switch {
		case s.src.typ == s.dst.typ:
			copy(s.dst.row(r), s.src.row(r))
		case s.src.typ == quant.F32:
			s.errs[r] = quant.Quantize(s.dst.typ, s.src.f32(r), s.dst.row(r))
		default:
			s.errs[r] = quant.Dequantize(s.src.typ, s.src.row(r), s.dst.f32(r))
		}
	}
}
