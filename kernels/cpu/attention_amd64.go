//go:build !purego

package cpu

import "golang.org/x/sys/cpu"

// hasAVX2 is set once at start from the CPU's features: the attention
// kernels need AVX2, FMA and F16C.
var hasAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C

//go:noescape
func dotHalfWideAVX2(k []byte, q []float32, steps int) float32

// dotHalfWide is dotHalfWideGo, the whole steps of 64 in assembly.
func dotHalfWide(k []byte, q []float32) float32 {
	n := len(q)
	np := n &^ 63
	if !hasAVX2 || np == 0 {
		return dotHalfWideGo(k, q)
	}
	s := dotHalfWideAVX2(k[:2*np], q[:np], np/64)
	if np == n {
		return s
	}
	return float32(float64(s) + halfTail(k[2*np:2*n], q[np:]))
}

//go:noescape
func accumulateHalfAVX2(acc []float32, v []byte, vs float32, n int)

//go:noescape
func scaleHalfAVX2(acc []float32, ms float32, n int)

// accumulateHalf is accumulateHalfGo, whole groups of four in assembly.
func accumulateHalf(acc []float32, v []byte, vs float32) {
	if n := len(acc) &^ 3; hasAVX2 && n > 0 {
		accumulateHalfAVX2(acc[:n], v[:2*n], vs, n)
		acc, v = acc[n:], v[2*n:]
	}
	accumulateHalfGo(acc, v, vs)
}

// scaleHalf is scaleHalfGo, whole groups of eight in assembly.
func scaleHalf(acc []float32, ms float32) {
	if n := len(acc) &^ 7; hasAVX2 && n > 0 {
		scaleHalfAVX2(acc[:n], ms, n)
		acc = acc[n:]
	}
	scaleHalfGo(acc, ms)
}
