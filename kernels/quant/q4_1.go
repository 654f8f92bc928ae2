package quant

// Q4_1: 32 elements in 20 bytes.
//
//	d  f16       scale
//	m  f16       offset
//	qs [16]byte  element j in the low nibble of qs[j], j+16 in the high one
//
// x = d*q + m. Products take Q8_1 activations, whose stored d*Σq turns the
// offset term into one multiply per block.
const q4_1Bytes = 20

func dequantQ4_1(src []byte, dst []float32) {
	for i := range len(dst) / 32 {
		b := src[i*q4_1Bytes : (i+1)*q4_1Bytes]
		d, m := loadF16(b), loadF16(b[2:])
		y := dst[i*32 : i*32+32]
		for j, q := range b[4:20] {
			y[j] = d*float32(q&15) + m
			y[j+16] = d*float32(q>>4) + m
		}
	}
}

func dotQ4_1(x, y []byte) float32 {
	var sum float32
	for i := range len(x) / q4_1Bytes {
		bx := x[i*q4_1Bytes : (i+1)*q4_1Bytes]
		by := y[i*q8_1Bytes : (i+1)*q8_1Bytes]
		qy := by[4:36]
		var s int32
		for j, q := range bx[4:20] {
			s += int32(q&15)*int32(int8(qy[j])) + int32(q>>4)*int32(int8(qy[j+16]))
		}
		sum += float32(s)*(loadF16(bx)*loadF16(by)) + loadF16(bx[2:])*loadF16(by[2:])
	}
	return sum
}
