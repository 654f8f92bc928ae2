//go:build !purego

package cpu

import "golang.org/x/sys/cpu"

// hasAVX512 is set once at start: swigluAVX512 needs AVX-512F (VSCALEFPS
// scales by 2^n in one rounding, as math.Ldexp and a float32 conversion
// do) and DQ.
var hasAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ

// swigluRow is swigluGo, whole groups of 16 in assembly: every lane takes
// expApprox's operations in its order (the fused multiply-adds as FMA
// instructions), then g/(1+e)·up.
func swigluRow(dst, gate, up []float32) {
	if n := len(gate) &^ 15; hasAVX512 && n > 0 {
		swigluAVX512(dst[:n], gate[:n], up[:n], n)
		dst, gate, up = dst[n:], gate[n:], up[n:]
	}
	swigluGo(dst, gate, up)
}

//go:noescape
func swigluAVX512(dst, gate, up []float32, n int)
