package cpu

import (
	"fmt"
	"math"
	"slices"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// moe runs kernels.MoE in passes over the worker pool: the router (per
// row: logits, softmax, top experts, their weights); then, with the routed
// pairs of row and expert sorted by expert, each expert's gate and up
// products over all the rows routed to it at once (quant.Mul: the
// expert's weights read once per batch, in register tiles where the type
// has them), SwiGLU per pair, each expert's down products the same way;
// last the sum of each row's pairs in rank order, so the result does not
// depend on how work was split. quant.Mul gives every output the bits of
// the single-row product, so a row routed alike gets the same bits in
// decode, prefill and verification.
type moe struct {
	x, dst                 view
	router, gate, up, down view
	experts, used, ff, n   int
	renorm                 bool
	sharedBatch            bool // gate and up take the same prepared rows and batch

	routerRows rowsFunc

	probs []float32 // [B, experts] softmax of the router logits
	ids   []int32   // [B, used] chosen experts, best first
	wts   []float32 // [B, used] their weights

	// Routed pairs (index i = row*used + rank) in expert order.
	order        []int       // sorted position -> pair
	slot         []int       // pair -> sorted position
	first, count []int       // per expert: its pairs' sorted positions
	xs, xus      []quant.Vec // sorted: the pair's row prepared for gate (and up)
	acts         []quant.Vec // sorted: SwiGLU output prepared for down
	gateOut      []float32   // sorted [pairs, ff]; SwiGLU in place
	upOut        []float32   // sorted [pairs, ff]
	outs         []float32   // sorted [pairs, n] expert outputs
	gb, ub, db   []quant.Batch
	items        []moeItem // the current product pass's chunks

	xg, xu []quant.Vec // per row: X prepared for gate (and up, when its activations differ)
	work   []moeScratch

	phase int
}

type rowsFunc = func(rows []byte, stride, rowBytes, nrows int, v *quant.Vec, out []float32)

// moeItem is weight rows [lo, hi) of one expert in a product pass.
type moeItem struct{ e, lo, hi int }

// moeScratch is one worker's: the router's input and its products.
type moeScratch struct {
	xr               quant.Vec
	gate, up, downMu *quant.Mul
}

const (
	moeRoute = iota
	moePack
	moeGateUp
	moeAct
	moePackDown
	moeDown
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
		t kernels.Tensor
		v *view
	}{{o.Router, &m.router}, {o.Gate, &m.gate}, {o.Up, &m.up}, {o.Down, &m.down}} {
		if *w.v, err = b.rows(w.t); err != nil {
			return nil, err
		}
	}
	if m.routerRows, err = quant.RowsFunc(o.Router.Type); err != nil {
		return nil, fmt.Errorf("%v weights: %w", o.Router.Type, err)
	}
	rows, pairs := m.x.rows, m.x.rows*m.used
	m.sharedBatch = o.Up.Type == o.Gate.Type
	m.probs = make([]float32, rows*m.experts)
	m.ids = make([]int32, pairs)
	m.wts = make([]float32, pairs)
	m.order = make([]int, pairs)
	m.slot = make([]int, pairs)
	m.first = make([]int, m.experts)
	m.count = make([]int, m.experts)
	m.xs = make([]quant.Vec, pairs)
	m.acts = make([]quant.Vec, pairs)
	m.gateOut = make([]float32, pairs*m.ff)
	m.upOut = make([]float32, pairs*m.ff)
	m.outs = make([]float32, pairs*m.n)
	m.gb = make([]quant.Batch, m.experts)
	m.db = make([]quant.Batch, m.experts)
	m.xg = make([]quant.Vec, rows)
	if !m.sharedBatch {
		m.ub = make([]quant.Batch, m.experts)
		m.xus = make([]quant.Vec, pairs)
		if quant.ActivationType(o.Up.Type) != quant.ActivationType(o.Gate.Type) {
			m.xu = make([]quant.Vec, rows)
		}
	}
	m.work = make([]moeScratch, b.pool.size)
	for i := range m.work {
		w := &m.work[i]
		for _, mu := range []struct {
			dst **quant.Mul
			t   quant.Type
		}{{&w.gate, o.Gate.Type}, {&w.up, o.Up.Type}, {&w.downMu, o.Down.Type}} {
			if *mu.dst, err = quant.NewMul(mu.t); err != nil {
				return nil, fmt.Errorf("%v weights: %w", mu.t, err)
			}
		}
	}
	return m, nil
}

