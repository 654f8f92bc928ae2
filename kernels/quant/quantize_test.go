package quant

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// randomFloats is n non-zero values, roughly normal with occasional
// outliers, as activations are.
func randomFloats(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		v := rng.NormFloat64()
		if rng.IntN(64) == 0 {
			v *= 8
		}
		if v == 0 {
			v = 1e-3
		}
		x[i] = float32(v)
	}
	return x
}

// TestQuantizeRoundTrip quantizes random rows and checks each value comes
// back within the type's rounding bound, relative to its block's max |x|:
//   - Q8_0/Q8_1: x*127/amax is rounded (half a step, amax/254), then the
//     step d = amax/127 is stored as f16 (relative error 2^-11, times at
//     most 127 steps): amax*(1/254 + 1/2048).
//   - Q8_K: the step is kept in float32: amax/254 plus float32 noise.
//   - Q4_0: the step is amax/8; values round to the nearest step except
//     the one opposite the block's peak, capped at 7 steps (an error of a
//     whole step), plus the f16 step's error over 8 steps.
//   - F16: half an ulp, 2^-11 relative; BF16: 2^-8; F32 exact.
func TestQuantizeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tests := []struct {
		typ   Type
		bound func(amax, x float64) float64
	}{
		{F32, func(_, _ float64) float64 { return 0 }},
		{F16, func(_, x float64) float64 { return math.Abs(x) * 0x1p-11 }},
		{BF16, func(_, x float64) float64 { return math.Abs(x) * 0x1p-8 }},
		{Q8_0, func(amax, _ float64) float64 { return amax * (1.0/254 + 1.0/2048) }},
		{Q8_1, func(amax, _ float64) float64 { return amax * (1.0/254 + 1.0/2048) }},
		{Q8_K, func(amax, _ float64) float64 { return amax * (1.0/254 + 1e-6) }},
		{Q4_0, func(amax, _ float64) float64 { return amax * (1.0/8 + 8.0/2048) }},
	}
	for _, tc := range tests {
		t.Run(tc.typ.String(), func(t *testing.T) {
			const n = 1024
			x := randomFloats(rng, n)
			size, err := tc.typ.RowBytes(n)
			if err != nil {
				t.Fatal(err)
			}
			q := make([]byte, size)
			if err := Quantize(tc.typ, x, q); err != nil {
				t.Fatal(err)
			}
			y := make([]float32, n)
			if err := Dequantize(tc.typ, q, y); err != nil {
				t.Fatal(err)
			}
			bs := tc.typ.BlockSize()
			for b := 0; b < n; b += bs {
				amax := float64(absMax(x[b : b+bs]))
				for i := b; i < b+bs; i++ {
					if d := math.Abs(float64(y[i] - x[i])); d > tc.bound(amax, float64(x[i])) {
						t.Fatalf("element %d: %g came back as %g (off %g, bound %g)", i, x[i], y[i], d, tc.bound(amax, float64(x[i])))
					}
				}
			}
		})
	}
}

// TestQuantizeSums checks the block sums the Q8_1 and Q8_K products rely on.
func TestQuantizeSums(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	x := randomFloats(rng, 512)

	q81 := make([]byte, 16*q8_1Bytes)
	if err := Quantize(Q8_1, x, q81); err != nil {
		t.Fatal(err)
	}
	for b := range 16 {
		blk := q81[b*q8_1Bytes:]
		var sum int
		for _, q := range blk[4:36] {
			sum += int(int8(q))
		}
		want := float64(loadF16(blk)) * float64(sum)
		if got := float64(loadF16(blk[2:])); math.Abs(got-want) > math.Abs(want)*0x1p-10 {
			t.Errorf("Q8_1 block %d: s = %g, d*Σq = %g", b, got, want)
		}
	}

	q8k := make([]byte, 2*q8_KBytes)
	if err := Quantize(Q8_K, x, q8k); err != nil {
		t.Fatal(err)
	}
	for b := range 2 {
		blk := q8k[b*q8_KBytes:]
		for g := range 16 {
			var sum int32
			for _, q := range blk[4+16*g : 4+16*g+16] {
				sum += int32(int8(q))
			}
			if got := q8KBlockSum(blk, g); got != sum {
				t.Errorf("Q8_K block %d group %d: bsum %d, Σq %d", b, g, got, sum)
			}
		}
		// The element of largest magnitude maps to ∓127 exactly.
		var imax int
		for i, v := range x[256*b : 256*b+256] {
			if math.Abs(float64(v)) > math.Abs(float64(x[256*b+imax])) {
				imax = i
			}
		}
		if q := int8(blk[4+imax]); q != 127 && q != -127 {
			t.Errorf("Q8_K block %d: largest element quantized to %d", b, q)
		}
	}
}

// TestQuantizeQ4_0Rounding pins ggml's Q4_0 rounding on a block worked by
// hand: x_j = j/4 - 4 peaks at -4, so d = 0.5 and x_j/d + 8.5 = j/2 + 0.5,
// truncated: q_j = (j+1)/2, the halves rounding up; q_31 = 16 is capped.
func TestQuantizeQ4_0Rounding(t *testing.T) {
	x := make([]float32, 32)
	for j := range x {
		x[j] = float32(j)/4 - 4
	}
	b := make([]byte, q4_0Bytes)
	if err := Quantize(Q4_0, x, b); err != nil {
		t.Fatal(err)
	}
	if d := loadF16(b); d != 0.5 {
		t.Fatalf("d = %g, want 0.5", d)
	}
	for j := range 32 {
		q := int(b[2+j%16] & 15)
		if j >= 16 {
			q = int(b[2+j%16] >> 4)
		}
		if want := min(15, (j+1)/2); q != want {
			t.Errorf("element %d (%g): quant %d, want %d", j, x[j], q, want)
		}
	}
}

