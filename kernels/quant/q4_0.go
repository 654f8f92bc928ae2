package quant

import "math"

// Q4_0: 32 elements in 18 bytes.
//
//	d  f16       scale
//	qs [16]byte  element j in the low nibble of qs[j], j+16 in the high one
//
// x = d * (q - 8). Products take Q8_0 activations.
const q4_0Bytes = 18

// quantizeQ4_0 rounds as ggml's reference quantizer does (a KV cache of
// this type is written with it): d is the block's value of largest
// magnitude (the first, on ties) over -8, so that value maps to q = 0;
// each x*(1/d) + 8.5 is truncated toward zero and capped at 15. The
// quants use 1/d of the unrounded d, and d is stored as f16.
func quantizeQ4_0(src []float32, dst []byte) {
	for i := range len(src) / 32 {
		x := src[i*32 : i*32+32]
		b := dst[i*q4_0Bytes : (i+1)*q4_0Bytes]
		var amax, peak float32
		for _, v := range x {
			if a := float32(math.Abs(float64(v))); a > amax {
				amax, peak = a, v
			}
		}
		d := peak / -8
		var id float32
		if d != 0 {
			id = 1 / d
		}
		storeF16(b, d)
		// float32(...) keeps the product and the sum two roundings, as in
		// C, where Go could otherwise fuse them.
		for j := range 16 {
			lo := min(15, int8(float32(x[j]*id)+8.5))
			hi := min(15, int8(float32(x[j+16]*id)+8.5))
			b[2+j] = byte(lo) | byte(hi)<<4
		}
	}
}

func dequantQ4_0(src []byte, dst []float32) {
	for i := range len(dst) / 32 {
		b := src[i*q4_0Bytes : (i+1)*q4_0Bytes]
		d := loadF16(b)
		y := dst[i*32 : i*32+32]
		for j, q := range b[2:18] {
			y[j] = d * float32(int(q&15)-8)
			y[j+16] = d * float32(int(q>>4)-8)
		}
	}
}

// dotQ4_0 is the product of Q4_0 weights x with Q8_0 activations y: one
// fused multiply-add per block into a single float, as ggml's x86 product
// (its weights repacked eight rows at a time) rounds.
func dotQ4_0(x, y []byte) float32 {
	var sum float32
	for i := range len(x) / q4_0Bytes {
		bx := x[i*q4_0Bytes : (i+1)*q4_0Bytes]
		by := y[i*q8_0Bytes : (i+1)*q8_0Bytes]
		qy := by[2:34]
		var s int32
		for j, q := range bx[2:18] {
			s += (int32(q&15)-8)*int32(int8(qy[j])) + (int32(q>>4)-8)*int32(int8(qy[j+16]))
		}
		sum = fma32(float32(s), loadF16(bx)*loadF16(by), sum)
	}
	return sum
}
