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

func dequantQ2_K(src []byte, dst []float32) {
	for i := range len(dst) / 256 {
		b := src[i*q2_KBytes : (i+1)*q2_KBytes]
		scales, qs := b[0:16], b[16:80]
		d, dmin := loadF16(b[80:]), loadF16(b[82:])
		y := dst[i*256 : i*256+256]
		for h := range 2 {
			q := qs[32*h : 32*h+32]
			for k := range 4 {
				for half := range 2 {
					g := 8*h + 2*k + half
					dl, ml := d*float32(scales[g]&15), dmin*float32(scales[g]>>4)
					for l := 16 * half; l < 16*half+16; l++ {
						y[128*h+32*k+l] = dl*float32(q[l]>>(2*k)&3) - ml
					}
				}
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
		for h := range 2 {
			q := qs[32*h : 32*h+32]
			for k := range 4 {
				for half := range 2 {
					g := 8*h + 2*k + half
					var s int32
					for l := 16 * half; l < 16*half+16; l++ {
						s += int32(q[l]>>(2*k)&3) * int32(int8(qy[128*h+32*k+l]))
					}
					sumq += int32(scales[g]&15) * s
					summ += int32(scales[g]>>4) * q8KBlockSum(by, g)
				}
			}
		}
		dy := loadF32(by)
		sum += dy*loadF16(bx[80:])*float32(sumq) - dy*loadF16(bx[82:])*float32(summ)
	}
	return sum
}
