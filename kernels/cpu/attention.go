package cpu

import (
	"fmt"
	"math"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// attention is causal attention over the KV cache; each (query row, KV
// head) pair is one item of the parallel loop, taking the query heads that
// share that KV head one after another while its keys and values are hot.
//
// F32 caches are attended exactly: scores, a float64-summed softmax, then
// the weighted sum of values. Every other cache (F16, Q8_0, Q4_0, K and V
// of either) is attended the way llama.cpp's CPU flash attention does: one
// pass with a running maximum; the query rounded to F16 for an F16 K and
// scores summed in the order of its F16 dot product (dotHalfWide), or
// quantized to Q8_0 for a Q8_0 or Q4_0 K and multiplied as the matmul's
// products are (quant.DotFunc); values accumulated in F16 for an F16 V, or
// dequantized and accumulated in F32 otherwise. Quantized models quantize
// every activation to 8 bits, which turns the last bit of an attention
// output into a different token a few steps later; matching that rounding
// is what lets a quantized model reproduce llama.cpp's greedy text.
//
// The pass is computed in three phases with the sequential loop's bits
// (flash): every score first (they do not depend on the running state),
// then each position's rescaling and weight (onlineWeights: the running
// maximum is a prefix maximum of the scores, so the exponentials can be
// taken many at a time), then the accumulation of values, which alone is
// sequential.
type attention struct {
	dst, q, k, v, pos view
	rows              view // several sequences' slots (Attention.Rows); rows.data nil for one sequence
	slot              int  // rows of a slot, with rows; else the cache's
	nHead, nKVHead    int
	group             int // query heads per KV head
	headDim           int
	window            int // > 0: a query sees the last window positions only
	kHead, vHead      int // bytes of one KV head in a cache row
	scale             float32
	ctx16             int                                    // cache rows rounded up to 16: a query head's share of ms and vs
	dot               func(row []byte, v *quant.Vec) float32 // q·k on the cache's type, but F16
	scratch           []attnScratch                          // per worker
}

type attnScratch struct {
	scores []float32 // [n_ctx rounded up to 16]
	ms, vs []float32 // [group][ctx16]: each position's rescaling and weight, per query head
	d      []float32 // [ctx16]: the exponents of ms or vs
	qh     []float32 // [headDim]: the query rounded to F16
	acc    []float32 // [group][headDim]
	sums   []float32 // [group]
	vrow   []float32 // [headDim]: one value head, dequantized
	half   []byte    // [headDim] in F16: the query's rounding
	kpad   []byte    // [16 KV heads]: the last keys, when the cache ends before 16 more rows
	qv     quant.Vec // the query head, as the dot product takes it
}

func (b *Backend) newAttention(o kernels.Attention) (*attention, error) {
	s := &attention{nHead: o.NHead, nKVHead: o.NKVHead, group: o.NHead / o.NKVHead, headDim: o.HeadDim, scale: o.Scale, window: o.Window}
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
	s.slot = s.k.rows
	if o.Rows.Valid() {
		if s.rows, err = b.rows(o.Rows); err != nil {
			return nil, err
		}
		s.slot = o.Ctx
	}
	kh, err := o.K.Type.RowBytes(int64(o.HeadDim))
	if err != nil {
		return nil, err
	}
	vh, err := o.V.Type.RowBytes(int64(o.HeadDim))
	if err != nil {
		return nil, err
	}
	s.kHead, s.vHead = int(kh), int(vh)
	if s.dot, err = quant.DotFunc(o.K.Type); err != nil {
		return nil, err
	}
	s.scratch = make([]attnScratch, b.pool.size)
	s.ctx16 = (s.slot + 15) &^ 15
	for w := range s.scratch {
		s.scratch[w] = attnScratch{
			scores: make([]float32, s.ctx16),
			ms:     make([]float32, s.group*s.ctx16),
			vs:     make([]float32, s.group*s.ctx16),
			d:      make([]float32, s.ctx16),
			qh:     make([]float32, s.headDim),
			acc:    make([]float32, s.group*s.headDim),
			sums:   make([]float32, s.group),
			vrow:   make([]float32, s.headDim),
			half:   make([]byte, 2*s.headDim),
			kpad:   make([]byte, 16*s.kHead),
		}
	}
	return s, nil
}

func (s *attention) exec(p *pool) error {
	if err := checkIndices(s.pos.i32(0), s.slot); err != nil {
		return err
	}
	if s.rows.data != nil {
		if err := checkIndices(s.rows.i32(0), s.k.rows); err != nil {
			return err
		}
		for i, r := range s.rows.i32(0) {
			if p := s.pos.i32(0)[i]; int(r-p)%s.slot != 0 || r < p {
				return fmt.Errorf("attention: row %d at position %d starts no slot of %d rows: %w", r, p, s.slot, kernels.ErrShape)
			}
		}
	}
	n := s.q.rows * s.nKVHead
	p.parallel(s, n, p.grainFor(n, 1))
	return nil
}

func (s *attention) run(w, lo, hi int) {
	sc := &s.scratch[w]
	for item := lo; item < hi; item++ {
		r, g := item/s.nKVHead, item%s.nKVHead
		n := int(s.pos.i32(0)[r]) + 1
		first := 0
		if s.window > 0 {
			first = max(0, n-s.window)
		}
		if s.rows.data != nil { // the rows of its own slot
			base := int(s.rows.i32(0)[r]) + 1 - n
			first, n = first+base, n+base
		}
		if s.k.typ != quant.F32 || s.v.typ != quant.F32 {
			s.flash(sc, r, g, first, n)
			continue
		}
		for h := g * s.group; h < (g+1)*s.group; h++ {
			s.exact(sc, s.q.f32(r)[h*s.headDim:(h+1)*s.headDim], s.dst.f32(r)[h*s.headDim:(h+1)*s.headDim], first, n, g)
		}
	}
}

// exact attends cache rows [first, n) in float32.
func (s *attention) exact(sc *attnScratch, q, out []float32, first, n, g int) {
	hd := s.headDim
	_ = sc.qv.Prepare(quant.F32, q)
	scores := sc.scores[:n-first]
	for i := range scores {
		scores[i] = s.scale * s.dot(s.keys(first+i, g), &sc.qv)
	}
	softmaxInPlace(scores)
	clear(out)
	for i, p := range scores {
		axpyF32(out, p, s.v.f32(first + i)[g*hd:(g+1)*hd])
	}
}

// keys and values are the bytes of KV head g in cache row t.
func (s *attention) keys(t, g int) []byte   { return s.k.row(t)[g*s.kHead : (g+1)*s.kHead] }
func (s *attention) values(t, g int) []byte { return s.v.row(t)[g*s.vHead : (g+1)*s.vHead] }

// flash is llama.cpp's one-pass attention of the query heads of row r
// that share KV head g, over positions [first, n) (first > 0 under a
// sliding window: the pass then starts at that row). Its loop for one head,
// position by position, is
//
//	x = score(t)
//	if x > m { ms = exp(m-x); m = x; if ms != 1 { acc *= ms } } else { vs = exp(x-m) }
//	acc += v_t·vs; S = S·ms + vs
//
// (ms and vs otherwise 1), computed here in the phases the type comment
// describes, each with those bits: the scores and weights head by head,
// then the accumulation of all the heads at once over the shared values.
func (s *attention) flash(sc *attnScratch, r, g, first, end int) {
	hd, ctx := s.headDim, s.ctx16
	n := end - first // positions attended, numbered from first
	kData, vData := s.k.data[first*s.k.stride:], s.v.data[first*s.v.stride:]
	x := sc.scores
	for u := range s.group {
		h := g*s.group + u
		q := s.q.f32(r)[h*hd : (h+1)*hd]
		if s.k.typ == quant.F16 {
			// The query rounded to F16, kept as float32 for the F16 dot product.
			_ = quant.Quantize(quant.F16, q, sc.half)
			_ = quant.Dequantize(quant.F16, sc.half, sc.qh)
			scoresHalf(x, kData[g*s.kHead:], s.k.stride, s.kHead, sc.qh, s.scale, n, sc.kpad)
		} else {
			_ = sc.qv.Prepare(s.k.typ, q)
			for t := range n {
				x[t] = s.scale * s.dot(s.keys(first+t, g), &sc.qv)
			}
		}
		onlineWeights(x, n, sc.ms[u*ctx:(u+1)*ctx], sc.vs[u*ctx:(u+1)*ctx], sc.d)
	}

	accs, sums := sc.acc, sc.sums
	clear(accs)
	clear(sums)
	if s.v.typ == quant.F16 {
		accumulateHalfUnits(accs, vData[g*s.vHead:], s.v.stride, sc.ms, sc.vs, ctx, s.group, n, sums)
	} else {
		for u := range s.group {
			acc, ms, vs := accs[u*hd:(u+1)*hd], sc.ms[u*ctx:u*ctx+n], sc.vs[u*ctx:u*ctx+n]
			for t := range n {
				if ms[t] != 1 {
					scaleF32(acc, ms[t])
				}
				switch s.v.typ {
				case quant.Q8_0:
					madQ8_0(acc, s.values(first+t, g), vs[t])
				case quant.Q4_0:
					madQ4_0(acc, s.values(first+t, g), vs[t])
				default:
					_ = quant.Dequantize(s.v.typ, s.values(first+t, g), sc.vrow)
					madF32(acc, sc.vrow, vs[t])
				}
				sums[u] = fma32(sums[u], ms[t], vs[t]) // S·ms + vs, fused as ggml's compiler does
			}
		}
	}
	for u := range s.group {
		h := g*s.group + u
		out := s.dst.f32(r)[h*hd : (h+1)*hd]
		inv := 1 / sums[u]
		for i, a := range accs[u*hd : (u+1)*hd] {
			out[i] = a * inv
		}
	}
}

// scoresHalfGo is scale·(k_t·q) for the first n of the F16 key heads at k
// (kHead bytes each, stride bytes apart), in dotHalfWide's order.
func scoresHalfGo(x []float32, k []byte, stride, kHead int, q []float32, scale float32, n int) {
	for t := range n {
		x[t] = scale * dotHalfWide(k[t*stride:t*stride+kHead], q)
	}
}

// onlineWeightsGo is each position's rescaling ms and weight vs in the
// one-pass loop over scores x (flash's comment): at a new maximum ms is
// exp(old - new) and vs 1, otherwise ms is 1 and vs exp(x - max). The
// exponentials are float32(math.Exp) of float32 differences, as the C
// library's expf rounds all but a vanishing few.
func onlineWeightsGo(x, ms, vs []float32) {
	m := float32(math.Inf(-1))
	for t, xt := range x[:len(ms)] {
		if xt > m {
			ms[t], vs[t] = float32(math.Exp(float64(m-xt))), 1
			m = xt
		} else {
			ms[t], vs[t] = 1, float32(math.Exp(float64(xt-m)))
		}
	}
}

// accumulateHalfUnitsGo is accumulateHalfRowsGo for units query heads
// over n positions of the value heads at v, which they share: head u's
// accumulator at acc[u·hd:] (hd = len(acc)/units), its rescalings and
// weights at ms[u·wstride:] and vs[u·wstride:], its running sum in sums[u].
func accumulateHalfUnitsGo(acc []float32, v []byte, stride int, ms, vs []float32, wstride, units, n int, sums []float32) {
	hd := len(acc) / units
	for u := range units {
		a, w := acc[u*hd:(u+1)*hd], u*wstride
		sums[u] = accumulateHalfRowsGo(a, v, stride, ms[w:w+n], vs[w:w+n], sums[u])
	}
}

// accumulateHalfRowsGo is flash's accumulation over F16 value heads at v
// (stride bytes apart): acc rescaled by ms and f16(acc + v_t·vs) per
// position, and the running sum S·ms + vs, from sum, returned.
func accumulateHalfRowsGo(acc []float32, v []byte, stride int, ms, vs []float32, sum float32) float32 {
	for t := range ms {
		if ms[t] != 1 {
			scaleHalf(acc, ms[t])
		}
		accumulateHalf(acc, v[t*stride:t*stride+2*len(acc)], vs[t])
		sum = fma32(sum, ms[t], vs[t])
	}
	return sum
}

// madF32 is acc += v*vs with fused multiply-adds, as ggml's
// ggml_vec_mad_f32 accumulates a dequantized value row.
func madF32(acc, v []float32, vs float32) {
	v = v[:len(acc)]
	for i, a := range acc {
		acc[i] = fma32(v[i], vs, a)
	}
}

// madQ8_0 is madF32 of a Q8_0 row v, dequantized on the way: each value is
// d*q rounded to float32, as kernels/quant dequantizes it, then fused.
// Done here rather than through quant.Dequantize, whose dispatch per row
// of one head cost as much as the arithmetic.
func madQ8_0(acc []float32, v []byte, vs float32) {
	for b := range len(acc) / 32 {
		blk, a := v[b*34:b*34+34], acc[b*32:b*32+32]
		d := halfBits(uint16(blk[0]) | uint16(blk[1])<<8)
		for j, q := range blk[2:34] {
			a[j] = fma32(d*float32(int8(q)), vs, a[j])
		}
	}
}

// madQ4_0 is madQ8_0 for a Q4_0 row: element j of a block in the low
// nibble of byte j, element j+16 in its high nibble, each d*(q-8).
func madQ4_0(acc []float32, v []byte, vs float32) {
	for b := range len(acc) / 32 {
		blk, a := v[b*18:b*18+18], acc[b*32:b*32+32]
		d := halfBits(uint16(blk[0]) | uint16(blk[1])<<8)
		for j, q := range blk[2:18] {
			a[j] = fma32(d*float32(int(q&15)-8), vs, a[j])
			a[j+16] = fma32(d*float32(int(q>>4)-8), vs, a[j+16])
		}
	}
}

// scaleHalfGo is acc = f16(acc*ms): the accumulator rescaled for a new
// running maximum.
func scaleHalfGo(acc []float32, ms float32) {
	for i, a := range acc {
		acc[i] = roundHalf(a * ms)
	}
}

// accumulateHalfGo is acc = f16(acc + v*vs), the multiply-add fused as in
// ggml's ggml_vec_mad_f16, for a binary16 row v: the
// bodies of halfBits and roundHalf written out, since the compiler will
// not inline them into this, the attention's innermost loop.
func accumulateHalfGo(acc []float32, v []byte, vs float32) {
	v = v[:2*len(acc)]
	for i, a := range acc {
		h := uint16(v[2*i]) | uint16(v[2*i+1])<<8
		var x float32
		if e := h >> 10 & 0x1f; e != 0 && e != 0x1f {
			x = math.Float32frombits(uint32(h&0x8000)<<16 | (uint32(h&0x7fff)<<13 + (127-15)<<23))
		} else {
			x = halfBitsSlow(h)
		}
		y := fma32(x, vs, a)
		b := math.Float32bits(y)
		if e := b >> 23 & 0xff; e >= 127-14 && e <= 127+14 {
			b += 0xfff + b>>13&1
			acc[i] = math.Float32frombits(b &^ 0x1fff)
		} else {
			acc[i] = roundHalfSlow(y)
		}
	}
}

// roundHalf rounds f to the nearest binary16 value, ties to even, returned
// as float32. Normal half values take a few integer operations on the bits;
// the rest (subnormal, overflowing, NaN) go through kernels/quant.
func roundHalf(f float32) float32 {
	b := math.Float32bits(f)
	if e := b >> 23 & 0xff; e < 127-14 || e > 127+14 {
		return roundHalfSlow(f)
	}
	b += 0xfff + b>>13&1
	return math.Float32frombits(b &^ 0x1fff)
}

//go:noinline
func roundHalfSlow(f float32) float32 {
	var h [2]byte
	var r [1]float32
	_ = quant.Quantize(quant.F16, []float32{f}, h[:])
	_ = quant.Dequantize(quant.F16, h[:], r[:])
	return r[0]
}

// halfBits converts a binary16 value to float32. Normal values are a
// shift and a rebias, done here so the conversion fuses with the
// accumulation loop; zeros, subnormals and infinities go through
// kernels/quant.
func halfBits(h uint16) float32 {
	if e := h >> 10 & 0x1f; e == 0 || e == 0x1f {
		return halfBitsSlow(h)
	}
	return math.Float32frombits(uint32(h&0x8000)<<16 | (uint32(h&0x7fff)<<13 + (127-15)<<23))
}

//go:noinline
func halfBitsSlow(h uint16) float32 {
	var r [1]float32
	_ = quant.Dequantize(quant.F16, []byte{byte(h), byte(h >> 8)}, r[:])
	return r[0]
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

// dotHalfWideGo is Σ k[i]·q[i] for a binary16 row k, in the order of
// ggml's ggml_vec_dot_f16 on AVX-512: four 16-lane accumulators over steps
// of 64 (element i in accumulator i/16%4, lane i%16, fused multiply-adds),
// folded 0+2, 1+3, then 0+1, then halved down to one lane; a tail of fewer
// than 64 is added in float64. dotHalfWide is the same, faster where the
// CPU allows.
func dotHalfWideGo(k []byte, q []float32) float32 {
	var acc [64]float32
	n := len(q)
	np := n &^ 63
	k = k[:2*n]
	for i := 0; i < np; i += 64 {
		qs, ks := q[i:i+64], k[2*i:2*i+128]
		for e := range acc {
			h := uint16(ks[2*e]) | uint16(ks[2*e+1])<<8
			acc[e] = fma32(halfBits(h), qs[e], acc[e])
		}
	}
	var v [16]float32
	for l := range v {
		v[l] = (acc[l] + acc[32+l]) + (acc[16+l] + acc[48+l])
	}
	for w := 8; w >= 1; w /= 2 {
		for l := range w {
			v[l] += v[l+w]
		}
	}
	return float32(float64(v[0]) + halfTail(k[2*np:], q[np:]))
}

// halfTail is Σ k[i]·q[i] in float64 of float32 products, ggml's loop for
// the elements after the last whole step.
func halfTail(k []byte, q []float32) float64 {
	var sum float64
	for i, v := range q {
		sum += float64(halfBits(uint16(k[2*i])|uint16(k[2*i+1])<<8) * v)
	}
	return sum
}
