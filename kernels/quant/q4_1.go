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

// dotQ4_1 is the product of Q4_1 weights x with Q8_1 activations y, in the
// order of ggml's x86 product: eight integer lanes (elements 4k..4k+3)
// take one fused multiply-add each per block, the offsets m·s one scalar
// fused multiply-add per block.
func dotQ4_1(x, y []byte) float32 {
	var acc [8]float32
	var w [32]int32
	var offs float32
	for i := range len(x) / q4_1Bytes {
		bx := x[i*q4_1Bytes : (i+1)*q4_1Bytes]
		by := y[i*q8_1Bytes : (i+1)*q8_1Bytes]
		for j, q := range bx[4:20] {
			w[j], w[j+16] = int32(q&15), int32(q>>4)
		}
		offs = laneProducts(&acc, &w, by, loadF16(bx), loadF16(bx[2:]), offs)
	}
	return hsum8(&acc) + offs
}

// laneProducts adds one block of unsigned weights w with the Q8_1 block
// by to the lanes of acc (weight scale d) and returns offs plus m·s, the
// order of dotQ4_1.
func laneProducts(acc *[8]float32, w *[32]int32, by []byte, d, m, offs float32) float32 {
	qy := by[4:36]
	dd := d * loadF16(by)
	for k := range acc {
		var s int32
		for j := 4 * k; j < 4*k+4; j++ {
			s += w[j] * int32(int8(qy[j]))
		}
		acc[k] = fma32(float32(s), dd, acc[k])
	}
	return fma32(m, loadF16(by[2:]), offs)
}
