package cpu

import (
	"fmt"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// matMul is one or more products that share their activations X [B, n_in]
// (Q, K and V of a block, or gate and up): X is prepared once per row in
// the form the weights' dot product takes (e.g. Q8_K blocks for Q4_K
// weights), then the output rows of all parts are split across the workers.
// A worker takes a few weight rows and runs each against a tile of
// activation rows, so a weight row is read from memory once per tile rather
// than once per token: decode (B = 1) streams the weights exactly once,
// prefill reuses each row from L1 for the whole tile. Within the tile the
// multi-row product (quant.DotsFunc) decodes each weight block once for
// several activation rows, with the bits of the single-row product, so a
// verified draft rounds exactly as the target decoding alone.
type matMul struct {
	x     view
	parts []matMulPart
	total int         // output rows over all parts
	vecs  []quant.Vec // prepared activations, one per row of X
	outs  [][]float32 // per worker: (bTile,) products of one weight row
	prep  prepareTask
	grain int
}

type matMulPart struct {
	w     view // [n_out, n_in]
	dst   view // [B, n_out]
	dot   func(row []byte, v *quant.Vec) float32
	dots  func(row []byte, vs []quant.Vec, out []float32)
	first int // index of this part's row 0 among all output rows
}

// bTile is how many activation rows a weight row meets while it is hot.
const bTile = 32

func sameActivations(a, b kernels.MatMul) bool {
	return a.X == b.X && a.W.Cols == b.W.Cols &&
		quant.ActivationType(a.W.Type) == quant.ActivationType(b.W.Type)
}

func supportsDot(t quant.Type) bool {
	_, err := quant.DotFunc(t)
	return err == nil
}

func (b *Backend) newMatMul(ops []kernels.MatMul) (*matMul, error) {
	x, err := b.rows(ops[0].X)
	if err != nil {
		return nil, err
	}
	m := &matMul{x: x, vecs: make([]quant.Vec, x.rows)}
	for _, op := range ops {
		w, err := b.rows(op.W)
		if err != nil {
			return nil, err
		}
		dst, err := b.writable(op.Dst)
		if err != nil {
			return nil, err
		}
		dot, err := quant.DotFunc(op.W.Type)
		if err != nil {
			return nil, fmt.Errorf("%v weights: %w", op.W.Type, err)
		}
		dots, err := quant.DotsFunc(op.W.Type)
		if err != nil {
			return nil, fmt.Errorf("%v weights: %w", op.W.Type, err)
		}
		m.parts = append(m.parts, matMulPart{w: w, dst: dst, dot: dot, dots: dots, first: m.total})
		m.total += w.rows
	}
	if x.rows > 1 {
		m.outs = make([][]float32, b.pool.size)
		for i := range m.outs {
			m.outs[i] = make([]float32, bTile)
		}
	}
	m.prep = prepareTask{m: m, errs: make([]error, x.rows)}
	m.grain = b.pool.grainFor(m.total, max(1, 64/x.rows))
	return m, nil
}

func (m *matMul) exec(p *pool) error {
	wt := m.parts[0].w.typ
	if m.x.rows == 1 {
		if err := m.vecs[0].Prepare(wt, m.x.f32(0)); err != nil {
			return err
		}
	} else {
		p.parallel(&m.prep, m.x.rows, p.grainFor(m.x.rows, 4))
		for _, err := range m.prep.errs {
			if err != nil {
				return err
			}
		}
	}
	p.parallel(m, m.total, m.grain)
	return nil
}

// run computes output rows [lo, hi) of the concatenated parts on worker w.
func (m *matMul) run(w, lo, hi int) {
	for pi := range m.parts {
		part := &m.parts[pi]
		start, end := max(lo, part.first), min(hi, part.first+part.w.rows)
		if start >= end {
			continue
		}
		start -= part.first
		end -= part.first
		if m.x.rows == 1 { // decode: one activation row, the common case
			out, v := part.dst.f32(0), &m.vecs[0]
			for r := start; r < end; r++ {
				out[r] = part.dot(part.w.row(r), v)
			}
			continue
		}
		out := m.outs[w]
		for b0 := 0; b0 < m.x.rows; b0 += bTile {
			b1 := min(b0+bTile, m.x.rows)
			for r := start; r < end; r++ {
				part.dots(part.w.row(r), m.vecs[b0:b1], out)
				for bi := b0; bi < b1; bi++ {
					part.dst.f32(bi)[r] = out[bi-b0]
				}
			}
		}
	}
}

// prepareTask converts rows of X into the weights' activation form.
type prepareTask struct {
	m    *matMul
	errs []error // per row of X
}

func (t *prepareTask) run(_, lo, hi int) {
	wt := t.m.parts[0].w.typ
	for i := lo; i < hi; i++ {
		t.errs[i] = t.m.vecs[i].Prepare(wt, t.m.x.f32(i))
	}
}
