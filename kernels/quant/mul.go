package quant

import "unsafe"

// Products of weight rows with batches of activation rows (prefill,
// speculative verification). DotsFunc shares a weight row's decoding among
// a few activation rows; Mul goes further. Where a type has a blocked
// kernel (F16, Q4_K, Q6_K), it decodes a few weight rows once into a panel
// in the form the kernel multiplies fastest (float32, or int16 weights
// times their scales), lays the activation rows out for the kernel once
// per product (Batch), and runs tiles of weight rows x activation rows
// whose accumulators all stay in registers. Q8_0 and Q5_0 take four
// weight rows with four activation rows at a time instead (quadKernel).
// Each output still takes, lane for lane, the float32 operations of the
// single-row kernel in its order (the integer sums are exact in any
// order), so a row of a batch has the bits of that row multiplied alone:
// prefill, a verified draft and decoding round alike.

// blocked describes a tile kernel: how many weight rows and activation
// rows a tile takes, how to pack both sides, and the tile itself.
type blocked struct {
	layout     int // activation layout: kernels with the same one share a Batch
	rows, acts int // tile: weight rows x activation rows
	// minRows is the shortest batch the kernel takes faster than
	// DotsFunc (decode and short speculative verifications go there).
	minRows int
	// panelBytes is the panel of rows weight rows of nb blocks (elements
	// for the float types).
	panelBytes func(nb int) int
	// pack decodes the weight rows at ptrs (rows of them, the last repeated
	// where the matrix ends) into panel.
	pack func(ptrs []*byte, nb int, panel []byte)
	// packAct lays out prepared row v as row i of b.
	packAct func(b *Batch, i int, v *Vec)
	// actBytes is the packed size of one activation row of nb blocks.
	actBytes func(nb int) int
	// tile multiplies np panels (panelBytes apart) with the acts
	// activation rows at act (packed, actBytes apart) and stores the
	// output of panel p's row r with act a at out[a*ld+p*rows+r].
	tile func(panel []byte, np int, act []byte, nb int, out []float32, ld int)
}

// Batch is activation rows prepared for Mul with weights of one type. It
// keeps the rows as Vec.Prepare left them and, where this CPU has a blocked
// kernel for the type and the batch is long enough to pay for it (shorter
// ones take kernels that cost nothing to set up), also in the kernel's
// layout.
type Batch struct {
	w      Type
	vs     []Vec
	kern   *blocked // nil: Mul takes the rows as vs holds them
	nb     int      // blocks per row (elements for float weights)
	padded int      // rows laid out: len(vs) rounded up to whole tiles
	data   []byte   // the kernel's layout, actBytes(nb) per row
}

// Reset makes b the batch of rows vs, prepared (by Vec.Prepare, before or
// after Reset, but before Pack) for weights of type w with n elements a
// row. b keeps vs. A Mul for another weight type with the same activation
// type can take b too (the Q, K and V of a block may differ in type).
func (b *Batch) Reset(w Type, vs []Vec, n int) {
	b.w, b.vs, b.kern = w, vs, nil
	k, ok := blockedKernel(w)
	if !ok || len(vs) < k.minRows {
		return
	}
	nb, ok := blockedBlocks(w, n)
	if !ok {
		return
	}
	b.kern, b.nb = k, nb
	b.padded = (len(vs) + k.acts - 1) / k.acts * k.acts
	size := b.padded * k.actBytes(nb)
	if cap(b.data) < size {
		b.data = make([]byte, size)
	}
	b.data = b.data[:size]
}

// Pack lays out rows [lo, hi) of the batch, which must be prepared; the
// last row also fills the padding up to a whole tile. Different ranges can
// be packed at the same time.
func (b *Batch) Pack(lo, hi int) {
	if b.kern == nil {
		return
	}
	if hi == len(b.vs) {
		hi = b.padded
	}
	for i := lo; i < hi; i++ {
		b.kern.packAct(b, i, &b.vs[min(i, len(b.vs)-1)])
	}
}

// blockedBlocks is the number of blocks (elements for float weights) of a
// row of n elements that a blocked kernel for w takes, if it takes it.
func blockedBlocks(w Type, n int) (int, bool) {
	if ActivationType(w) == F32 {
		return n, n > 0 && n%32 == 0 // the float kernels' 32-element steps only
	}
	bs := w.BlockSize()
	return n / bs, n > 0 && n%bs == 0
}

