package quant

import "encoding/binary"

// Q5_0: 32 elements in 22 bytes.
//
//	d  f16       scale
//	qh uint32    bit j is the fifth bit of element j
//	qs [16]byte  low four bits: element j in the low nibble of qs[j], j+16 in the high one
//
// x = d * (q - 16). Products take Q8_0 activations.
const q5_0Bytes = 22

// q5 is the unsigned 5-bit value of element j (0..15) and j+16 of a
// Q5_0/Q5_1 block, from its packed nibble byte q and high bits qh.
func q5(q byte, qh uint32, j int) (lo, hi int32) {
	lo = int32(q&15) | int32(qh>>j&1)<<4
	hi = int32(q>>4) | int32(qh>>(j+16)&1)<<4
	return lo, hi
}

func dequantQ5_0(src []byte, dst []float32) {
	for i := range len(dst) / 32 {
		b := src[i*q5_0Bytes : (i+1)*q5_0Bytes]
		d := loadF16(b)
		qh := binary.LittleEndian.Uint32(b[2:])
		y := dst[i*32 : i*32+32]
		for j, q := range b[6:22] {
			lo, hi := q5(q, qh, j)
			y[j] = d * float32(lo-16)
			y[j+16] = d * float32(hi-16)
		}
	}
}

// dotQ5_0 is the product of Q5_0 weights x with Q8_0 activations y,
// rounded as dotQ8_0.
func dotQ5_0(x, y []byte) float32 {
	var acc [8]float32
	var w [32]int32
	for i := range len(x) / q5_0Bytes {
		bx := x[i*q5_0Bytes : (i+1)*q5_0Bytes]
		by := y[i*q8_0Bytes : (i+1)*q8_0Bytes]
		qh := binary.LittleEndian.Uint32(bx[2:])
		for j, q := range bx[6:22] {
			lo, hi := q5(q, qh, j)
			w[j], w[j+16] = lo-16, hi-16
		}
		d := loadF16(bx) * loadF16(by)
		qy := by[2:34]
		for k := range acc {
			var s int32
			for j := 4 * k; j < 4*k+4; j++ {
				s += w[j] * int32(int8(qy[j]))
			}
			acc[k] = fma32(float32(s), d, acc[k])
		}
	}
	return hsum8(&acc)
}
