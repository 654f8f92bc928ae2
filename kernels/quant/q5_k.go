package quant

// Q5_K: 256 elements in 176 bytes, 8 sub-blocks of 32.
//
//	d      f16        scale of the sub-block scales
//	dmin   f16        scale of the sub-block mins
//	scales [12]byte   as Q4_K
//	qh     [32]byte   fifth bits: bit k of qh[l] belongs to element 32k+l
//	qs     [128]byte  low four bits, packed as Q4_K
//
// x = d*sc*q - dmin*m. Products take Q8_K activations.
const q5_KBytes = 176

func dequantQ5_K(src []byte, dst []float32) {
	for i := range len(dst) / 256 {
		b := src[i*q5_KBytes : (i+1)*q5_KBytes]
		d, dmin := loadF16(b), loadF16(b[2:])
		scales, qh, qs := b[4:16], b[16:48], b[48:176]
		y := dst[i*256 : i*256+256]
		for j := range 4 {
			sc1, m1 := kScaleMin(scales, 2*j)
			sc2, m2 := kScaleMin(scales, 2*j+1)
			d1, min1 := d*float32(sc1), dmin*float32(m1)
			d2, min2 := d*float32(sc2), dmin*float32(m2)
			for l, q := range qs[32*j : 32*j+32] {
				h := qh[l] >> (2 * j)
				y[64*j+l] = d1*float32(q&15|h&1<<4) - min1
				y[64*j+32+l] = d2*float32(q>>4|h&2<<3) - min2
			}
		}
	}
}

// dotQ5_K is the product of Q5_K weights x with Q8_K activations y, in the
// order of ggml's x86 product: eight integer lanes per block (elements
// 4k..4k+3 of every 32, times their sub-block scales) take one fused
// multiply-add each, the min term one scalar fused multiply-add per block.
func dotQ5_K(x, y []byte) float32 {
	var acc [8]float32
	var mins float32
	for i := range len(x) / q5_KBytes {
		bx := x[i*q5_KBytes : (i+1)*q5_KBytes]
		by := y[i*q8_KBytes : (i+1)*q8_KBytes]
		scales, qh, qs, qy := bx[4:16], bx[16:48], bx[48:176], by[4:260]
		var lanes [8]int32 // lane k: elements 4k..4k+3 of every 32
		var summ int32
		for j := range 4 {
			sc1, m1 := kScaleMin(scales, 2*j)
			sc2, m2 := kScaleMin(scales, 2*j+1)
			for l, q := range qs[32*j : 32*j+32] {
				h := qh[l] >> (2 * j)
				lanes[l/4] += sc1*int32(q&15|h&1<<4)*int32(int8(qy[64*j+l])) +
					sc2*int32(q>>4|h&2<<3)*int32(int8(qy[64*j+32+l]))
			}
			summ += m1*(q8KBlockSum(by, 4*j)+q8KBlockSum(by, 4*j+1)) +
				m2*(q8KBlockSum(by, 4*j+2)+q8KBlockSum(by, 4*j+3))
		}
		dy := loadF32(by)
		d := loadF16(bx) * dy
		for k, s := range lanes {
			acc[k] = fma32(float32(s), d, acc[k])
		}
		mins = fma32(float32(summ), loadF16(bx[2:])*dy, mins)
	}
	return hsum8(&acc) - mins
}
