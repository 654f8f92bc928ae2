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
// Decode (B = 1) streams each weight row once (quant.RowsFunc: the
// single-row product, several rows at a time). A batch goes through quant.Mul, which meets each weight row with
// many activation rows while it is hot (a long batch in register tiles of
// several weight rows by several activation rows), every output with the
// bits of the single-row product, so prefill, a verified draft and the
// target decoding alone all round alike.
type matMul struct {
	x     view
	parts []matMulPart
	total int            // output rows over all parts
	vecs  []quant.Vec    // prepared activations, one per row of X
	batch quant.Batch    // vecs laid out for quant.Mul
	muls  [][]*quant.Mul // per worker, per part (B > 1)
	prep  prepareTask
	grain int
}

type matMulPart struct {
	w     view // [n_out, n_in]
	dst   view // [B, n_out]
	rows  func(rows []byte, stride, rowBytes, nrows int, v *quant.Vec, out []float32)
	first int // index of this part's row 0 among all output rows
}

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
	if x.rows > 1 {
		m.muls = make([][]*quant.Mul, b.pool.size)
	}
	for _, op := range ops {
		w, err := b.rows(op.W)
		if err != nil {
			return nil, err
		}
		dst, err := b.writable(op.Dst)
		if err != nil {
			return nil, err
		}
		rows, err := quant.RowsFunc(op.W.Type)
		if err != nil {
			return nil, fmt.Errorf("%v weights: %w", op.W.Type, err)
		}
		for i := range m.muls {
			mul, err := quant.NewMul(op.W.Type)
			if err != nil {
				return nil, fmt.Errorf("%v weights: %w", op.W.Type, err)
			}
			mul.SharePanel(&b.panels[i])
			m.muls[i] = append(m.muls[i], mul)
		}
		m.parts = append(m.parts, matMulPart{w: w, dst: dst, rows: rows, first: m.total})
		m.total += w.rows
	}
	m.batch.Reset(m.parts[0].w.typ, m.vecs, x.cols)
	m.prep = prepareTask{m: m, errs: make([]error, x.rows)}
	// Whole tiles of weight rows (the blocked kernels take 2 or 4).
	m.grain = (b.pool.grainFor(m.total, max(1, 64/x.rows)) + 3) &^ 3
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
			part.rows(part.w.data[start*part.w.stride:], part.w.stride, part.w.rowBytes, end-start,
				&m.vecs[0], part.dst.f32(0)[start:end])
			continue
		}
		ld := part.dst.stride / 4
		m.muls[w][pi].Run(part.w.data[start*part.w.stride:], part.w.stride, part.w.rowBytes, end-start,
			&m.batch, part.dst.f32s()[start:], ld)
	}
}

// prepareTask converts rows of X into the weights' activation form and
// lays them out for quant.Mul.
type prepareTask struct {
	m    *matMul
	errs []error // per row of X
}

func (t *prepareTask) run(_, lo, hi int) {
	wt := t.m.parts[0].w.typ
	failed := false
	for i := lo; i < hi; i++ {
		t.errs[i] = t.m.vecs[i].Prepare(wt, t.m.x.f32(i))
		failed = failed || t.errs[i] != nil
	}
	if !failed { // else exec returns the error before any product
		t.m.batch.Pack(lo, hi)
	}
}
