//go:build !purego

package cpu

import "golang.org/x/sys/cpu"

// hasAVX2 is set once at start from the CPU's features: dotHalfWideAVX2
// needs AVX2, FMA and F16C.
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
