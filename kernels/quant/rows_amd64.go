//go:build !purego

package quant

// The decode kernels (rows_*_amd64.s) take four weight rows at once
// (Q6_K's one, through dotQ6_Kx1VNNI: see fastRowsKernel). For
// Q8_0 and Q5_0, two rows share a 512-bit register: each row's eight lanes
// do the single-row kernel's float32 operations in its order, its integer
// sums come from one VPDPBUSD with the weights as unsigned bytes (Q5_0's
// 5-bit quants as they are, Q8_0's plus 128) and an offset the activation
// block's sums correct. For F16, each row keeps the single-row kernel's
// four 8-lane accumulators in two 16-lane registers, and all four rows
// share each load of the activations.

func fastRowsKernel(w Type) (rowsKernel, bool) {
	switch {
	case w == F16 && hasAVX512:
		return rowsKernel{rows: 4, fits: func(n int) bool { return n%32 == 0 },
			run: func(rows []byte, stride, nrows int, v *Vec, n int, out []float32) {
				y := v.F32[:n]
				for r := 0; r < nrows; r += 4 {
					_ = rows[(r+3)*stride+2*n-1]
					rowsF16x4(&rows[r*stride], stride, &y[0], n, &out[r:][:4][0])
				}
			}}, true
	case w == Q6_K && hasVNNI512:
		// One weight row at a time through the multi-row product's
		// 512-bit decoding (dotQ6_Kx1VNNI), the single-row kernel's
		// bits. It replaced a kernel of four weight rows a call
		// (rowsQ6_Kx4, two rows a 512-bit register), which took 29% of
		// a decode step of a 1.7B Q4_K_M target on one core; on 64 MB of
		// Q6_K weights (BenchmarkMatMulVerify B=1) 5.7-7.0 ms against
		// 2.6-2.8 here. Within L2 (BenchmarkRows, 215 KB) rowsQ6_Kx4 was
		// the faster, 4.6 us against 7.0; but Q6_K holds a Q4_K_M
		// model's head, which streams from memory (255 MB at 1.7B).
		return rowsKernel{rows: 1, fits: func(int) bool { return true },
			run: func(rows []byte, stride, nrows int, v *Vec, nb int, out []float32) {
				y := &v.Q[:nb*q8_KBytes][0]
				ys := [dotsWidth]*byte{y, y, y, y}
				var acc [dotsWidth][8]float32
				for r := range nrows {
					dotQ6_Kx1VNNI(rows[r*stride:r*stride+nb*q6_KBytes], &ys, nb, &acc)
					out[r] = hsum8(&acc[0])
				}
			}}, true
	case (w == Q8_0 || w == Q5_0) && hasVNNI512:
		f, size := rowsQ8_0x4, q8_0Bytes
		if w == Q5_0 {
			f, size = rowsQ5_0x4, q5_0Bytes
		}
		return rowsKernel{rows: 4, fits: func(int) bool { return true },
			run: func(rows []byte, stride, nrows int, v *Vec, nb int, out []float32) {
				y := v.Q[:nb*q8_0Bytes]
				for r := 0; r < nrows; r += 4 {
					_ = rows[(r+3)*stride+nb*size-1]
					f(&rows[r*stride], stride, &y[0], nb, &out[r:][:4][0])
				}
			}}, true
	}
	return rowsKernel{}, false
}

//go:noescape
func rowsF16x4(x *byte, stride int, y *float32, n int, out *float32)

//go:noescape
func rowsQ8_0x4(x *byte, stride int, y *byte, nb int, out *float32)

//go:noescape
func rowsQ5_0x4(x *byte, stride int, y *byte, nb int, out *float32)

// fastQuadKernel is the four-by-four kernel for w, where there is one.
func fastQuadKernel(w Type) (quadKernel, bool) {
	if !hasVNNI512 {
		return quadKernel{}, false
	}
	switch w {
	case Q8_0:
		return quadKernel{run: quadQ8_0, minActs: 3}, true
	case Q5_0:
		return quadKernel{run: quadQ5_0, minActs: 3}, true
	}
	return quadKernel{}, false
}

//go:noescape
func quadQ8_0(x *byte, stride int, ys *[4]*byte, nb int, out *float32, ld int)

//go:noescape
func quadQ5_0(x *byte, stride int, ys *[4]*byte, nb int, out *float32, ld int)
