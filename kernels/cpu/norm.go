package cpu

import (
	"math"

	"github.com/tandem-run/tandem/kernels"
)

// rmsNorm normalises each row and scales it by the weight row.
type rmsNorm struct {
	dst, x, w view
	eps       float32
}

func (b *Backend) newRMSNorm(o kernels.RMSNorm) (*rmsNorm, error) {
	dst, err := b.writable(o.Dst)
	if err != nil {
		return nil, err
	}
	x, err := b.rows(o.X)
	if err != nil {
		return nil, err
	}
	w, err := b.rows(o.W)
	if err != nil {
		return nil, err
	}
	return &rmsNorm{dst: dst, x: x, w: w, eps: o.Eps}, nil
}

func (s *rmsNorm) exec(p *pool) error {
	p.parallel(s, s.x.rows, p.grainFor(s.x.rows, rowGrain(s.x.cols)))
	return nil
}

func (s *rmsNorm) run(_, lo, hi int) {
	w := s.w.f32(0)
	for r := lo; r < hi; r++ {
		x, dst := s.x.f32(r), s.dst.f32(r)
		// The mean of squares in float64: rows reach thousands of elements
		// and the oracle's tolerance is relative to the largest logit.
		var ss float64
		for _, v := range x {
			ss += float64(v) * float64(v)
		}
		scale := float32(1 / math.Sqrt(ss/float64(len(x))+float64(s.eps)))
		for i, v := range x {
			dst[i] = v * scale * w[i]
		}
	}
}

// rowGrain is how many rows of n elements make a chunk worth handing to
// another worker (waking one costs about as much as touching 16K floats).
func rowGrain(n int) int {
	return max(1, 16384/max(n, 1))
}
