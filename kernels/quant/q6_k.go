package quant

// Q6_K: 256 elements in 210 bytes, 16 sub-blocks of 16.
//
//	ql     [128]byte  low four bits
//	qh     [64]byte   top two bits
//	scales [16]int8   sub-block scales
//	d      f16        scale of the scales
//
// Per half of 128 elements (ql 64 bytes, qh 32 bytes), elements l, l+32,
// l+64 and l+96 (l = 0..31) take their low bits from the low nibbles of
// ql[l], ql[l+32], then the high nibbles of ql[l], ql[l+32], and their top
// bits from bits 0-1, 2-3, 4-5, 6-7 of qh[l]. x = d * scale * (q - 32).
// Products take Q8_K activations.
const q6_KBytes = 210

// q6Quad is elements l, l+32, l+64, l+96 of a Q6_K half block, minus 32.
func q6Quad(ql, qh []byte, l int) (q0, q1, q2, q3 int32) {
	a, b, h := ql[l], ql[l+32], qh[l]
	q0 = int32(a&15|h&3<<4) - 32
	q1 = int32(b&15|h>>2&3<<4) - 32
	q2 = int32(a>>4|h>>4&3<<4) - 32
	q3 = int32(b>>4|h>>6<<4) - 32
	return q0, q1, q2, q3
}

func dequantQ6_K(src []byte, dst []float32) {
	for i := range len(dst) / 256 {
		b := src[i*q6_KBytes : (i+1)*q6_KBytes]
		d := loadF16(b[208:])
		for h := range 2 {
			ql, qh, sc := b[64*h:64*h+64], b[128+32*h:128+32*h+32], b[192+8*h:192+8*h+8]
			y := dst[i*256+128*h : i*256+128*h+128]
			for l := range 32 {
				g := l / 16
				q0, q1, q2, q3 := q6Quad(ql, qh, l)
				y[l] = d * float32(int8(sc[g])) * float32(q0)
				y[l+32] = d * float32(int8(sc[g+2])) * float32(q1)
				y[l+64] = d * float32(int8(sc[g+4])) * float32(q2)
				y[l+96] = d * float32(int8(sc[g+6])) * float32(q3)
			}
		}
	}
}

// dotQ6_K is the product of Q6_K weights x with Q8_K activations y, in the
// order of ggml's x86 product: eight integer lanes per block (elements
// 4k..4k+3 of every 32, times their sub-block scales) take one fused
// multiply-add each, and the lanes are added at the end (hsum8).
func dotQ6_K(x, y []byte) float32 {
	var acc [8]float32
	for i := range len(x) / q6_KBytes {
		bx := x[i*q6_KBytes : (i+1)*q6_KBytes]
		by := y[i*q8_KBytes : (i+1)*q8_KBytes]
		var lanes [8]int32
		for h := range 2 {
			ql, qh, sc := bx[64*h:64*h+64], bx[128+32*h:128+32*h+32], bx[192+8*h:192+8*h+8]
			qy := by[4+128*h : 4+128*h+128]
			for l := range 32 {
				g := l / 16
				q0, q1, q2, q3 := q6Quad(ql, qh, l)
				lanes[l/4] += int32(int8(sc[g]))*q0*int32(int8(qy[l])) +
					int32(int8(sc[g+2]))*q1*int32(int8(qy[l+32])) +
					int32(int8(sc[g+4]))*q2*int32(int8(qy[l+64])) +
					int32(int8(sc[g+6]))*q3*int32(int8(qy[l+96]))
			}
		}
		d := loadF16(bx[208:]) * loadF32(by)
		for k, v := range lanes {
			acc[k] = fma32(float32(v), d, acc[k])
		}
	}
	return hsum8(&acc)
}
