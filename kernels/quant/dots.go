package quant

// dotsWidth is how many activation rows a multi-row kernel takes at once:
// each keeps its accumulators in registers, and four rows of them fit the
// sixteen AVX2 registers beside the decoded weight block.
const dotsWidth = 4

// multiKernel multiplies one weight row with least..dotsWidth prepared
// activation rows (checked to fit), decoding each weight block once for
// all of them: out[i] is bit for bit the single-row product with vs[i]
// (same integer sums, same float32 roundings in the same order), only
// cheaper. Below least rows the single-row kernel is faster.
type multiKernel struct {
	dots  func(row []byte, vs []Vec, out []float32)
	least int
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
	size := w.TypeSize()
	return func(row []byte, vs []Vec, out []float32) {
		out = out[:len(vs)]
		for i := range vs {
			if !fitsRow(k.act, size, row, &vs[i]) {
				single(row, vs, out)
				return
			}
		}
		for len(vs) >= multi.least {
			n := min(len(vs), dotsWidth)
			multi.dots(row, vs[:n], out[:n])
			vs, out = vs[n:], out[n:]
		}
		single(row, vs, out)
	}, nil
}

// fitsRow is DotFunc's check that row and v can be multiplied.
func fitsRow(act Type, size int, row []byte, v *Vec) bool {
	if act == F32 {
		return v.Type == F32 && len(row) == len(v.F32)*size
	}
	return v.Type == act && len(row) == v.blocks*size && len(v.Q) == v.blocks*act.TypeSize()
}