// MulScratch is a worker's weight panel. Every Mul that one worker runs may
// share it (SharePanel), since a worker runs one product at a time: a
// backend then holds one panel a worker instead of one per product of
// every compiled program.
type MulScratch struct {
	panel []byte
}

// Mul multiplies weight rows of one type with a Batch, on one worker: it
// holds the worker's scratch (the weight panel, its own unless shared).
type Mul struct {
	w    Type
	kern *blocked // nil: no blocked kernel for w on this CPU
	quad *quadKernel
	rows func(rows []byte, stride, rowBytes, nrows int, v *Vec, out []float32)
	dots func(row []byte, vs []Vec, out []float32)
	s    *MulScratch
	edge [4 * 6]float32 // a tile's outputs where the matrix or the batch ends
	col  []float32      // DotsFunc's outputs for one weight row
}

// NewMul returns a Mul for weights of type w.
func NewMul(w Type) (*Mul, error) {
	dots, err := DotsFunc(w)
	if err != nil {
		return nil, err
	}
	rows, err := RowsFunc(w)
	if err != nil {
		return nil, err
	}
	k, _ := blockedKernel(w)
	m := &Mul{w: w, kern: k, rows: rows, dots: dots, s: new(MulScratch)}
	if q, ok := fastQuadKernel(w); ok {
		m.quad = &q
	}
	return m, nil
}

// SharePanel makes m use s for its weight panel: a Mul on the same worker
// as every other user of s, never run at the same time as they are.
func (m *Mul) SharePanel(s *MulScratch) { m.s = s }

// quadKernel multiplies four weight rows of nb blocks (stride bytes
// apart) with four prepared activation rows (their quants at ys), storing
// row r with act a at out[a*ld+r] (ld in bytes), each with the bits of
// the single-row kernel: Q8_0 and Q5_0 batches, long (prefill) and short
// (speculative verification), run through it.
type quadKernel struct {
	run     func(x *byte, stride int, ys *[4]*byte, nb int, out *float32, ld int)
	minActs int // fewer go through RowsFunc one activation row at a time
}

// dotsTile is how many activation rows DotsFunc meets with one weight row
// while the row is hot in L1.
const dotsTile = 32

// Run sets out[a*ld+r] to DotFunc(w)(row r, row a of b), with its bits,
// for the nrows weight rows of rowBytes bytes at rows, stride bytes apart,
// and every row a of b. b must be packed, and prepared for m's type or one
// with the same activation type.
func (m *Mul) Run(rows []byte, stride, rowBytes, nrows int, b *Batch, out []float32, ld int) {
	if nrows <= 0 || len(b.vs) == 0 {
		return
	}
	rows = rows[:(nrows-1)*stride+rowBytes]
	k := m.kern
	if k == nil || b.kern == nil || b.kern.layout != k.layout || rowBytes != b.nb*m.w.TypeSize() {
		// The DotsFunc path also gives NaN for a row that does not fit.
		m.runDots(rows, stride, rowBytes, nrows, b.vs, out, ld)
		return
	}
	// Panels for a group of weight rows (together about panelGroupBytes),
	// then each tile of activation rows against all of them: the
	// activation tile stays in L1 while the panels stream from L2.
	pb := k.panelBytes(b.nb)
	group := max(1, panelGroupBytes/pb)
	if size := group * pb; cap(m.s.panel) < size {
		m.s.panel = make([]byte, size)
	}
	panel := m.s.panel
	var ptrs [4]*byte
	tileBytes := k.acts * k.actBytes(b.nb)
	for g0 := 0; g0 < nrows; g0 += group * k.rows {
		np := min(group, (nrows-g0+k.rows-1)/k.rows) // panels in this group
		for p := range np {
			r0 := g0 + p*k.rows
			nr := min(k.rows, nrows-r0)
			for i := range k.rows {
				ptrs[i] = &rows[(r0+min(i, nr-1))*stride]
			}
			k.pack(ptrs[:k.rows], b.nb, panel[p*pb:(p+1)*pb])
		}
		whole := np // panels of k.rows real rows
		if g0+np*k.rows > nrows {
			whole--
		}
		for a0 := 0; a0 < len(b.vs); a0 += k.acts {
			act := b.data[a0/k.acts*tileBytes:][:tileBytes]
			na := min(k.acts, len(b.vs)-a0)
			p0 := 0
			if na == k.acts && whole > 0 {
				k.tile(panel[:whole*pb], whole, act, b.nb, out[a0*ld+g0:], ld)
				p0 = whole
			}
			for p := p0; p < np; p++ { // through edge, then the rows that exist
				k.tile(panel[p*pb:(p+1)*pb], 1, act, b.nb, m.edge[:], 4)
				r0 := g0 + p*k.rows
				nr := min(k.rows, nrows-r0)
				for a := range na {
					copy(out[(a0+a)*ld+r0:][:nr], m.edge[4*a:4*a+nr])
				}
			}
		}
	}
}

