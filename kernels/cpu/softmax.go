package cpu

import "github.com/tandem-run/tandem/kernels"

// softmax normalises each row.
type softmax struct{ dst, x view }

func (b *Backend) newSoftmax(o kernels.Softmax) (*softmax, error) {
	dst, err := b.writable(o.Dst)
	if err != nil {
		return nil, err
	}
	x, err := b.rows(o.X)
	if err != nil {
		return nil, err
	}
	return &softmax{dst: dst, x: x}, nil
}

func (s *softmax) exec(p *pool) error {
	p.parallel(s, s.x.rows, p.grainFor(s.x.rows, rowGrain(s.x.cols)))
	return nil
}

func (s *softmax) run(_, lo, hi int) {
	for r := lo; r < hi; r++ {
		dst := s.dst.f32(r)
		copy(dst, s.x.f32(r))
		softmaxInPlace(dst)
	}
}
