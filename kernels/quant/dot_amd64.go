//go:build !purego

package quant

import "golang.org/x/sys/cpu"

// The AVX2 kernels live in *_amd64.s, one file per weight type family. Each
// is a hand-scheduled version of the scalar kernel of the same type (the
// integer products are exact, so both agree up to float32 summation order)
// and is tested against the same float64 reference. The Go wrappers below
// slice their operands to the exact sizes first, so a wrong length panics
// in Go rather than reading past a buffer (DotFunc checks lengths before
// that can happen).

// hasAVX2 is set once at start from the CPU's features: the kernels need
// AVX2 integer ops, FMA and F16C (VCVTPH2PS).
var hasAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C

func fastKernel(w Type) (kernel, bool) {
	if !hasAVX2 {
		return kernel{}, false
	}
	switch w {
	case F32:
		return kernel{act: F32, float: dotF32Fast}, true
	case F16:
		return kernel{act: F32, float: dotF16Fast}, true
	case BF16:
		return kernel{act: F32, float: dotBF16Fast}, true
	case Q8_0:
		return kernel{act: Q8_0, quant: dotQ8_0Fast}, true
	case Q4_0:
		return kernel{act: Q8_0, quant: dotQ4_0Fast}, true
	case Q4_1:
		return kernel{act: Q8_1, quant: dotQ4_1Fast}, true
	case Q5_0:
		return kernel{act: Q8_0, quant: dotQ5_0Fast}, true
	case Q5_1:
		return kernel{act: Q8_1, quant: dotQ5_1Fast}, true
	case IQ4_NL:
		return kernel{act: Q8_0, quant: dotIQ4_NLFast}, true
	case Q4_K:
		return kernel{act: Q8_K, quant: dotQ4_KFast}, true
	case Q5_K:
		return kernel{act: Q8_K, quant: dotQ5_KFast}, true
	case Q6_K:
		return kernel{act: Q8_K, quant: dotQ6_KFast}, true
	case IQ4_XS:
		return kernel{act: Q8_K, quant: dotIQ4_XSFast}, true
	}
	return kernel{}, false
}

// fastQuantizer is the AVX2 version of quantizer(t), where there is one.
func fastQuantizer(t Type) func(src []float32, dst []byte) {
	if !hasAVX2 {
		return nil
	}
	switch t {
	case F16:
		return func(src []float32, dst []byte) {
			n := len(src) &^ 7
			if n > 0 && quantizeF16AVX2(src[:n], dst[:2*n], n) {
				n = 0 // a NaN: floatToHalf's canonical NaN for the whole row
			}
			quantizeF16(src[n:], dst[2*n:])
		}
	case Q8_0:
		return func(src []float32, dst []byte) {
			if nb := len(src) / 32; nb > 0 {
				quantizeQ8_0AVX2(src[:nb*32], dst[:nb*q8_0Bytes], nb)
			}
		}
	case Q8_K:
		return func(src []float32, dst []byte) {
			if nb := len(src) / 256; nb > 0 {
				quantizeQ8_KAVX2(src[:nb*256], dst[:nb*q8_KBytes], nb)
			}
		}
	}
	return nil
}

// fastDequantizer is the AVX2 version of dequantizer(t), where there is one.
func fastDequantizer(t Type) func(src []byte, dst []float32) {
	if !hasAVX2 || t != F16 {
		return nil
	}
	return func(src []byte, dst []float32) {
		n := len(dst) &^ 7
		if n > 0 && dequantF16AVX2(src[:2*n], dst[:n], n) {
			n = 0 // a NaN: halfToFloat keeps a signalling NaN's bits
		}
		dequantF16(src[2*n:], dst[n:])
	}
}

//go:noescape
func quantizeF16AVX2(src []float32, dst []byte, n int) bool

//go:noescape
func dequantF16AVX2(src []byte, dst []float32, n int) bool

//go:noescape
func quantizeQ8_0AVX2(x []float32, y []byte, nb int)

//go:noescape
func quantizeQ8_KAVX2(x []float32, y []byte, nb int)

