package quant

// Q3_K: 256 elements in 110 bytes, 16 sub-blocks of 16.
//
//	hmask  [32]byte  third bits: bit 4h+k of hmask[l] for element 128h+32k+l
//	qs     [64]byte  low two bits, packed as Q2_K
//	scales [12]byte  sixteen 6-bit scales (q3KScale)
//	d      f16       scale of the scales
//
// x = d * (scale-32) * (q-4), where q-4 is the two low bits minus 4 unless
// the third bit is set. Products take Q8_K activations.
const q3_KBytes = 110

// q3KScale is the signed scale of sub-block g (0..15): its low four bits are
// nibble g%8 of bytes 0-7 (low nibbles first), its top two bits are bits
// 2*(g/4) of byte 8+g%4.
func q3KScale(s []byte, g int) int32 {
	lo := s[g%8]
	if g >= 8 {
		lo >>= 4
	}
	hi := s[8+g%4] >> (2 * (g / 4)) & 3
	return int32(lo&15|hi<<4) - 32
}

// q3 is element 128h+32k+l of a Q3_K block, in -4..3.
func q3(hmask, qs []byte, h, k, l int) int32 {
	q := int32(qs[32*h+l] >> (2 * k) & 3)
	if hmask[l]>>(4*h+k)&1 == 0 {
		q -= 4
	}
	return q
}

func dequantQ3_K(src []byte, dst []float32) {
	for i := range len(dst) / 256 {
		b := src[i*q3_KBytes : (i+1)*q3_KBytes]
		hmask, qs, scales := b[0:32], b[32:96], b[96:108]
		d := loadF16(b[108:])
		y := dst[i*256 : i*256+256]
		for h := range 2 {
			for k := range 4 {
				for half := range 2 {
					g := 8*h + 2*k + half
					dl := d * float32(q3KScale(scales, g))
					for l := 16 * half; l < 16*half+16; l++ {
						y[128*h+32*k+l] = dl * float32(q3(hmask, qs, h, k, l))
					}
				}
			}
		}
	}
}

func dotQ3_K(x, y []byte) float32 {
	var sum float32
	for i := range len(x) / q3_KBytes {
		bx := x[i*q3_KBytes : (i+1)*q3_KBytes]
		by := y[i*q8_KBytes : (i+1)*q8_KBytes]
		hmask, qs, scales, qy := bx[0:32], bx[32:96], bx[96:108], by[4:260]
		var sumq int32
		for h := range 2 {
			for k := range 4 {
				for half := range 2 {
					g := 8*h + 2*k + half
					var s int32
					for l := 16 * half; l < 16*half+16; l++ {
						s += q3(hmask, qs, h, k, l) * int32(int8(qy[128*h+32*k+l]))
					}
					sumq += q3KScale(scales, g) * s
				}
			}
		}
		sum += loadF32(by) * loadF16(bx[108:]) * float32(sumq)
	}
	return sum
}
