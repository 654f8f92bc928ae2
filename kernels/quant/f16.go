package quant

// F16 rows hold one little-endian IEEE binary16 per element. Products take
// float32 activations (ggml rounds them to F16 first; keeping them in float32
// makes an F16 model match an fp32 reference run on the same weights).

func dequantF16(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = loadF16(src[2*i:])
	}
}

func quantizeF16(src []float32, dst []byte) {
	for i, f := range src {
		storeF16(dst[2*i:], f)
	}
}

// dotF16 is Σ x[i]*y[i] with x stored as binary16.
func dotF16(x []byte, y []float32) float32 {
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(y); i += 4 {
		xb := x[2*i : 2*i+8]
		yv := y[i : i+4]
		s0 += loadF16(xb[0:]) * yv[0]
		s1 += loadF16(xb[2:]) * yv[1]
		s2 += loadF16(xb[4:]) * yv[2]
		s3 += loadF16(xb[6:]) * yv[3]
	}
	for ; i < len(y); i++ {
		s0 += loadF16(x[2*i:]) * y[i]
	}
	return (s0 + s1) + (s2 + s3)
}