//go:noescape
func dotF32AVX2(x []byte, y []float32, n int) float32

//go:noescape
func dotF16AVX2(x []byte, y []float32, n int) float32

//go:noescape
func dotBF16AVX2(x []byte, y []float32, n int) float32

//go:noescape
func dotQ8_0AVX2(x, y []byte, nb int) float32

//go:noescape
func dotQ4_0AVX2(x, y []byte, nb int) float32

//go:noescape
func dotQ4_1AVX2(x, y []byte, nb int) float32

//go:noescape
func dotQ5_0AVX2(x, y []byte, nb int) float32

//go:noescape
func dotQ5_1AVX2(x, y []byte, nb int) float32

//go:noescape
func dotIQ4_NLAVX2(x, y []byte, nb int) float32

//go:noescape
func dotQ4_KAVX2(x, y []byte, nb int) float32

//go:noescape
func dotQ5_KAVX2(x, y []byte, nb int) float32

//go:noescape
func dotQ6_KAVX2(x, y []byte, nb int) float32

//go:noescape
func dotIQ4_XSAVX2(x, y []byte, nb int) float32

// The float kernels take 8 elements at a time; the rest go through the
// scalar kernel.

func dotF32Fast(x []byte, y []float32) float32 {
	n := len(y) &^ 7
	var s float32
	if n > 0 {
		s = dotF32AVX2(x[:4*n], y[:n], n)
	}
	return s + dotF32(x[4*n:], y[n:])
}

func dotF16Fast(x []byte, y []float32) float32 {
	n := len(y) &^ 7
	var s float32
	if n > 0 {
		s = dotF16AVX2(x[:2*n], y[:n], n)
	}
	return s + dotF16(x[2*n:], y[n:])
}

func dotBF16Fast(x []byte, y []float32) float32 {
	n := len(y) &^ 7
	var s float32
	if n > 0 {
		s = dotBF16AVX2(x[:2*n], y[:n], n)
	}
	return s + dotBF16(x[2*n:], y[n:])
}

// quantFast runs an AVX2 block kernel over the whole blocks of x, with y
// holding as many activation blocks of ySize bytes.
func quantFast(f func(x, y []byte, nb int) float32, x, y []byte, xSize, ySize int) float32 {
	nb := len(x) / xSize
	if nb == 0 {
		return 0
	}
	return f(x[:nb*xSize], y[:nb*ySize], nb)
}

func dotQ8_0Fast(x, y []byte) float32 {
	return quantFast(dotQ8_0AVX2, x, y, q8_0Bytes, q8_0Bytes)
}

func dotQ4_0Fast(x, y []byte) float32 {
	return quantFast(dotQ4_0AVX2, x, y, q4_0Bytes, q8_0Bytes)
}

func dotQ4_1Fast(x, y []byte) float32 {
	return quantFast(dotQ4_1AVX2, x, y, q4_1Bytes, q8_1Bytes)
}

func dotQ5_0Fast(x, y []byte) float32 {
	return quantFast(dotQ5_0AVX2, x, y, q5_0Bytes, q8_0Bytes)
}

func dotQ5_1Fast(x, y []byte) float32 {
	return quantFast(dotQ5_1AVX2, x, y, q5_1Bytes, q8_1Bytes)
}

func dotIQ4_NLFast(x, y []byte) float32 {
	return quantFast(dotIQ4_NLAVX2, x, y, iq4_nlBytes, q8_0Bytes)
}

func dotQ4_KFast(x, y []byte) float32 {
	return quantFast(dotQ4_KAVX2, x, y, q4_KBytes, q8_KBytes)
}

func dotQ5_KFast(x, y []byte) float32 {
	return quantFast(dotQ5_KAVX2, x, y, q5_KBytes, q8_KBytes)
}

func dotQ6_KFast(x, y []byte) float32 {
	return quantFast(dotQ6_KAVX2, x, y, q6_KBytes, q8_KBytes)
}

func dotIQ4_XSFast(x, y []byte) float32 {
	return quantFast(dotIQ4_XSAVX2, x, y, iq4_xsBytes, q8_KBytes)
}
