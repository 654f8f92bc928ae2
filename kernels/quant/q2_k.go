package quant

// Q2_K: 256 elements in 84 bytes, 16 sub-blocks of 16.
//
//	scales [16]byte  low nibble: sub-block scale, high nibble: sub-block min
//	qs     [64]byte  2-bit quants
//	d      f16       scale of the scales
//	dmin   f16       scale of the mins
//
// Per half of 128 elements (32 bytes of qs), element 32k+l (k = 0..3,
// l = 0..31) is bits 2k..2k+1 of qs[l]. x = d*sc*q - dmin*m.
// Products take Q8_K activations.
const q2_KBytes = 84

// q2 is element e (0..255) of a Q2_K block's quants.
func q2(qs []byte, e int) int32 {
	h, k, l := e/128, e%128/32, e%32
	return int32(qs[32*h+l] >> (2 * k) & 3)
}

func dequantQ2_K(src []byte, dst []float32) {
	for i := range len(dst) / 256 {
		b := src[i*q2_KBytes : (i+1)*q2_KBytes]
		scales, qs := b[0:16], b[16:80]
		d, dmin := loadF16(b[80:]), loadF16(b[82:])
		y := dst[i*256 : i*256+256]
		for g, sc := range scales {
			dl, ml := d*float32(sc&15), dmin*float32(sc>>4)
			for e := 16 * g; e < 16*g+16; e++ {
				y[e] = dl*float32(q2(qs, e)) - ml
			}
		}
	}
}

func dotQ2_K(x, y []byte) float32 {
	var sum float32
	for i := range len(x) / q2_KBytes {
		bx := x[i*q2_KBytes : (i+1)*q2_KBytes]
		by := y[i*q8_KBytes : (i+1)*q8_KBytes]
		scales, qs, qy := bx[0:16], bx[16:80], by[4:260]
		var sumq, summ int32
		for g, sc := range scales {
			var s int32
			for e := 16 * g; e < 16*g+16; e++ {
				s += q2(qs, e) * int32(int8(qy[e]))
			}
			sumq += int32(sc&15) * s
			summ += int32(sc>>4) * q8KBlockSum(by, g)
		}
		dy := loadF32(by)
		sum += dy*loadF16(bx[80:])*float32(sumq) - dy*loadF16(bx[82:])*float32(summ)
	}
	return sum
}
