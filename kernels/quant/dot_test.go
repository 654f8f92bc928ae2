package quant

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// dotTypes are the weight types with products.
var dotTypes = []Type{F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4,
	Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS}

// randomRow is n elements of weights of type t with no zero scales. Float
// types and Q8_0 are quantized from random floats; the other types get random
// quant bytes with their scale fields replaced by sane, non-zero values (a
// random f16 could be NaN, and real scales are small positive numbers).
func randomRow(t *testing.T, rng *rand.Rand, typ Type, n int) []byte {
	t.Helper()
	size, err := typ.RowBytes(int64(n))
	if err != nil {
		t.Fatal(err)
	}
	row := make([]byte, size)
	if quantizer(typ) != nil {
		if err := Quantize(typ, randomFloats(rng, n), row); err != nil {
			t.Fatal(err)
		}
		return row
	}
	for i := range row {
		row[i] = byte(rng.Uint32())
	}
	scale := func(b []byte) { storeF16(b, float32(0.001+0.02*rng.Float64())) }
	offset := func(b []byte) { storeF16(b, float32(0.05*rng.NormFloat64())) }
	ts := typ.TypeSize()
	for blk := 0; blk < len(row); blk += ts {
		b := row[blk : blk+ts]
		switch typ {
		case Q4_0, Q5_0, IQ4_NL, IQ4_XS:
			scale(b)
		case Q4_1, Q5_1:
			scale(b)
			offset(b[2:])
		case Q4_K, Q5_K:
			scale(b)
			scale(b[2:])
		case Q2_K:
			scale(b[80:])
			scale(b[82:])
		case Q3_K:
			scale(b[108:])
		case Q6_K:
			scale(b[208:])
		case MXFP4:
			b[0] = byte(118 + rng.IntN(8)) // 2^-10 .. 2^-3
		default:
			t.Fatalf("randomRow: no layout for %v", typ)
		}
	}
	return row
}

// reference is the float64 product of the dequantized weight row with the
// dequantized prepared activations, and Σ|w_i a_i|, the scale of the
// rounding error any float32 evaluation of it can make.
func reference(t *testing.T, typ Type, row []byte, v *Vec) (dot, abs float64) {
	t.Helper()
	n := v.Len()
	w := make([]float32, n)
	if err := Dequantize(typ, row, w); err != nil {
		t.Fatal(err)
	}
	a := v.F32
	if v.Type != F32 {
		a = make([]float32, n)
		if err := Dequantize(v.Type, v.Q, a); err != nil {
			t.Fatal(err)
		}
	}
	for i := range w {
		p := float64(w[i]) * float64(a[i])
		dot += p
		abs += math.Abs(p)
	}
	return dot, abs
}

// TestDot checks every product kernel (the scalar reference and, where the
// CPU has one, the SIMD kernel) against the float64 product of the
// dequantized operands. The quantized kernels sum integer products exactly
// within a block, so their only error is float32 rounding: a few roundings
// of the block scales and one add per block, at most (blocks+8)·2^-24 of
// Σ|w_i a_i|. The float kernels add each element's product in float32 (with
// at most n sequential adds per partial sum): (n+8)·2^-24 of Σ|w_i a_i|.
// Q4_1 and Q5_1 use the Q8_1 block sum s = d·Σq, stored as f16, for their
// offset term m·s: that adds up to 2^-11 of |m·s| per block.
func TestDot(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, typ := range dotTypes {
		for _, n := range []int{256, 1024, 3072} {
			scalar, _ := scalarKernel(typ)
			kernels := map[string]kernel{"scalar": scalar}
			if fast, ok := fastKernel(typ); ok {
				kernels["fast"] = fast
			}
			row := randomRow(t, rng, typ, n)
			var v Vec
			if err := v.Prepare(typ, randomFloats(rng, n)); err != nil {
				t.Fatal(err)
			}
			want, abs := reference(t, typ, row, &v)
			steps := n
			if v.Type != F32 {
				steps = n / v.Type.BlockSize()
			}
			tol := float64(steps+8) * 0x1p-24 * abs
			if v.Type == Q8_1 {
				ts := typ.TypeSize()
				for b := range steps {
					m, s := loadF16(row[b*ts+2:]), loadF16(v.Q[b*q8_1Bytes+2:])
					tol += math.Abs(float64(m)*float64(s)) * 0x1p-10
				}
			}
			for name, k := range kernels {
				var got float32
				if k.act == F32 {
					got = k.float(row, v.F32)
				} else {
					got = k.quant(row, v.Q)
				}
				if err := math.Abs(float64(got) - want); !(err <= tol) {
					t.Errorf("%v n=%d %s: got %.8g, want %.8g (error %.3g > %.3g)", typ, n, name, got, want, err, tol)
				}
			}
			dot, err := DotFunc(typ)
			if err != nil {
				t.Fatal(err)
			}
			if got := dot(row, &v); !(math.Abs(float64(got)-want) <= tol) {
				t.Errorf("%v n=%d DotFunc: got %.8g, want %.8g", typ, n, got, want)
			}
		}
	}
}

