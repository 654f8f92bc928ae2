//go:build !amd64 || purego

package quant

// fastKernel has no SIMD kernels on this architecture (or under the purego
// tag, which tests the pure-Go build); the scalar reference serves.
func fastKernel(Type) (kernel, bool) { return kernel{}, false }

// fastQuantizer has no SIMD quantizers here either.
func fastQuantizer(Type) func(src []float32, dst []byte) { return nil }

// fastMultiKernel has no multi-row kernels either: DotsFunc loops over the
// single-row one.
func fastMultiKernel(Type) (multiKernel, bool) { return multiKernel{}, false }

// fastDequantizer has no SIMD dequantizers here either.
func fastDequantizer(Type) func(src []byte, dst []float32) { return nil }

// fastRowsKernel has no multi-row decode kernels either.
func fastRowsKernel(Type) (rowsKernel, bool) { return rowsKernel{}, false }

// fastQuadKernel has no four-by-four kernels either.
func fastQuadKernel(Type) (quadKernel, bool) { return quadKernel{}, false }
