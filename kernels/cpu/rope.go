package cpu

import (
	"math"

	"github.com/tandem-run/tandem/kernels"
)

// rope rotates pairs of each head by position-dependent angles; see
// kernels.Rope for the two pairings.
type rope struct {
	dst, x, pos view
	factors     view // rows == 0 when absent
	headDim     int
	dims        int
	neox        bool
	scale       float32     // position multiplier
	thetaScale  float32     // Base^(-2/Dims), rounded to float32
	cs          [][]float32 // per worker: cos then sin for the current row
}

func (b *Backend) newRope(o kernels.Rope) (*rope, error) {
	dst, err := b.writable(o.Dst)
	if err != nil {
		return nil, err
	}
	x, err := b.rows(o.X)
	if err != nil {
		return nil, err
	}
	pos, err := b.rows(o.Pos)
	if err != nil {
		return nil, err
	}
	s := &rope{dst: dst, x: x, pos: pos, headDim: o.HeadDim, dims: o.Dims, neox: o.Neox}
	if o.Factors.Valid() {
		if s.factors, err = b.rows(o.Factors); err != nil {
			return nil, err
		}
	}
	half := o.Dims / 2
	s.scale = o.Scale
	s.thetaScale = float32(math.Pow(float64(o.Base), float64(-2/float32(o.Dims))))
	s.cs = make([][]float32, b.pool.size)
	for w := range s.cs {
		s.cs[w] = make([]float32, 2*half)
	}
	return s, nil
}

func (s *rope) exec(p *pool) error {
	p.parallel(s, s.x.rows, p.grainFor(s.x.rows, rowGrain(s.x.cols)))
	return nil
}

func (s *rope) run(w, lo, hi int) {
	half := s.dims / 2
	cos, sin := s.cs[w][:half], s.cs[w][half:]
	pos := s.pos.i32(0)
	for r := lo; r < hi; r++ {
		// Angles as ggml computes them: pos·Base^(-2j/Dims) by repeated
		// float32 multiplication, not a power per pair, so that q and k
		// round as llama.cpp's do (their last bits reach the 8-bit
		// activations of quantized models).
		theta := float32(pos[r])
		for j := range half {
			t := theta
			if s.factors.rows > 0 {
				t /= s.factors.f32(0)[j]
			}
			sn, c := math.Sincos(float64(s.scale * t))
			cos[j], sin[j] = float32(c), float32(sn)
			theta *= s.thetaScale
		}
		x, dst := s.x.f32(r), s.dst.f32(r)
		for h := 0; h < len(x); h += s.headDim {
			xh, dh := x[h:h+s.headDim], dst[h:h+s.headDim]
			for j := range half {
				a, b := 2*j, 2*j+1
				if s.neox {
					a, b = j, j+half
				}
				x0, x1 := xh[a], xh[b]
				dh[a] = x0*cos[j] - x1*sin[j]
				dh[b] = x0*sin[j] + x1*cos[j]
			}
			if &dh[0] != &xh[0] {
				copy(dh[s.dims:], xh[s.dims:])
			}
		}
	}
}
