package quant

import (
	"math"
	"testing"
)

// TestHalfExhaustive checks every binary16 value against its definition
// (sign, 5-bit exponent biased by 15, 10-bit fraction), computed in float64,
// and that converting back gives the same bits.
func TestHalfExhaustive(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		exp, frac := int(h>>10&0x1f), float64(h&0x3ff)
		var want float64
		switch exp {
		case 0:
			want = math.Ldexp(frac, -24)
		case 0x1f:
			want = math.Inf(1)
			if frac != 0 {
				want = math.NaN()
			}
		default:
			want = math.Ldexp(1+frac/1024, exp-15)
		}
		if h>>15 == 1 {
			want = -want
		}
		got := halfToFloat(h)
		if math.IsNaN(want) {
			if !math.IsNaN(float64(got)) || floatToHalf(got)&0x7c00 != 0x7c00 || floatToHalf(got)&0x3ff == 0 {
				t.Fatalf("%#04x: NaN gave %v / %#04x", h, got, floatToHalf(got))
			}
			continue
		}
		if float64(got) != want || math.Signbit(float64(got)) != math.Signbit(want) {
			t.Fatalf("halfToFloat(%#04x) = %v, want %v", h, got, want)
		}
		if back := floatToHalf(got); back != h {
			t.Fatalf("floatToHalf(%v) = %#04x, want %#04x", got, back, h)
		}
	}
}

// TestHalfRounding checks round-to-nearest-even at the midpoint between
// every pair of adjacent finite halves, and just either side of it.
func TestHalfRounding(t *testing.T) {
	for i := range 0x7bff { // positive finite halves below the largest
		lo, hi := uint16(i), uint16(i+1)
		a, b := float64(halfToFloat(lo)), float64(halfToFloat(hi))
		mid := float32((a + b) / 2) // exact: halves have 11 significant bits
		even := lo
		if lo&1 == 1 {
			even = hi
		}
		cases := []struct {
			x    float32
			want uint16
		}{
			{mid, even},
			{math.Nextafter32(mid, 0), lo},
			{math.Nextafter32(mid, math.MaxFloat32), hi},
		}
		for _, c := range cases {
			if got := floatToHalf(c.x); got != c.want {
				t.Fatalf("floatToHalf(%g) = %#04x, want %#04x", c.x, got, c.want)
			}
			if got := floatToHalf(-c.x); got != c.want|0x8000 {
				t.Fatalf("floatToHalf(%g) = %#04x, want %#04x", -c.x, got, c.want|0x8000)
			}
		}
	}
	// Past the largest half (65504) by half an ulp or more is infinity.
	if got := floatToHalf(65520); got != 0x7c00 {
		t.Errorf("floatToHalf(65520) = %#04x, want +Inf", got)
	}
	if got := floatToHalf(65519.99); got != 0x7bff {
		t.Errorf("floatToHalf(65519.99) = %#04x, want 65504", got)
	}
}

// TestBF16 checks bfloat16 rounding against float64 arithmetic.
func TestBF16(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		f := bf16ToFloat(h)
		if f != f { // NaN stays NaN
			if g := bf16ToFloat(floatToBF16(f)); g == g {
				t.Fatalf("NaN %#04x lost", h)
			}
			continue
		}
		if got := floatToBF16(f); got != h {
			t.Fatalf("floatToBF16(%g) = %#04x, want %#04x", f, got, h)
		}
		// The midpoint to the next value up rounds to the even one.
		if h&0x7fff >= 0x7f7f {
			continue
		}
		next := bf16ToFloat(h + 1)
		mid := float32((float64(f) + float64(next)) / 2)
		want := h
		if h&1 == 1 {
			want = h + 1
		}
		if got := floatToBF16(mid); got != want {
			t.Fatalf("floatToBF16(%g) = %#04x, want %#04x", mid, got, want)
		}
	}
}

// TestHalfRows: Quantize and Dequantize of whole F16 rows (the F16C path
// where this CPU has it) give, element for element, floatToHalf's and
// halfToFloat's bits: every binary16 value, signalling NaNs included, and
// float32 values at and around every rounding midpoint, subnormal, huge and
// NaN, with and without a tail of fewer than eight.
func TestHalfRows(t *testing.T) {
	halves := make([]byte, 2<<16)
	for i := range 1 << 16 {
		halves[2*i], halves[2*i+1] = byte(i), byte(i>>8)
	}
	for _, n := range []int{1 << 16, 1<<16 - 3} {
		got := make([]float32, n)
		if err := Dequantize(F16, halves[:2*n], got); err != nil {
			t.Fatal(err)
		}
		for i, g := range got {
			if want := halfToFloat(uint16(i)); math.Float32bits(g) != math.Float32bits(want) {
				t.Fatalf("n=%d: Dequantize(%#04x) = %#08x, halfToFloat %#08x", n, i, math.Float32bits(g), math.Float32bits(want))
			}
		}
	}
	var floats []float32
	for i := range 0x7bff {
		a, b := float64(halfToFloat(uint16(i))), float64(halfToFloat(uint16(i+1)))
		mid := float32((a + b) / 2)
		floats = append(floats, mid, -mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, math.MaxFloat32))
	}
	floats = append(floats, 1e-40, -1e-40, 65519.99, 65520, 1e30, float32(math.Inf(-1)))
	clean := len(floats) &^ 7
	withNaN := append([]float32(nil), floats...)
	withNaN[3] = math.Float32frombits(0xffc12345) // a payload F16C would keep
	for _, row := range [][]float32{floats[:clean], floats, withNaN} {
		got := make([]byte, 2*len(row))
		if err := Quantize(F16, row, got); err != nil {
			t.Fatal(err)
		}
		for i, f := range row {
			g := uint16(got[2*i]) | uint16(got[2*i+1])<<8
			if want := floatToHalf(f); g != want {
				t.Fatalf("Quantize(%g) = %#04x, floatToHalf %#04x", f, g, want)
			}
		}
	}
}
