package quant

// dotsWidth is how many activation rows a multi-row kernel takes at once:
// each keeps its accumulators in registers, and four rows of them fit the
// sixteen AVX2 registers beside the decoded weight block.
const dotsWidth = 4

// multiKernel multiplies one weight row with several prepared activation
// rows (checked to fit), decoding each weight block once for all of them:
// out[i] is bit for bit the single-row product with vs[i] (same integer
// sums, same float32 roundings in the same order), only cheaper.
type multiKernel struct {
	four  func(row []byte, vs []Vec, out []float32) // least..dotsWidth rows
	least int                                       // below this the single-row kernel is faster
	five  func(row []byte, vs []Vec, out []float32) // exactly five rows, where the registers allow
}

// split runs a batch through the kernels: fours where they divide the
// rest, else a five (a speculative verification batch is often a draft of
// four and its last token), and what is too few for either row by row.
func (m multiKernel) split(row []byte, vs []Vec, out []float32, single func(row []byte, vs []Vec, out []float32)) {
	for len(vs) >= m.least {
		n := min(len(vs), dotsWidth)
		if m.five != nil && len(vs) >= 5 && len(vs)%dotsWidth != 0 {
			m.five(row, vs[:5], out[:5])
			n = 5
		} else {
			m.four(row, vs[:n], out[:n])
		}
		vs, out = vs[n:], out[n:]
	}
	single(row, vs, out)
}

// DotsFunc returns the product of one weight row of type w with several
// activation rows prepared for w: out[i] = DotFunc(w)(row, &vs[i]), with
// the same bits, for i < len(vs) (out must be at least as long). Where this
// CPU has a multi-row kernel for w, a batch (speculative verification,
// prefill) reads and decodes each weight block once for all its rows
// instead of once per row; elsewhere it loops over the single-row kernel.
// As DotFunc, a row that does not fit gives NaN.
func DotsFunc(w Type) (func(row []byte, vs []Vec, out []float32), error) {
	dot, err := DotFunc(w)
	if err != nil {
		return nil, err
	}
	single := func(row []byte, vs []Vec, out []float32) {
		for i := range vs {
			out[i] = dot(row, &vs[i])
		}
	}
	multi, ok := fastMultiKernel(w)
	if !ok {
		return single, nil
	}
	k, _ := bestKernel(w)
	size, actSize := w.TypeSize(), k.act.TypeSize()
	return func(row []byte, vs []Vec, out []float32) {
		out = out[:len(vs)]
		for i := range vs {
			if !fitsRow(k.act, size, actSize, row, &vs[i]) {
				single(row, vs, out)
				return
			}
		}
		multi.split(row, vs, out, single)
	}, nil
}

// fitsRow is DotFunc's check that row and v can be multiplied.
// size and actSize are the weight and activation types' block sizes.
func fitsRow(act Type, size, actSize int, row []byte, v *Vec) bool {
	if act == F32 {
		return v.Type == F32 && len(row) == len(v.F32)*size
	}
	return v.Type == act && len(row) == v.blocks*size && len(v.Q) == v.blocks*actSize
}
