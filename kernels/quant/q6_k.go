package quant

// Q6_K: 256 elements in 210 bytes, 16 sub-blocks of 16.
//
//	ql     [128]byte  low four bits
//	qh     [64]byte   top two bits
//	scales [16]int8   sub-block scales
//	d      f16        scale of the scales
//
// Per half of 128 elements (ql 64 bytes, qh 32 bytes), element 32k+l
// (k = 0..3, l = 0..31) takes its low bits from ql[l+32*(k&1)] (low nibble
// for k < 2, high for k >= 2) and its top bits from bits 2k..2k+1 of qh[l].
// x = d * scale * (q - 32). Products take Q8_K activations.
const q6_KBytes = 210

// q6 is element 32k+l of one 128-element half of a Q6_K block, minus 32.
func q6(ql, qh []byte, k, l int) int32 {
	lo := ql[l+32*(k&1)]
	if k >= 2 {
		lo >>= 4
	}
	return int32(lo&15|(qh[l]>>(2*k)&3)<<4) - 32
}

func dequantQ6_K(src []byte, dst []float32) {
	for i := range len(dst) / 256 {
		b := src[i*q6_KBytes : (i+1)*q6_KBytes]
		d := loadF16(b[208:])
		y := dst[i*256 : i*256+256]
		for h := range 2 {
			ql, qh := b[64*h:64*h+64], b[128+32*h:128+32*h+32]
			for k := range 4 {
				for l := range 32 {
					e := 128*h + 32*k + l
					sc := int8(b[192+e/16])
					y[e] = d * float32(sc) * float32(q6(ql, qh, k, l))
				}
			}
		}
	}
}

func dotQ6_K(x, y []byte) float32 {
	var sum float32
	for i := range len(x) / q6_KBytes {
		bx := x[i*q6_KBytes : (i+1)*q6_KBytes]
		by := y[i*q8_KBytes : (i+1)*q8_KBytes]
		qy := by[4:260]
		var sumq int32
		for h := range 2 {
			ql, qh := bx[64*h:64*h+64], bx[128+32*h:128+32*h+32]
			for k := range 4 {
				for half := range 2 { // two sub-blocks of 16 per k
					var s int32
					for l := 16 * half; l < 16*half+16; l++ {
						s += q6(ql, qh, k, l) * int32(int8(qy[128*h+32*k+l]))
					}
					sumq += int32(int8(bx[192+8*h+2*k+half])) * s
				}
			}
		}
		sum += loadF32(by) * loadF16(bx[208:]) * float32(sumq)
	}
	return sum
}
