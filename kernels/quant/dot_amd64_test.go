//go:build !purego

package quant

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
)

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

// TestFastKernelsRoundAsScalar: where the scalar reference rounds in the
// same order as the AVX2 kernel (the order of llama.cpp's x86 products),
// both give the same bits.
func TestFastKernelsRoundAsScalar(t *testing.T) {
	if !hasAVX2 {
		t.Skip("CPU lacks AVX2, FMA or F16C")
	}
	rng := rand.New(rand.NewPCG(17, 18))
	for _, typ := range []Type{Q4_0, IQ4_NL, Q4_K, Q8_0, Q5_0, Q5_K, Q6_K, Q4_1, Q5_1} {
		fast, _ := fastKernel(typ)
		scalar, _ := scalarKernel(typ)
		for range 50 {
			n := 256 * (1 + rng.IntN(6))
			row := randomRow(t, rng, typ, n)
			var v Vec
			if err := v.Prepare(typ, randomFloats(rng, n)); err != nil {
				t.Fatal(err)
			}
			if got, want := fast.quant(row, v.Q), scalar.quant(row, v.Q); math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("%v n=%d: AVX2 %.9g, scalar %.9g", typ, n, got, want)
			}
		}
	}
}

// TestFastQuantizers checks the AVX2 quantizers write exactly the bytes the
// Go ones do, on random rows with zero blocks and tied magnitudes mixed in.
func TestFastQuantizers(t *testing.T) {
	if !hasAVX2 {
		t.Skip("CPU lacks AVX2, FMA or F16C")
	}
	rng := rand.New(rand.NewPCG(15, 16))
	for _, typ := range []Type{Q8_0, Q8_K} {
		fast := fastQuantizer(typ)
		if fast == nil {
			t.Fatalf("%v: no fast quantizer", typ)
		}
		for trial := range 20 {
			n := typ.BlockSize() * (1 + rng.IntN(8))
			x := randomFloats(rng, n)
			bs := typ.BlockSize()
			switch trial % 4 {
			case 1: // a zero block
				clear(x[bs*rng.IntN(n/bs):][:bs])
			case 2: // the largest magnitude twice, with both signs
				b := bs * rng.IntN(n/bs)
				x[b+3], x[b+bs-2] = -100, 100
			case 3: // tiny values (subnormal f16 scales)
				for i := range x {
					x[i] *= 1e-6
				}
			}
			want := make([]byte, len(x)/bs*typ.TypeSize())
			got := make([]byte, len(want))
			for i := range got {
				got[i] = 0xa5 // stale data must be overwritten
			}
			quantizer(typ)(x, want)
			fast(x, got)
			if !bytes.Equal(got, want) {
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("%v trial %d (n=%d): byte %d is %#x, want %#x", typ, trial, n, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// TestFastMultiKernelCoverage pins which types get multi-row AVX2 kernels
// (the weight types of the demo models' Q4_K_M and Q8_0 files, and F16),
// and which five-row ones (Q4_K and Q6_K only with AVX-512 VNNI).
func TestFastMultiKernelCoverage(t *testing.T) {
	if !hasAVX2 {
		t.Skip("CPU lacks AVX2, FMA or F16C")
	}
	for _, typ := range []Type{F16, Q8_0, Q5_0, Q4_K, Q6_K} {
		m, ok := fastMultiKernel(typ)
		if !ok {
			t.Errorf("%v: no multi-row kernel", typ)
		}
		five := typ == Q8_0 || typ == Q5_0 || hasVNNI512 && (typ == Q4_K || typ == Q6_K)
		if (m.five != nil) != five {
			t.Errorf("%v: five-row kernel %v, want %v", typ, m.five != nil, five)
		}
	}
}
