package cpu

import (
	"fmt"
	"math"
	"slices"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// moe runs kernels.MoE in three parallel passes: the router (per row:
// logits, softmax, top experts, their weights), the experts (per routed
// pair of row and expert, ordered by expert so that the pairs an expert
// serves run back to back: gate and up rows, SwiGLU, down rows into the
// pair's own output), and the sum of each row's pairs in rank order, so
// the result does not depend on how work was split. Every product is the
// single-row one (quant.RowsFunc) whatever the batch, so a row routed
// alike gets the same bits in decode, prefill and verification. Each pair
// streams its expert's rows: a batch reads an expert once per row it
// routes there, not once (quant.Mul's tiles over the pairs of one expert
// would, with the same bits; BenchmarkOps/moe shows the cost).
type moe struct {
	x, dst                 view
	router, gate, up, down view
	experts, used, ff, n   int
	renorm                 bool

	routerRows, gateRows, upRows, downRows rowsFunc

	probs []float32   // [B, experts] softmax of the router logits
	ids   []int32     // [B, used] chosen experts, best first
	wts   []float32   // [B, used] their weights
	pairs []int       // indices into ids, ordered by expert then row
	outs  []float32   // [B*used, n] each pair's expert output
	xg    []quant.Vec // per row: X prepared for the gate (and router) weights
	xu    []quant.Vec // per row: X prepared for the up weights, when their type differs
	work  []moeScratch

	phase int // which pass run is doing
}

type rowsFunc = func(rows []byte, stride, rowBytes, nrows int, v *quant.Vec, out []float32)

// moeScratch is one worker's: the router's input, a pair's gate and up
// rows, and the SwiGLU output prepared for the down weights.
type moeScratch struct {
	xr       quant.Vec
	gate, up []float32
	act      quant.Vec
}

const (
	moeRoute = iota
	moeExperts
	moeSum
)

func supportsMoE(o kernels.MoE) bool {
	for _, t := range []quant.Type{o.Router.Type, o.Gate.Type, o.Up.Type, o.Down.Type} {
		if !supportsDot(t) {
			return false
		}
	}
	return true
}

func (b *Backend) newMoE(o kernels.MoE) (*moe, error) {
	m := &moe{experts: o.Experts, used: o.Used, renorm: o.Renorm, n: o.X.Cols, ff: o.Gate.Rows / o.Experts}
	var err error
	if m.x, err = b.rows(o.X); err != nil {
		return nil, err
	}
	if m.dst, err = b.writable(o.Dst); err != nil {
		return nil, err
	}
	for _, w := range []struct {
		t    kernels.Tensor
		v    *view
		rows *rowsFunc
	}{
		{o.Router, &m.router, &m.routerRows}, {o.Gate, &m.gate, &m.gateRows},
		{o.Up, &m.up, &m.upRows}, {o.Down, &m.down, &m.downRows},
	} {
		if *w.v, err = b.rows(w.t); err != nil {
			return nil, err
		}
		if *w.rows, err = quant.RowsFunc(w.t.Type); err != nil {
			return nil, fmt.Errorf("%v weights: %w", w.t.Type, err)
		}
	}
	rows := m.x.rows
	m.probs = make([]float32, rows*m.experts)
	m.ids = make([]int32, rows*m.used)
	m.wts = make([]float32, rows*m.used)
	m.pairs = make([]int, 0, rows*m.used)
	m.outs = make([]float32, rows*m.used*m.n)
	m.xg = make([]quant.Vec, rows)
	if quant.ActivationType(o.Up.Type) != quant.ActivationType(o.Gate.Type) {
		m.xu = make([]quant.Vec, rows)
	}
	m.work = make([]moeScratch, b.pool.size)
	for i := range m.work {
		m.work[i].gate = make([]float32, m.ff)
		m.work[i].up = make([]float32, m.ff)
	}
	return m, nil
}

func (m *moe) exec(p *pool) error {
	rows := m.x.rows
	m.phase = moeRoute
	p.parallel(m, rows, p.grainFor(rows, 1))
	// Prepared vectors of the wrong length or type would give NaN, never
	// a panic; the shapes were checked at compile time, so a failed
	// preparation (recorded as a nil Vec) is a bug reported here.
	for i := range m.xg {
		if m.xg[i].Len() != m.n || m.xu != nil && m.xu[i].Len() != m.n {
			return fmt.Errorf("moe: row %d: activations not prepared for %v weights", i, m.gate.typ)
		}
	}
	m.pairs = m.pairs[:0]
	for i := range m.ids {
		m.pairs = append(m.pairs, i)
	}
	slices.SortStableFunc(m.pairs, func(a, b int) int { return int(m.ids[a] - m.ids[b]) })
	m.phase = moeExperts
	p.parallel(m, len(m.pairs), 1)
	m.phase = moeSum
	p.parallel(m, rows, p.grainFor(rows, 1))
	return nil
}

func (m *moe) run(w, lo, hi int) {
	switch m.phase {
	case moeRoute:
		for r := lo; r < hi; r++ {
			m.route(w, r)
		}
	case moeExperts:
		for i := lo; i < hi; i++ {
			m.expert(w, m.pairs[i])
		}
	case moeSum:
		for r := lo; r < hi; r++ {
			dst := m.dst.f32(r)
			clear(dst)
			for k := range m.used {
				wt, out := m.wts[r*m.used+k], m.outs[(r*m.used+k)*m.n:][:m.n]
				for j, v := range out {
					dst[j] += wt * v
				}
			}
		}
	}
}

// route chooses row r's experts and their weights, and prepares the row
// for the gate and up products.
func (m *moe) route(w, r int) {
	x := m.x.f32(r)
	s := &m.work[w]
	probs := m.probs[r*m.experts : (r+1)*m.experts]
	if s.xr.Prepare(m.router.typ, x) != nil {
		m.xg[r] = quant.Vec{}
		return
	}
	m.routerRows(m.router.data, m.router.stride, m.router.rowBytes, m.experts, &s.xr, probs)
	top := probs[0]
	for _, v := range probs {
		top = max(top, v)
	}
	var sum float32
	for i, v := range probs {
		probs[i] = float32(math.Exp(float64(v - top)))
		sum += probs[i]
	}
	for i := range probs {
		probs[i] /= sum
	}
	ids, wts := m.ids[r*m.used:(r+1)*m.used], m.wts[r*m.used:(r+1)*m.used]
	for k := range ids {
		// The first of the largest not yet chosen: lower ids win ties.
		best := -1
		for e, v := range probs {
			if (best < 0 || v > probs[best]) && !slices.Contains(ids[:k], int32(e)) {
				best = e
			}
		}
		ids[k], wts[k] = int32(best), probs[best]
	}
	if m.renorm {
		var total float32
		for _, v := range wts {
			total += v
		}
		for k := range wts {
			wts[k] /= total
		}
	}
	if m.xg[r].Prepare(m.gate.typ, x) != nil {
		m.xg[r] = quant.Vec{}
	}
	if m.xu != nil && m.xu[r].Prepare(m.up.typ, x) != nil {
		m.xu[r] = quant.Vec{}
	}
}

// expert computes pair i (row i/used, its expert ids[i]) into its output.
func (m *moe) expert(w, i int) {
	r, e := i/m.used, int(m.ids[i])
	s := &m.work[w]
	xg, xu := &m.xg[r], &m.xg[r]
	if m.xu != nil {
		xu = &m.xu[r]
	}
	m.gateRows(m.gate.data[e*m.ff*m.gate.stride:], m.gate.stride, m.gate.rowBytes, m.ff, xg, s.gate)
	m.upRows(m.up.data[e*m.ff*m.up.stride:], m.up.stride, m.up.rowBytes, m.ff, xu, s.up)
	swigluRow(s.gate, s.gate, s.up)
	out := m.outs[i*m.n : (i+1)*m.n]
	if s.act.Prepare(m.down.typ, s.gate) != nil {
		for j := range out {
			out[j] = float32(math.NaN())
		}
		return
	}
	m.downRows(m.down.data[e*m.n*m.down.stride:], m.down.stride, m.down.rowBytes, m.n, &s.act, out)
}
