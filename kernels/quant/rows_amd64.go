//go:build !purego

package quant

// The decode kernels (rows_q8_amd64.s) take four weight rows at once, two
// to a 512-bit register: each row's eight lanes do the single-row kernel's
// float32 operations in its order, its integer sums come from one VPDPBUSD
// with the weights as unsigned bytes (Q5_0's 5-bit quants as they are,
// Q8_0's plus 128) and an offset the activation block's sums correct.

func fastRowsKernel(w Type) (rowsKernel, bool) {
	if !hasVNNI512 {
		return rowsKernel{}, false
	}
	var f func(x *byte, stride int, y *byte, nb int, out *float32)
	switch w {
	case Q8_0:
		f = rowsQ8_0x4
	case Q5_0:
		f = rowsQ5_0x4
	default:
		return rowsKernel{}, false
	}
	size := w.TypeSize()
	return rowsKernel{rows: 4, run: func(rows []byte, stride, nrows int, y []byte, nb int, out []float32) {
		_, _ = y[nb*q8_0Bytes-1], out[nrows-1]
		for r := 0; r < nrows; r += 4 {
			_ = rows[(r+3)*stride+nb*size-1]
			f(&rows[r*stride], stride, &y[0], nb, &out[r])
		}
	}}, true
}

//go:noescape
func rowsQ8_0x4(x *byte, stride int, y *byte, nb int, out *float32)

//go:noescape
func rowsQ5_0x4(x *byte, stride int, y *byte, nb int, out *float32)