// panelGroupBytes is about how much of the decoded weight panels Run keeps
// for one pass over the activation tiles: well within L2.
const panelGroupBytes = 96 << 10

// runDots is Run without a blocked kernel: four weight rows with four
// activation rows at a time where the type has a kernel for that, else
// each weight row meets the activation rows through DotsFunc, in tiles of
// dotsTile.
func (m *Mul) runDots(rows []byte, stride, rowBytes, nrows int, vs []Vec, out []float32, ld int) {
	if n := m.runQuads(rows, stride, rowBytes, nrows, vs, out, ld); n > 0 {
		rows, nrows, out = rows[n*stride:], nrows-n, out[n:]
		if nrows == 0 {
			return
		}
	}
	if len(m.col) < dotsTile {
		m.col = make([]float32, dotsTile)
	}
	for b0 := 0; b0 < len(vs); b0 += dotsTile {
		b1 := min(b0+dotsTile, len(vs))
		for r := range nrows {
			m.dots(rows[r*stride:r*stride+rowBytes], vs[b0:b1], m.col)
			for a := b0; a < b1; a++ {
				out[a*ld+r] = m.col[a-b0]
			}
		}
	}
}

// runQuads multiplies the first nrows&^3 weight rows with every row of vs
// through the quad kernel and returns how many it did (0 where there is
// no quad kernel or a row of vs does not fit the weights, which the
// DotsFunc path then turns into NaN).
func (m *Mul) runQuads(rows []byte, stride, rowBytes, nrows int, vs []Vec, out []float32, ld int) int {
	q := m.quad
	n := nrows &^ 3
	if q == nil || n == 0 || len(vs) == 0 {
		return 0
	}
	act, _ := bestKernel(m.w)
	size, actSize := m.w.TypeSize(), act.act.TypeSize()
	nb := rowBytes / size
	if nb == 0 || rowBytes%size != 0 {
		return 0
	}
	for i := range vs {
		if !fitsRow(act.act, size, actSize, rows[:rowBytes], &vs[i]) {
			return 0
		}
	}
	_ = rows[(n-1)*stride+rowBytes-1]
	var ys [4]*byte
	for a0 := 0; a0 < len(vs); a0 += 4 {
		na := min(4, len(vs)-a0)
		if na < q.minActs {
			for a := a0; a < len(vs); a++ {
				m.rows(rows, stride, rowBytes, n, &vs[a], out[a*ld:])
			}
			break
		}
		for i := range ys {
			ys[i] = &vs[a0+min(i, na-1)].Q[0]
		}
		for r0 := 0; r0 < n; r0 += 4 {
			if na == 4 {
				o := out[a0*ld+r0:][:3*ld+4]
				q.run(&rows[r0*stride], stride, &ys, nb, &o[0], 4*ld)
				continue
			}
			q.run(&rows[r0*stride], stride, &ys, nb, &m.edge[0], 16)
			for a := range na {
				copy(out[(a0+a)*ld+r0:][:4], m.edge[4*a:4*a+4])
			}
		}
	}
	return n
}

// permute32 is the order the float kernels keep each 32 elements in: the
// single-row kernel's four 8-lane accumulators take elements 0-7, 8-15,
// 16-23 and 24-31, and its sum is (acc0+acc1)+(acc2+acc3); a 16-lane
// accumulator pair holding [acc0 acc2] and [acc1 acc3] adds up to
// [acc0+acc1 acc2+acc3] in one step, so elements 0-7 and 16-23 go first.
var permute32 = [4]int{0, 16, 8, 24}

// packF32Act lays out an F32 activation row for the float kernels.
func packF32Act(b *Batch, i int, v *Vec) {
	n := b.nb
	dst := f32Slice(b.data[i*4*n:], n)
	for j := 0; j < n; j += 32 {
		for k, s := range permute32 {
			*(*[8]float32)(dst[j+8*k:]) = *(*[8]float32)(v.F32[j+s:])
		}
	}
}

// f32Slice is the first n float32s in b, which holds host memory that
// Batch allocated (aligned for float32).
func f32Slice(b []byte, n int) []float32 {
	_ = b[4*n-1]
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n)
}
