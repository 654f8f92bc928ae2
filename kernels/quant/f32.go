package quant

import (
	"encoding/binary"
	"math"
)

// F32 rows hold one little-endian float32 per element. Products take float32
// activations, so nothing is rounded beyond the fp32 reference's own sums.

func dequantF32(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = loadF32(src[4*i:])
	}
}

func quantizeF32(src []float32, dst []byte) {
	for i, f := range src {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(f))
	}
}

// dotF32 is Σ x[i]*y[i] with x stored as float32 bytes. Four partial sums
// break the add dependency chain.
func dotF32(x []byte, y []float32) float32 {
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(y); i += 4 {
		xb := x[4*i : 4*i+16]
		yv := y[i : i+4]
		s0 += loadF32(xb[0:]) * yv[0]
		s1 += loadF32(xb[4:]) * yv[1]
		s2 += loadF32(xb[8:]) * yv[2]
		s3 += loadF32(xb[12:]) * yv[3]
	}
	for ; i < len(y); i++ {
		s0 += loadF32(x[4*i:]) * y[i]
	}
	return (s0 + s1) + (s2 + s3)
}
