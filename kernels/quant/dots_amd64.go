//go:build !purego

package quant

// The four-row AVX2 kernels sit in the *_amd64.s file of their type, after
// the single-row kernel they mirror (see ROWS4 in simd_amd64.h); Q8_0 and
// Q5_0, whose blocks take fewer registers, have five-row ones too, and so
// do Q4_K and Q6_K on AVX-512 VNNI (32 vector registers). Three
// rows run a four-row kernel with the last row repeated: the spare row
// costs less than a third single-row pass (BenchmarkDots); two do not.

func fastMultiKernel(w Type) (multiKernel, bool) {
	if !hasAVX2 {
		return multiKernel{}, false
	}
	switch w {
	case F16:
		return multiKernel{four: dotsF16Fast, least: 2}, true
	case Q8_0, Q5_0:
		return multiKernel{least: 3,
			four: func(row []byte, vs []Vec, out []float32) { lanes4(w, row, vs, out) },
			five: func(row []byte, vs []Vec, out []float32) { lanes5(w, row, vs, out) }}, true
	case Q6_K:
		if hasVNNI512 {
			return multiKernel{least: 2,
				four: func(row []byte, vs []Vec, out []float32) { lanes4(w, row, vs, out) },
				five: func(row []byte, vs []Vec, out []float32) { lanes5(w, row, vs, out) }}, true
		}
		return multiKernel{least: 3, four: func(row []byte, vs []Vec, out []float32) { lanes4(w, row, vs, out) }}, true
	case Q4_K:
		if hasVNNI512 {
			// Half the AVX2 kernel's instructions a row, and two or
			// three rows do only their own rows' products: two rows
			// already cost less than two single-row passes.
			return multiKernel{least: 2, four: func(row []byte, vs []Vec, out []float32) {
				var ys [dotsWidth]*byte
				var sums [dotsWidth]float32
				if nb := rows(ys[:], row, vs, q4_KBytes); nb > 0 {
					switch len(vs) {
					case 2:
						dotQ4_Kx2VNNI(row, &ys, nb, &sums)
					case 3:
						dotQ4_Kx3VNNI(row, &ys, nb, &sums)
					default:
						dotQ4_Kx4VNNI(row, &ys, nb, &sums)
					}
				}
				copy(out[:len(vs)], sums[:])
			}, five: func(row []byte, vs []Vec, out []float32) {
				var ys [5]*byte
				var sums [5]float32
				if nb := rows(ys[:], row, vs, q4_KBytes); nb > 0 {
					dotQ4_Kx5VNNI(row, &ys, nb, &sums)
				}
				copy(out[:5], sums[:])
			}}, true
		}
		return multiKernel{least: 3, four: func(row []byte, vs []Vec, out []float32) {
			var ys [dotsWidth]*byte
			var sums [dotsWidth]float32
			if nb := rows(ys[:], row, vs, q4_KBytes); nb > 0 {
				dotQ4_Kx4AVX2(row, &ys, nb, &sums)
			}
			copy(out[:len(vs)], sums[:])
		}}, true
	}
	return multiKernel{}, false
}

// lanes4 runs w's four-row kernel (Q8_0, Q5_0 or Q6_K), which leaves eight
// partial sums a row, and folds them. The kernels are called directly, not
// through a func value, so that ys and acc stay on the stack.
func lanes4(w Type, row []byte, vs []Vec, out []float32) {
	var ys [dotsWidth]*byte
	var acc [dotsWidth][8]float32
	if nb := rows(ys[:], row, vs, w.TypeSize()); nb > 0 {
		switch w {
		case Q8_0:
			dotQ8_0x4AVX2(row, &ys, nb, &acc)
		case Q5_0:
			dotQ5_0x4AVX2(row, &ys, nb, &acc)
		case Q6_K:
			if hasVNNI512 {
				dotQ6_Kx4VNNI(row, &ys, nb, &acc)
			} else {
				dotQ6_Kx4AVX2(row, &ys, nb, &acc)
			}
		}
	}
	laneSums(out[:len(vs)], acc[:])
}

