package quant

import "math"

// Q8_0: 32 elements in 34 bytes.
//
//	d  f16      scale
//	qs [32]int8 x[j] = d * qs[j]
//
// Q8_0 is also the activation type for the 32-element weight types.
const q8_0Bytes = 34

func dequantQ8_0(src []byte, dst []float32) {
	for i := range len(dst) / 32 {
		b := src[i*q8_0Bytes : (i+1)*q8_0Bytes]
		d := loadF16(b)
		y := dst[i*32 : i*32+32]
		for j, q := range b[2:34] {
			y[j] = d * float32(int8(q))
		}
	}
}

// quantizeQ8_0 rounds as ggml's x86 path does: d = amax/127 stored as f16,
// x*(127/amax) rounded to nearest even (not via the stored, rounded d).
func quantizeQ8_0(src []float32, dst []byte) {
	for i := range len(src) / 32 {
		x := src[i*32 : i*32+32]
		b := dst[i*q8_0Bytes : (i+1)*q8_0Bytes]
		amax := absMax(x)
		storeF16(b, amax/127)
		var id float32
		if amax != 0 {
			id = 127 / amax
		}
		qs := b[2:34]
		for j, v := range x {
			qs[j] = byte(roundInt(v * id))
		}
	}
}

// dotQ8_0 is the product of Q8_0 weights x with Q8_0 activations y, in the
// order of ggml's x86 product: eight lanes, each the integer sum of four
// neighbouring products, take one fused multiply-add per block; the lanes
// are added at the end (hsum8).
func dotQ8_0(x, y []byte) float32 {
	var acc [8]float32
	for i := range len(x) / q8_0Bytes {
		bx := x[i*q8_0Bytes : (i+1)*q8_0Bytes]
		by := y[i*q8_0Bytes : (i+1)*q8_0Bytes]
		d := loadF16(bx) * loadF16(by)
		qx, qy := bx[2:34], by[2:34]
		for k := range acc {
			var s int32
			for j := 4 * k; j < 4*k+4; j++ {
				s += int32(int8(qx[j])) * int32(int8(qy[j]))
			}
			acc[k] = fma32(float32(s), d, acc[k])
		}
	}
	return hsum8(&acc)
}

// absMax is max |x[i]| (NaN-free input). It compares the bits with the
// sign cleared, which order like the magnitudes and need no float compare.
func absMax(x []float32) float32 {
	var m uint32
	for _, v := range x {
		m = max(m, math.Float32bits(v)&0x7fffffff)
	}
	return math.Float32frombits(m)
}

// roundInt rounds v (|v| < 2^22) to the nearest integer, ties to even, as
// ggml's nearest_int and the x86 rounding mode do: adding 1.5·2^23 leaves
// the rounded integer in the low mantissa bits.
func roundInt(v float32) int32 {
	return int32(math.Float32bits(v+12582912)&0x7fffff) - 0x400000
}
