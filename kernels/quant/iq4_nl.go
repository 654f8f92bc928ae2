package quant

// IQ4_NL: 32 elements in 18 bytes, laid out as Q4_0 but each nibble indexes
// a fixed non-linear codebook.
//
//	d  f16       scale
//	qs [16]byte  element j in the low nibble of qs[j], j+16 in the high one
//
// x = d * iq4nlValues[q]. Products take Q8_0 activations.
const iq4_nlBytes = 18

// iq4nlValues is ggml's kvalues_iq4nl, shared with IQ4_XS.
var iq4nlValues = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

func dequantIQ4_NL(src []byte, dst []float32) {
	for i := range len(dst) / 32 {
		b := src[i*iq4_nlBytes : (i+1)*iq4_nlBytes]
		d := loadF16(b)
		y := dst[i*32 : i*32+32]
		for j, q := range b[2:18] {
			y[j] = d * float32(iq4nlValues[q&15])
			y[j+16] = d * float32(iq4nlValues[q>>4])
		}
	}
}

// dotIQ4_NL is the product of IQ4_NL weights x with Q8_0 activations y,
// rounded as dotQ4_0.
func dotIQ4_NL(x, y []byte) float32 {
	var sum float32
	for i := range len(x) / iq4_nlBytes {
		bx := x[i*iq4_nlBytes : (i+1)*iq4_nlBytes]
		by := y[i*q8_0Bytes : (i+1)*q8_0Bytes]
		qy := by[2:34]
		var s int32
		for j, q := range bx[2:18] {
			s += int32(iq4nlValues[q&15])*int32(int8(qy[j])) + int32(iq4nlValues[q>>4])*int32(int8(qy[j+16]))
		}
		sum = fma32(float32(s), loadF16(bx)*loadF16(by), sum)
	}
	return sum
}