// lanes5 is lanes4 for the five-row kernels (Q8_0, Q5_0; Q6_K with AVX-512 VNNI).
func lanes5(w Type, row []byte, vs []Vec, out []float32) {
	var ys [5]*byte
	var acc [5][8]float32
	if nb := rows(ys[:], row, vs, w.TypeSize()); nb > 0 {
		switch w {
		case Q8_0:
			dotQ8_0x5AVX2(row, &ys, nb, &acc)
		case Q5_0:
			dotQ5_0x5AVX2(row, &ys, nb, &acc)
		case Q6_K:
			dotQ6_Kx5VNNI(row, &ys, nb, &acc)
		}
	}
	laneSums(out[:5], acc[:])
}

// rows points ys at the activation rows vs, the last repeated to fill all
// of ys, and returns the number of whole weight blocks in row (0: nothing
// to multiply, the product is 0).
func rows(ys []*byte, row []byte, vs []Vec, xSize int) int {
	nb := len(row) / xSize
	if nb == 0 {
		return 0
	}
	for i := range ys {
		ys[i] = &vs[min(i, len(vs)-1)].Q[0]
	}
	return nb
}

// laneSums folds each row's eight lanes as HSUM8 does.
func laneSums(out []float32, acc [][8]float32) {
	for i := range out {
		out[i] = hsum8(&acc[i])
	}
}

// dotsF16Fast is dotF16Fast for activation rows two at a time: F16 rows
// are loads more than arithmetic, and a pair halves the weight loads.
func dotsF16Fast(row []byte, vs []Vec, out []float32) {
	n := len(vs[0].F32) &^ 7
	for ; len(vs) >= 2 && n > 0; vs, out = vs[2:], out[2:] {
		var acc [2][4][8]float32
		dotF16x2AVX2(row[:2*n], vs[0].F32[:n], vs[1].F32[:n], n, &acc)
		for i := range 2 {
			var s [8]float32
			for l := range s { // ADD4
				s[l] = (acc[i][0][l] + acc[i][1][l]) + (acc[i][2][l] + acc[i][3][l])
			}
			out[i] = hsum8(&s) + dotF16(row[2*n:], vs[i].F32[n:])
		}
	}
	for i := range vs {
		out[i] = dotF16Fast(row, vs[i].F32)
	}
}

//go:noescape
func dotQ8_0x4AVX2(x []byte, ys *[dotsWidth]*byte, nb int, acc *[dotsWidth][8]float32)

//go:noescape
func dotQ5_0x4AVX2(x []byte, ys *[dotsWidth]*byte, nb int, acc *[dotsWidth][8]float32)

//go:noescape
func dotQ6_Kx4AVX2(x []byte, ys *[dotsWidth]*byte, nb int, acc *[dotsWidth][8]float32)

//go:noescape
func dotQ4_Kx4AVX2(x []byte, ys *[dotsWidth]*byte, nb int, out *[dotsWidth]float32)

//go:noescape
func dotQ6_Kx1VNNI(x []byte, ys *[dotsWidth]*byte, nb int, acc *[dotsWidth][8]float32)

//go:noescape
func dotQ6_Kx5VNNI(x []byte, ys *[5]*byte, nb int, acc *[5][8]float32)

//go:noescape
func dotQ6_Kx4VNNI(x []byte, ys *[dotsWidth]*byte, nb int, acc *[dotsWidth][8]float32)

//go:noescape
func dotQ4_Kx4VNNI(x []byte, ys *[dotsWidth]*byte, nb int, out *[dotsWidth]float32)

//go:noescape
func dotQ4_Kx5VNNI(x []byte, ys *[5]*byte, nb int, out *[5]float32)

//go:noescape
func dotQ4_Kx3VNNI(x []byte, ys *[dotsWidth]*byte, nb int, out *[dotsWidth]float32)

//go:noescape
func dotQ4_Kx2VNNI(x []byte, ys *[dotsWidth]*byte, nb int, out *[dotsWidth]float32)

//go:noescape
func dotF16x2AVX2(x []byte, y0, y1 []float32, n int, acc *[2][4][8]float32)

//go:noescape
func dotQ8_0x5AVX2(x []byte, ys *[5]*byte, nb int, acc *[5][8]float32)

//go:noescape
func dotQ5_0x5AVX2(x []byte, ys *[5]*byte, nb int, acc *[5][8]float32)
