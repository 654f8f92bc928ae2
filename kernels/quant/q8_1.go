package quant

// Q8_1: 32 elements in 36 bytes, the activation type for Q4_1 and Q5_1,
// whose offset m needs the block's sum.
//
//	d  f16      scale
//	s  f16      d * Σ qs
//	qs [32]int8 x[j] = d * qs[j]
const q8_1Bytes = 36

func dequantQ8_1(src []byte, dst []float32) {
	for i := range len(dst) / 32 {
		b := src[i*q8_1Bytes : (i+1)*q8_1Bytes]
		d := loadF16(b)
		y := dst[i*32 : i*32+32]
		for j, q := range b[4:36] {
			y[j] = d * float32(int8(q))
		}
	}
}

// quantizeQ8_1 rounds as quantizeQ8_0 does and stores d*Σq as s.
func quantizeQ8_1(src []float32, dst []byte) {
	for i := range len(src) / 32 {
		x := src[i*32 : i*32+32]
		b := dst[i*q8_1Bytes : (i+1)*q8_1Bytes]
		amax := absMax(x)
		d := amax / 127
		var id float32
		if amax != 0 {
			id = 127 / amax
		}
		var sum int32
		for j, v := range x {
			q := int8(roundInt(v * id))
			b[4+j] = byte(q)
			sum += int32(q)
		}
		storeF16(b, d)
		storeF16(b[2:], d*float32(sum))
	}
}
