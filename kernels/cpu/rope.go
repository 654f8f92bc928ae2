package cpu

import (
	"math"
	"slices"
	"unsafe"

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
	scale       float32 // position multiplier
	thetaScale  float32 // Base^(-2/Dims), rounded to float32
	angles      *ropeAngles
	fresh       bool // this run computes angles
}

// ropeAngles are the cosines and sines of one set of positions, shared by
// the rope ops of a program that rotate by the same positions and
// parameters (q and k of every layer): a sine and cosine in float64 per
// pair and position cost more than the rotation itself.
type ropeAngles struct {
	pos []int32   // the positions cs holds, when valid
	cs  []float32 // per row: Dims/2 cosines, then Dims/2 sines
	ok  bool
}

// ropeKey is what the angles of a rope op depend on: the positions it
// reads at run time (the first rows of its positions tensor) and its
// parameters.
type ropeKey struct {
	pos               unsafe.Pointer
	rows              int
	dims              int
	scale, thetaScale float32
	factors           unsafe.Pointer
}

func (b *Backend) newRope(o kernels.Rope, shared map[ropeKey]*ropeAngles) (*rope, error) {
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
	key := ropeKey{pos: unsafe.Pointer(&pos.data[0]), rows: x.rows,
		dims: o.Dims, scale: s.scale, thetaScale: s.thetaScale}
	if s.factors.rows > 0 {
		key.factors = unsafe.Pointer(&s.factors.data[0])
	}
	if s.angles = shared[key]; s.angles == nil {
		s.angles = &ropeAngles{pos: make([]int32, x.rows), cs: make([]float32, x.rows*2*half)}
		shared[key] = s.angles
	}
	return s, nil
}

func (s *rope) exec(p *pool) error {
	pos, a := s.pos.i32(0)[:s.x.rows], s.angles
	s.fresh = !a.ok || !slices.Equal(a.pos[:len(pos)], pos)
	if s.fresh {
		a.ok = false
	}
	p.parallel(s, s.x.rows, p.grainFor(s.x.rows, rowGrain(s.x.cols)))
	if s.fresh {
		copy(a.pos, pos)
		a.ok = true
	}
	return nil
}

func (s *rope) run(_, lo, hi int) {
	half := s.dims / 2
	pos := s.pos.i32(0)
	for r := lo; r < hi; r++ {
		cos, sin := s.angles.cs[2*half*r:2*half*r+half], s.angles.cs[2*half*r+half:2*half*(r+1)]
		if s.fresh {
			// Angles as ggml computes them: pos·Base^(-2j/Dims) by
			// repeated float32 multiplication, not a power per pair, so
			// that q and k round as llama.cpp's do (their last bits reach
			// the 8-bit activations of quantized models).
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
		}
		x, dst := s.x.f32(r), s.dst.f32(r)
		for h := 0; h < len(x); h += s.headDim {
			xh, dh := x[h:h+s.headDim], dst[h:h+s.headDim]
			if s.neox {
				rotate(dh[:half], dh[half:2*half], xh[:half], xh[half:2*half], cos, sin)
			} else {
				for j := range half {
					x0, x1 := xh[2*j], xh[2*j+1]
					dh[2*j] = float32(x0*cos[j]) - float32(x1*sin[j])
					dh[2*j+1] = float32(x0*sin[j]) + float32(x1*cos[j])
				}
			}
			if &dh[0] != &xh[0] {
				copy(dh[s.dims:], xh[s.dims:])
			}
		}
	}
}
