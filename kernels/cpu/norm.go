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
		// Squares summed in float64, the scale rounded to float32 at the
		// same steps as ggml and PyTorch: quantized models round every
		// activation to 8 bits, so the last bit of a norm decides tokens.
		var ss float64
		for _, v := range x {
			ss += float64(v * v)
		}
		mean := float32(ss / float64(len(x)))
		scale := 1 / float32(math.Sqrt(float64(mean+s.eps)))
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
