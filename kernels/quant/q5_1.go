package quant

import "encoding/binary"

// Q5_1: 32 elements in 24 bytes.
//
//	d  f16       scale
//	m  f16       offset
//	qh uint32    bit j is the fifth bit of element j
//	qs [16]byte  low four bits, packed as in Q5_0
//
// x = d*q + m. Products take Q8_1 activations.
const q5_1Bytes = 24

func dequantQ5_1(src []byte, dst []float32) {
	for i := range len(dst) / 32 {
		b := src[i*q5_1Bytes : (i+1)*q5_1Bytes]
		d, m := loadF16(b), loadF16(b[2:])
		qh := binary.LittleEndian.Uint32(b[4:])
		y := dst[i*32 : i*32+32]
		for j, q := range b[8:24] {
			lo, hi := q5(q, qh, j)
			y[j] = d*float32(lo) + m
			y[j+16] = d*float32(hi) + m
		}
	}
}

// dotQ5_1 is the product of Q5_1 weights x with Q8_1 activations y,
// rounded as dotQ4_1.
func dotQ5_1(x, y []byte) float32 {
	var acc [8]float32
	var w [32]int32
	var offs float32
	for i := range len(x) / q5_1Bytes {
		bx := x[i*q5_1Bytes : (i+1)*q5_1Bytes]
		by := y[i*q8_1Bytes : (i+1)*q8_1Bytes]
		qh := binary.LittleEndian.Uint32(bx[4:])
		for j, q := range bx[8:24] {
			w[j], w[j+16] = q5(q, qh, j)
		}
		offs = laneProducts(&acc, &w, by, loadF16(bx), loadF16(bx[2:]), offs)
	}
	return hsum8(&acc) + offs
}
