package quant

import "math"

// MXFP4: 32 elements in 17 bytes (OCP microscaling FP4).
//
//	e  uint8     shared scale exponent (E8M0)
//	qs [16]byte  element j in the low nibble of qs[j], j+16 in the high one
//
// Each nibble is an E2M1 float; ggml stores it doubled as an integer
// (mxfp4Values) and halves the scale, so x = 2^(e-128) * mxfp4Values[q].
// Products take Q8_0 activations.
const mxfp4Bytes = 17

var mxfp4Values = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// e8m0Half is 2^(e-128), half the E8M0 scale; exact in float32 for every e
// (the smallest ones are subnormal).
func e8m0Half(e byte) float32 { return float32(math.Ldexp(1, int(e)-128)) }

func dequantMXFP4(src []byte, dst []float32) {
	for i := range len(dst) / 32 {
		b := src[i*mxfp4Bytes : (i+1)*mxfp4Bytes]
		d := e8m0Half(b[0])
		y := dst[i*32 : i*32+32]
		for j, q := range b[1:17] {
			y[j] = d * float32(mxfp4Values[q&15])
			y[j+16] = d * float32(mxfp4Values[q>>4])
		}
	}
}

func dotMXFP4(x, y []byte) float32 {
	var sum float32
	for i := range len(x) / mxfp4Bytes {
		bx := x[i*mxfp4Bytes : (i+1)*mxfp4Bytes]
		by := y[i*q8_0Bytes : (i+1)*q8_0Bytes]
		qy := by[2:34]
		var s int32
		for j, q := range bx[1:17] {
			s += int32(mxfp4Values[q&15])*int32(int8(qy[j])) + int32(mxfp4Values[q>>4])*int32(int8(qy[j+16]))
		}
		sum += float32(s) * (e8m0Half(bx[0]) * loadF16(by))
	}
	return sum
}
