package cpu

import (
	"math"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// attention is causal attention over the KV cache; each (query row, head)
// pair is one item of the parallel loop.
type attention struct {
	dst, q, k, v, pos view
	nHead, group      int // group = query heads per KV head
	headDim           int
	scale             float32
	scratch           []attnScratch // per worker
}

type attnScratch struct {
	scores []float32 // [n_ctx]
	row    []float32 // [headDim]: a dequantized K or V head
	acc    []float32 // [headDim]
	qv     quant.Vec // the query head prepared for F16 keys
}

func (b *Backend) newAttention(o kernels.Attention) (*attention, error) {
	s := &attention{nHead: o.NHead, group: o.NHead / o.NKVHead, headDim: o.HeadDim, scale: o.Scale}
	var err error
	if s.dst, err = b.writable(o.Dst); err != nil {
		return nil, err
	}
	for _, p := range []struct {
		v *view
		t kernels.Tensor
	}{{&s.q, o.Q}, {&s.k, o.K}, {&s.v, o.V}, {&s.pos, o.Pos}} {
		if *p.v, err = b.rows(p.t); err != nil {
			return nil, err
		}
	}
	s.scratch = make([]attnScratch, b.pool.size)
	for w := range s.scratch {
		s.scratch[w] = attnScratch{
			scores: make([]float32, s.k.rows),
			row:    make([]float32, s.headDim),
			acc:    make([]float32, s.headDim),
		}
	}
	return s, nil
}

func (s *attention) exec(p *pool) error {
	if err := checkIndices(s.pos.i32(0), s.k.rows); err != nil {
		return err
	}
	n := s.q.rows * s.nHead
	p.parallel(s, n, p.grainFor(n, 1))
	return nil
}

func (s *attention) run(w, lo, hi int) {
	sc := &s.scratch[w]
	hd := s.headDim
	pos := s.pos.i32(0)
	for item := lo; item < hi; item++ {
		r, h := item/s.nHead, item%s.nHead
		kvOff := (h / s.group) * hd
		q := s.q.f32(r)[h*hd : (h+1)*hd]
		n := int(pos[r]) + 1
		scores := sc.scores[:n]

		if s.k.typ == quant.F32 {
			for t := range n {
				scores[t] = s.scale * dotF32(q, s.k.f32(t)[kvOff:kvOff+hd])
			}
		} else {
			for t := range n {
				_ = quant.Dequantize(s.k.typ, s.k.row(t)[2*kvOff:2*(kvOff+hd)], sc.row)
				scores[t] = s.scale * dotF32(q, sc.row)
			}
		}
		softmaxInPlace(scores)

		acc := sc.acc
		clear(acc)
		for t, p := range scores {
			vrow := sc.row
			if s.v.typ == quant.F32 {
				vrow = s.v.f32(t)[kvOff : kvOff+hd]
			} else {
				_ = quant.Dequantize(s.v.typ, s.v.row(t)[2*kvOff:2*(kvOff+hd)], sc.row)
			}
			axpyF32(acc, p, vrow)
		}
		copy(s.dst.f32(r)[h*hd:(h+1)*hd], acc)
	}
}

// softmaxInPlace turns x into exp(x - max) / sum, summing in float64.
func softmaxInPlace(x []float32) {
	if len(x) == 0 {
		return
	}
	m := x[0]
	for _, v := range x[1:] {
		m = max(m, v)
	}
	var sum float64
	for i, v := range x {
		e := math.Exp(float64(v - m))
		x[i] = float32(e)
		sum += e
	}
	inv := float32(1 / sum)
	for i := range x {
		x[i] *= inv
	}
}
