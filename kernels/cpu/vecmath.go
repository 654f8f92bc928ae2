package cpu

// axpyF32 is y += a*x.
func axpyF32(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += a * x[i]
	}
}

// scaleF32 is x *= a.
func scaleF32(x []float32, a float32) {
	for i := range x {
		x[i] *= a
	}
}

// scaleMulGo is dst = x·s·w, the product with s first.
func scaleMulGo(dst, x, w []float32, s float32) {
	w, dst = w[:len(x)], dst[:len(x)]
	for i, v := range x {
		dst[i] = v * s * w[i]
	}
}

// rotateGo is dst0 = x0·cos - x1·sin and dst1 = x0·sin + x1·cos, each
// product rounded to float32 (the conversions keep a compiler from fusing
// them), as ggml's RoPE computes the two halves of a NeoX pair.
func rotateGo(dst0, dst1, x0, x1, cos, sin []float32) {
	n := len(x0)
	dst0, dst1, x1, cos, sin = dst0[:n], dst1[:n], x1[:n], cos[:n], sin[:n]
	for j, a := range x0 {
		b := x1[j]
		dst0[j] = float32(a*cos[j]) - float32(b*sin[j])
		dst1[j] = float32(a*sin[j]) + float32(b*cos[j])
	}
}
