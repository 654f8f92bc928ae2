package quant

// Q4_K: 256 elements in 144 bytes, 8 sub-blocks of 32.
//
//	d      f16        scale of the sub-block scales
//	dmin   f16        scale of the sub-block mins
//	scales [12]byte   eight 6-bit scales and eight 6-bit mins (kScaleMin)
//	qs     [128]byte  per 64 elements, 32 bytes: low nibbles are the first
//	                  sub-block, high nibbles the second
//
// x = d*sc*q - dmin*m. Products take Q8_K activations.
const q4_KBytes = 144

func dequantQ4_K(src []byte, dst []float32) {
	for i := range len(dst) / 256 {
		b := src[i*q4_KBytes : (i+1)*q4_KBytes]
		d, dmin := loadF16(b), loadF16(b[2:])
		scales, qs := b[4:16], b[16:144]
		y := dst[i*256 : i*256+256]
		for j := range 4 {
			sc1, m1 := kScaleMin(scales, 2*j)
			sc2, m2 := kScaleMin(scales, 2*j+1)
			d1, min1 := d*float32(sc1), dmin*float32(m1)
			d2, min2 := d*float32(sc2), dmin*float32(m2)
			for l, q := range qs[32*j : 32*j+32] {
				y[64*j+l] = d1*float32(q&15) - min1
				y[64*j+32+l] = d2*float32(q>>4) - min2
			}
		}
	}
}

// dotQ4_K is the product of Q4_K weights x with Q8_K activations y: the
// scaled and the min terms each a single float taking one fused
// multiply-add per block, as ggml's x86 product (weights repacked eight
// rows at a time) rounds.
func dotQ4_K(x, y []byte) float32 {
	var sum, mins float32
	for i := range len(x) / q4_KBytes {
		bx := x[i*q4_KBytes : (i+1)*q4_KBytes]
		by := y[i*q8_KBytes : (i+1)*q8_KBytes]
		scales, qs, qy := bx[4:16], bx[16:144], by[4:260]
		var sumq, summ int32
		for j := range 4 {
			sc1, m1 := kScaleMin(scales, 2*j)
			sc2, m2 := kScaleMin(scales, 2*j+1)
			var s1, s2 int32
			for l, q := range qs[32*j : 32*j+32] {
				s1 += int32(q&15) * int32(int8(qy[64*j+l]))
				s2 += int32(q>>4) * int32(int8(qy[64*j+32+l]))
			}
			sumq += sc1*s1 + sc2*s2
			summ += m1*(q8KBlockSum(by, 4*j)+q8KBlockSum(by, 4*j+1)) +
				m2*(q8KBlockSum(by, 4*j+2)+q8KBlockSum(by, 4*j+3))
		}
		dy := loadF32(by)
		sum = fma32(float32(sumq), loadF16(bx)*dy, sum)
		mins = fma32(float32(summ), loadF16(bx[2:])*dy, mins)
	}
	return sum - mins
}