// TestQuantizeZeros checks an all-zero block gives zero scales and quants
// even over a dirty buffer.
func TestQuantizeZeros(t *testing.T) {
	for _, typ := range []Type{Q8_0, Q8_1, Q8_K, Q4_0} {
		n := typ.BlockSize()
		q := make([]byte, typ.TypeSize())
		for i := range q {
			q[i] = 0x5a
		}
		if err := Quantize(typ, make([]float32, n), q); err != nil {
			t.Fatal(err)
		}
		y := make([]float32, n)
		if err := Dequantize(typ, q, y); err != nil {
			t.Fatal(err)
		}
		for i, v := range y {
			if v != 0 {
				t.Fatalf("%v: element %d of a zero block is %g", typ, i, v)
			}
		}
	}
}

// TestMXFP4 decodes random blocks and checks them against the OCP
// definition: an E2M1 nibble (sign, 2-bit exponent biased by 1, 1-bit
// mantissa; exponent 0 is subnormal) times 2^(e-127).
func TestMXFP4(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const nb = 64
	src := make([]byte, nb*mxfp4Bytes)
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	got := make([]float32, nb*32)
	if err := Dequantize(MXFP4, src, got); err != nil {
		t.Fatal(err)
	}
	e2m1 := func(q byte) float64 {
		exp, man := int(q>>1&3), float64(q&1)
		v := math.Ldexp(1+man/2, exp-1)
		if exp == 0 {
			v = man / 2
		}
		if q&8 != 0 {
			v = -v
		}
		return v
	}
	for b := range nb {
		blk := src[b*mxfp4Bytes:]
		scale := math.Ldexp(1, int(blk[0])-127)
		for j := range 16 {
			for k, q := range []byte{blk[1+j] & 15, blk[1+j] >> 4} {
				i := 32*b + j + 16*k
				want := float32(e2m1(q) * scale)
				if got[i] != want {
					t.Fatalf("block %d element %d: got %g, want %g", b, j+16*k, got[i], want)
				}
			}
		}
	}
}

// TestBadSizes feeds every entry point lengths that do not fit: each must
// return an error wrapping the matching sentinel, never panic.
func TestBadSizes(t *testing.T) {
	types := []Type{F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K,
		Q5_K, Q6_K, Q8_K, IQ4_NL, IQ4_XS, MXFP4}
	for _, typ := range types {
		bs, ts := typ.BlockSize(), typ.TypeSize()
		cases := []struct {
			name string
			n    int // elements
			size int // bytes
			want error
		}{
			{"short src", 2 * bs, 2*ts - 1, ErrSize},
			{"long src", 2 * bs, 2*ts + 1, ErrSize},
			{"empty src", bs, 0, ErrSize},
		}
		if bs > 1 {
			cases = append(cases, struct {
				name string
				n    int
				size int
				want error
			}{"partial block", bs + 1, 2 * ts, ErrBlockAlign})
		}
		for _, c := range cases {
			err := Dequantize(typ, make([]byte, c.size), make([]float32, c.n))
			if !errors.Is(err, c.want) {
				t.Errorf("Dequantize %v %s: %v, want %v", typ, c.name, err, c.want)
			}
			if quantizer(typ) != nil {
				err := Quantize(typ, make([]float32, c.n), make([]byte, c.size))
				if !errors.Is(err, c.want) {
					t.Errorf("Quantize %v %s: %v, want %v", typ, c.name, err, c.want)
				}
			}
		}
		// Zero elements in zero bytes is a valid, empty row.
		if err := Dequantize(typ, nil, nil); err != nil {
			t.Errorf("Dequantize %v of nothing: %v", typ, err)
		}
	}
	if err := Dequantize(Type(99), nil, nil); !errors.Is(err, ErrUnknownType) {
		t.Errorf("Dequantize of type 99: %v, want ErrUnknownType", err)
	}
	if err := Dequantize(IQ2_XXS, make([]byte, 66), make([]float32, 256)); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Dequantize IQ2_XXS: %v, want ErrUnsupported", err)
	}
	if err := Quantize(Q4_K, make([]float32, 256), make([]byte, 144)); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Quantize Q4_K: %v, want ErrUnsupported", err)
	}
}

// TestDequantizeQ8KLayout pins the Q8_K block layout independently of
// quantizeQ8_K: d is a little-endian float32 before the quants.
func TestDequantizeQ8KLayout(t *testing.T) {
	b := make([]byte, q8_KBytes)
	binary.LittleEndian.PutUint32(b, math.Float32bits(0.5))
	for j := range 256 {
		b[4+j] = byte(int8(j - 128))
	}
	y := make([]float32, 256)
	if err := Dequantize(Q8_K, b, y); err != nil {
		t.Fatal(err)
	}
	for j, v := range y {
		if want := 0.5 * float32(j-128); v != want {
			t.Fatalf("element %d = %g, want %g", j, v, want)
		}
	}
}
