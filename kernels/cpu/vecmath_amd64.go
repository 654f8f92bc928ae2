//go:build !purego

package cpu

//go:noescape
func scaleMulAVX512(dst, x, w []float32, s float32, n int)

//go:noescape
func addAVX512(dst, a, b []float32, n int)

//go:noescape
func rotateAVX512(dst0, dst1, x0, x1, cos, sin []float32, n int)

// scaleMul is scaleMulGo, whole groups of 16 in assembly.
func scaleMul(dst, x, w []float32, s float32) {
	if n := len(x) &^ 15; hasAttnAVX512 && n > 0 {
		scaleMulAVX512(dst[:n], x[:n], w[:n], s, n)
		dst, x, w = dst[n:], x[n:], w[n:]
	}
	scaleMulGo(dst, x, w, s)
}

// addRow is addRowGo, whole groups of 16 in assembly.
func addRow(dst, a, b []float32) {
	if n := len(a) &^ 15; hasAttnAVX512 && n > 0 {
		addAVX512(dst[:n], a[:n], b[:n], n)
		dst, a, b = dst[n:], a[n:], b[n:]
	}
	addRowGo(dst, a, b)
}

// rotate is rotateGo, whole groups of 16 in assembly.
func rotate(dst0, dst1, x0, x1, cos, sin []float32) {
	if n := len(x0) &^ 15; hasAttnAVX512 && n > 0 {
		rotateAVX512(dst0[:n], dst1[:n], x0[:n], x1[:n], cos[:n], sin[:n], n)
		dst0, dst1, x0, x1, cos, sin = dst0[n:], dst1[n:], x0[n:], x1[n:], cos[n:], sin[n:]
	}
	rotateGo(dst0, dst1, x0, x1, cos, sin)
}
