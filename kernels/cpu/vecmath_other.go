//go:build !amd64 || purego

package cpu

func scaleMul(dst, x, w []float32, s float32) { scaleMulGo(dst, x, w, s) }

func addRow(dst, a, b []float32) { addRowGo(dst, a, b) }

func rotate(dst0, dst1, x0, x1, cos, sin []float32) { rotateGo(dst0, dst1, x0, x1, cos, sin) }