// TestDotOddLengths runs the float kernels on lengths that are not a
// multiple of any unroll factor.
func TestDotOddLengths(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, typ := range []Type{F32, F16, BF16} {
		for _, n := range []int{1, 3, 7, 9, 31, 33, 100} {
			row := randomRow(t, rng, typ, n)
			var v Vec
			if err := v.Prepare(typ, randomFloats(rng, n)); err != nil {
				t.Fatal(err)
			}
			want, abs := reference(t, typ, row, &v)
			dot, err := DotFunc(typ)
			if err != nil {
				t.Fatal(err)
			}
			if got := dot(row, &v); !(math.Abs(float64(got)-want) <= float64(n+8)*0x1p-24*abs) {
				t.Errorf("%v n=%d: got %.8g, want %.8g", typ, n, got, want)
			}
		}
	}
}

// TestPrepare checks ActivationType and that a prepared row round-trips
// within its activation type's rounding bound (see TestQuantizeRoundTrip),
// and that preparing again into the same Vec allocates nothing.
func TestPrepare(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	wantAct := map[Type]Type{F32: F32, F16: F32, BF16: F32, Q4_0: Q8_0, Q5_0: Q8_0, Q8_0: Q8_0,
		IQ4_NL: Q8_0, MXFP4: Q8_0, Q4_1: Q8_1, Q5_1: Q8_1, Q2_K: Q8_K, Q3_K: Q8_K, Q4_K: Q8_K,
		Q5_K: Q8_K, Q6_K: Q8_K, IQ4_XS: Q8_K}
	for _, typ := range dotTypes {
		if got := ActivationType(typ); got != wantAct[typ] {
			t.Errorf("ActivationType(%v) = %v, want %v", typ, got, wantAct[typ])
		}
		const n = 512
		x := randomFloats(rng, n)
		var v Vec
		if err := v.Prepare(typ, x); err != nil {
			t.Fatal(err)
		}
		if v.Type != wantAct[typ] || v.Len() != n {
			t.Fatalf("%v: prepared %v of %d elements", typ, v.Type, v.Len())
		}
		y := v.F32
		if v.Type != F32 {
			y = make([]float32, n)
			if err := Dequantize(v.Type, v.Q, y); err != nil {
				t.Fatal(err)
			}
		}
		bs := v.Type.BlockSize()
		for b := 0; b < n; b += bs {
			amax := float64(absMax(x[b : b+bs]))
			for i := b; i < b+bs; i++ {
				bound := amax * (1.0/254 + 1.0/2048)
				if v.Type == F32 {
					bound = 0
				}
				if d := math.Abs(float64(y[i] - x[i])); d > bound {
					t.Fatalf("%v element %d: %g prepared as %g", typ, i, x[i], y[i])
				}
			}
		}
		if err := v.Fits(typ, len(randomRow(t, rng, typ, n))); err != nil {
			t.Errorf("%v: Fits: %v", typ, err)
		}
		allocs := testing.AllocsPerRun(10, func() {
			if err := v.Prepare(typ, x); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%v: Prepare into a used Vec allocates %v times", typ, allocs)
		}
	}
}

// TestDotMismatch checks that unsupported types are refused and that a
// product of mismatched operands gives NaN and a Fits error, not a panic or
// a read out of bounds.
func TestDotMismatch(t *testing.T) {
	for _, typ := range []Type{IQ2_XXS, Q8_K, Q8_1, I8, Type(99)} {
		if _, err := DotFunc(typ); err == nil {
			t.Errorf("DotFunc(%v) accepted", typ)
		}
		var v Vec
		if err := v.Prepare(typ, make([]float32, 256)); err == nil {
			t.Errorf("Prepare for %v accepted", typ)
		}
	}
	rng := rand.New(rand.NewPCG(13, 14))
	for _, typ := range dotTypes {
		bs := typ.BlockSize()
		if bs > 1 {
			var v Vec
			if err := v.Prepare(typ, make([]float32, bs+1)); !errors.Is(err, ErrBlockAlign) {
				t.Errorf("%v: Prepare of %d elements: %v", typ, bs+1, err)
			}
		}
		n := 2 * max(bs, 32)
		var v Vec
		if err := v.Prepare(typ, randomFloats(rng, n)); err != nil {
			t.Fatal(err)
		}
		row := randomRow(t, rng, typ, n)
		dot, err := DotFunc(typ)
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range [][]byte{row[:len(row)-1], row[:typ.TypeSize()], append(row, 0), nil} {
			if got := dot(bad, &v); !math.IsNaN(float64(got)) {
				t.Errorf("%v: row of %d bytes for %d elements gave %g, want NaN", typ, len(bad), n, got)
			}
			if err := v.Fits(typ, len(bad)); !errors.Is(err, ErrSize) {
				t.Errorf("%v: Fits(%d bytes): %v", typ, len(bad), err)
			}
		}
		other := F16
		if ActivationType(typ) == F32 {
			other = Q8_0
		}
		var w Vec
		if err := w.Prepare(other, randomFloats(rng, n)); err != nil {
			t.Fatal(err)
		}
		if got := dot(row, &w); !math.IsNaN(float64(got)) {
			t.Errorf("%v: product with a Vec prepared for %v gave %g, want NaN", typ, other, got)
		}
		if err := w.Fits(typ, len(row)); err == nil {
			t.Errorf("%v: Fits accepted a Vec prepared for %v", typ, other)
		}
	}
}
