package quant

import "encoding/binary"

// BF16 rows hold the top 16 bits of a float32 per element, little-endian.
// Products take float32 activations, as for F16.

func dequantBF16(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = bf16ToFloat(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

func quantizeBF16(src []float32, dst []byte) {
	for i, f := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], floatToBF16(f))
	}
}

// dotBF16 is Σ x[i]*y[i] with x stored as bfloat16.
func dotBF16(x []byte, y []float32) float32 {
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(y); i += 4 {
		xb := x[2*i : 2*i+8]
		yv := y[i : i+4]
		s0 += bf16ToFloat(binary.LittleEndian.Uint16(xb[0:])) * yv[0]
		s1 += bf16ToFloat(binary.LittleEndian.Uint16(xb[2:])) * yv[1]
		s2 += bf16ToFloat(binary.LittleEndian.Uint16(xb[4:])) * yv[2]
		s3 += bf16ToFloat(binary.LittleEndian.Uint16(xb[6:])) * yv[3]
	}
	for ; i < len(y); i++ {
		s0 += bf16ToFloat(binary.LittleEndian.Uint16(x[2*i:])) * y[i]
	}
	return (s0 + s1) + (s2 + s3)
}
