package quant

import (
	"fmt"
	"math"
)

// kernel multiplies weight rows of one type with prepared activations. Each
// weight type's block holds as many elements as its activation type's, so a
// row of b weight blocks pairs with b activation blocks.
type kernel struct {
	act   Type                                // activation type
	quant func(x, y []byte) float32           // x weight blocks, y activation blocks
	float func(x []byte, y []float32) float32 // x weights, y float32 activations
}

// fma32 is a*b+c rounded once, as a fused multiply-add: the product of two
// float32 values is exact in float64 (a double rounding of the sum is
// vanishingly rare).
func fma32(a, b, c float32) float32 {
	return float32(float64(a)*float64(b) + float64(c))
}

// hsum8 adds eight lanes in the order of the AVX2 kernels' horizontal sum
// (and ggml's): halves, then pairs of halves, then the last two.
func hsum8(a *[8]float32) float32 {
	return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]))
}

// scalarKernel is the pure-Go reference product for weights of type w.
func scalarKernel(w Type) (kernel, bool) {
	switch w {
	case F32:
		return kernel{act: F32, float: dotF32}, true
	case F16:
		return kernel{act: F32, float: dotF16}, true
	case BF16:
		return kernel{act: F32, float: dotBF16}, true
	case Q4_0:
		return kernel{act: Q8_0, quant: dotQ4_0}, true
	case Q4_1:
		return kernel{act: Q8_1, quant: dotQ4_1}, true
	case Q5_0:
		return kernel{act: Q8_0, quant: dotQ5_0}, true
	case Q5_1:
		return kernel{act: Q8_1, quant: dotQ5_1}, true
	case Q8_0:
		return kernel{act: Q8_0, quant: dotQ8_0}, true
	case IQ4_NL:
		return kernel{act: Q8_0, quant: dotIQ4_NL}, true
	case MXFP4:
		return kernel{act: Q8_0, quant: dotMXFP4}, true
	case Q2_K:
		return kernel{act: Q8_K, quant: dotQ2_K}, true
	case Q3_K:
		return kernel{act: Q8_K, quant: dotQ3_K}, true
	case Q4_K:
		return kernel{act: Q8_K, quant: dotQ4_K}, true
	case Q5_K:
		return kernel{act: Q8_K, quant: dotQ5_K}, true
	case Q6_K:
		return kernel{act: Q8_K, quant: dotQ6_K}, true
	case IQ4_XS:
		return kernel{act: Q8_K, quant: dotIQ4_XS}, true
	}
	return kernel{}, false
}

// bestKernel is the fastest product this CPU has for w: a SIMD one where
// one exists (fastKernel, per architecture), else the scalar reference.
func bestKernel(w Type) (kernel, bool) {
	if k, ok := fastKernel(w); ok {
		return k, true
	}
	return scalarKernel(w)
}

// DotFunc returns the product of one weight row of type w with an activation
// row prepared for w (Vec.Prepare). The returned function is the matmul
// inner loop, so it does not return an error: a row of the wrong length or a
// Vec prepared for another type gives NaN (check once with Vec.Fits).
func DotFunc(w Type) (func(row []byte, v *Vec) float32, error) {
	k, ok := bestKernel(w)
	if !ok {
		return nil, fmt.Errorf("quant: dot product for %v: %w", w, unsupported(w))
	}
	size, actSize := w.TypeSize(), k.act.TypeSize()
	nan := float32(math.NaN())
	if k.act == F32 {
		return func(row []byte, v *Vec) float32 {
			if !fitsRow(F32, size, actSize, row, v) {
				return nan
			}
			return k.float(row, v.F32)
		}, nil
	}
	return func(row []byte, v *Vec) float32 {
		if !fitsRow(k.act, size, actSize, row, v) {
			return nan
		}
		return k.quant(row, v.Q)
	}, nil
}