func (m *moe) exec(p *pool) error {
	rows, pairs := m.x.rows, m.x.rows*m.used
	m.phase = moeRoute
	p.parallel(m, rows, p.grainFor(rows, 1))
	// A preparation that failed (a zero Vec) would give NaN, never a
	// panic; shapes were checked at compile time, so it is reported here.
	for i := range m.xg {
		if m.xg[i].Len() != m.n || m.xu != nil && m.xu[i].Len() != m.n {
			return fmt.Errorf("moe: row %d: activations not prepared for %v weights", i, m.gate.typ)
		}
	}
	for i := range m.order {
		m.order[i] = i
	}
	slices.SortStableFunc(m.order, func(a, b int) int { return int(m.ids[a] - m.ids[b]) })
	clear(m.count)
	for k, i := range m.order {
		e := int(m.ids[i])
		if m.count[e] == 0 {
			m.first[e] = k
		}
		m.count[e]++
		m.slot[i] = k
		m.xs[k] = m.xg[i/m.used]
		if m.xu != nil {
			m.xus[k] = m.xu[i/m.used]
		} else if m.xus != nil {
			m.xus[k] = m.xg[i/m.used]
		}
	}
	for e, c := range m.count {
		if c == 0 {
			continue
		}
		k := m.first[e]
		m.gb[e].Reset(m.gate.typ, m.xs[k:k+c], m.n)
		if !m.sharedBatch {
			m.ub[e].Reset(m.up.typ, m.xus[k:k+c], m.n)
		}
	}
	m.phase = moePack
	p.parallel(m, m.experts, 1)

	m.chunks(m.ff, p)
	m.phase = moeGateUp
	p.parallel(m, len(m.items), 1)

	m.phase = moeAct
	p.parallel(m, pairs, p.grainFor(pairs, 1))
	for k := range m.acts {
		if m.acts[k].Len() != m.ff {
			return fmt.Errorf("moe: expert activations not prepared for %v weights", m.down.typ)
		}
	}
	for e, c := range m.count {
		if c > 0 {
			k := m.first[e]
			m.db[e].Reset(m.down.typ, m.acts[k:k+c], m.ff)
		}
	}
	m.phase = moePackDown
	p.parallel(m, m.experts, 1)

	m.chunks(m.n, p)
	m.phase = moeDown
	p.parallel(m, len(m.items), 1)

	m.phase = moeSum
	p.parallel(m, rows, p.grainFor(rows, 1))
	return nil
}

// chunks splits each routed expert's rows products of a pass (rows weight
// rows) into items of whole 4-row tiles, a few per worker.
func (m *moe) chunks(rows int, p *pool) {
	active := 0
	for _, c := range m.count {
		if c > 0 {
			active++
		}
	}
	size := max(4, (rows*active/(4*p.size)+3)&^3)
	m.items = m.items[:0]
	for e, c := range m.count {
		if c == 0 {
			continue
		}
		for lo := 0; lo < rows; lo += size {
			m.items = append(m.items, moeItem{e: e, lo: lo, hi: min(rows, lo+size)})
		}
	}
}

func (m *moe) run(w, lo, hi int) {
	s := &m.work[w]
	switch m.phase {
	case moeRoute:
		for r := lo; r < hi; r++ {
			m.route(w, r)
		}
	case moePack:
		for e := lo; e < hi; e++ {
			if c := m.count[e]; c > 0 {
				m.gb[e].Pack(0, c)
				if !m.sharedBatch {
					m.ub[e].Pack(0, c)
				}
			}
		}
	case moeGateUp:
		for _, it := range m.items[lo:hi] {
			k, ub := m.first[it.e], &m.gb[it.e]
			if !m.sharedBatch {
				ub = &m.ub[it.e]
			}
			g := m.gate.data[(it.e*m.ff+it.lo)*m.gate.stride:]
			s.gate.Run(g, m.gate.stride, m.gate.rowBytes, it.hi-it.lo, &m.gb[it.e], m.gateOut[k*m.ff+it.lo:], m.ff)
			u := m.up.data[(it.e*m.ff+it.lo)*m.up.stride:]
			s.up.Run(u, m.up.stride, m.up.rowBytes, it.hi-it.lo, ub, m.upOut[k*m.ff+it.lo:], m.ff)
		}
	case moeAct:
		for k := lo; k < hi; k++ {
			g := m.gateOut[k*m.ff : (k+1)*m.ff]
			swigluRow(g, g, m.upOut[k*m.ff:(k+1)*m.ff])
			if m.acts[k].Prepare(m.down.typ, g) != nil {
				m.acts[k] = quant.Vec{}
			}
		}
	case moePackDown:
		for e := lo; e < hi; e++ {
			if c := m.count[e]; c > 0 {
				m.db[e].Pack(0, c)
			}
		}
	case moeDown:
		for _, it := range m.items[lo:hi] {
			d := m.down.data[(it.e*m.n+it.lo)*m.down.stride:]
			s.downMu.Run(d, m.down.stride, m.down.rowBytes, it.hi-it.lo, &m.db[it.e], m.outs[m.first[it.e]*m.n+it.lo:], m.n)
		}
	case moeSum:
		for r := lo; r < hi; r++ {
			dst := m.dst.f32(r)
			clear(dst)
			for k := range m.used {
				i := r*m.used + k
				wt, out := m.wts[i], m.outs[m.slot[i]*m.n:][:m.n]
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
