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
	r := lo
	for ; r+4 <= hi; r += 4 {
		// Four rows' sums at once: each is still one sequential float64
		// chain, but the four chains overlap instead of each waiting on
		// its previous add.
		x0, x1, x2, x3 := s.x.f32(r), s.x.f32(r+1), s.x.f32(r+2), s.x.f32(r+3)
		x1, x2, x3 = x1[:len(x0)], x2[:len(x0)], x3[:len(x0)]
		var s0, s1, s2, s3 float64
		for i, v := range x0 {
			s0 += float64(v * v)
			s1 += float64(x1[i] * x1[i])
			s2 += float64(x2[i] * x2[i])
			s3 += float64(x3[i] * x3[i])
		}
		s.scale(r, s0, w)
		s.scale(r+1, s1, w)
		s.scale(r+2, s2, w)
		s.scale(r+3, s3, w)
	}
	for ; r < hi; r++ {
		var ss float64
		for _, v := range s.x.f32(r) {
			ss += float64(v * v)
		}
		s.scale(r, ss, w)
	}
}

// scale writes row r of dst from its sum of squares ss. The squares are
// summed in float64 in element order and the scale rounded to float32 at
// the same steps as ggml and PyTorch: quantized models round every
// activation to 8 bits, so the last bit of a norm decides tokens.
func (s *rmsNorm) scale(r int, ss float64, w []float32) {
	x, dst := s.x.f32(r), s.dst.f32(r)
	mean := float32(ss / float64(len(x)))
	scale := 1 / float32(math.Sqrt(float64(mean+s.eps)))
	scaleMul(dst, x, w, scale)
}

// rowGrain is how many rows of n elements make a chunk worth handing to
// another worker (waking one costs about as much as touching 16K floats).
func rowGrain(n int) int {
	return max(1, 16384/max(n, 1))
}
