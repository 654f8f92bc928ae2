//go:build !purego

package quant

import "testing"

// TestFastKernelCoverage pins which types get AVX2 kernels, so a dispatch
// slip shows up here rather than as a silent slowdown.
func TestFastKernelCoverage(t *testing.T) {
	if !hasAVX2 {
		t.Skip("CPU lacks AVX2, FMA or F16C")
	}
	for _, typ := range []Type{F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL,
		Q4_K, Q5_K, Q6_K, IQ4_XS} {
		k, ok := fastKernel(typ)
		scalar, _ := scalarKernel(typ)
		if !ok || k.act != scalar.act {
			t.Errorf("%v: fast kernel %v (activation %v, scalar uses %v)", typ, ok, k.act, scalar.act)
		}
	}
}
