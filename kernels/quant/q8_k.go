package quant

import (
	"encoding/binary"
	"math"
)

// Q8_K: 256 elements in 292 bytes, the activation type for the K-quants and
// IQ4_XS.
//
//	d     f32         scale
//	qs    [256]int8   x[j] = d * qs[j]
//	bsums [16]int16   sums of qs over each 16 elements (for the K-quant mins)
const q8_KBytes = 292

func dequantQ8_K(src []byte, dst []float32) {
	for i := range len(dst) / 256 {
		b := src[i*q8_KBytes : (i+1)*q8_KBytes]
		d := loadF32(b)
		y := dst[i*256 : i*256+256]
		for j, q := range b[4:260] {
			y[j] = d * float32(int8(q))
		}
	}
}

// quantizeQ8_K follows ggml: the element of largest magnitude maps to -127,
// others round to nearest even, and d = 1/scale is kept in float32.
func quantizeQ8_K(src []float32, dst []byte) {
	for i := range len(src) / 256 {
		x := src[i*256 : i*256+256]
		b := dst[i*q8_KBytes : (i+1)*q8_KBytes]
		var amax uint32 // |x| bits, see absMax
		var vmax float32
		for _, v := range x {
			if a := math.Float32bits(v) & 0x7fffffff; a > amax {
				amax, vmax = a, v
			}
		}
		if amax == 0 {
			clear(b)
			continue
		}
		iscale := -127 / vmax
		qs := b[4:260]
		for j, v := range x {
			qs[j] = byte(min(127, roundInt(iscale*v)))
		}
		for j := range 16 {
			var s int16
			for _, q := range qs[16*j : 16*j+16] {
				s += int16(int8(q))
			}
			binary.LittleEndian.PutUint16(b[260+2*j:], uint16(s))
		}
		binary.LittleEndian.PutUint32(b, math.Float32bits(1/iscale))
	}
}
