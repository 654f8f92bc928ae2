package quant

// RowsFunc returns the product of several weight rows of type w with one
// activation row prepared for w, as decoding computes a matrix-vector
// product: out[r] = DotFunc(w)(row r, v), with the same bits, for the nrows
// rows of rowBytes bytes at rows, stride bytes apart. Where this CPU has a
// kernel that takes several weight rows at once, their independent
// accumulator chains overlap and the activation block is loaded and
// prepared once for all of them; elsewhere it loops over the single-row
// kernel. A row that does not fit v gives NaN, as DotFunc does.
func RowsFunc(w Type) (func(rows []byte, stride, rowBytes, nrows int, v *Vec, out []float32), error) {
	dot, err := DotFunc(w)
	if err != nil {
		return nil, err
	}
	single := func(rows []byte, stride, rowBytes, nrows int, v *Vec, out []float32) {
		for r := range nrows {
			out[r] = dot(rows[r*stride:r*stride+rowBytes], v)
		}
	}
	k, ok := fastRowsKernel(w)
	if !ok {
		return single, nil
	}
	act, _ := bestKernel(w)
	size, actSize := w.TypeSize(), act.act.TypeSize()
	return func(rows []byte, stride, rowBytes, nrows int, v *Vec, out []float32) {
		if nrows <= 0 {
			return
		}
		rows, out = rows[:(nrows-1)*stride+rowBytes], out[:nrows]
		nb := rowBytes / size
		if nb == 0 || rowBytes%size != 0 || !fitsRow(act.act, size, actSize, rows[:rowBytes], v) {
			single(rows, stride, rowBytes, nrows, v, out)
			return
		}
		n := nrows &^ (k.rows - 1)
		if n == 0 || !k.fits(nb) {
			single(rows, stride, rowBytes, nrows, v, out)
			return
		}
		k.run(rows, stride, n, v, nb, out)
		if n < nrows {
			single(rows[n*stride:], stride, rowBytes, nrows-n, v, out[n:])
		}
	}, nil
}

// rowsKernel multiplies weight rows, rows at a time (a power of two),
// with one activation row of nb blocks (elements for float weights), if
// it fits that length.
type rowsKernel struct {
	rows int
	fits func(nb int) bool
	run  func(rows []byte, stride, nrows int, v *Vec, nb int, out []float32)
}
