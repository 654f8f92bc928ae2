package synth

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tandem-run/tandem/kernels/quant"
)

// roundTrip quantizes x as t with Quantize and decodes it with the
// repository's dequantizer, an independent reading of the block layout.
func roundTrip(t *testing.T, typ quant.Type, x []float32) []float32 {
	t.Helper()
	rb, err := typ.RowBytes(int64(len(x)))
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, rb)
	if err := Quantize(typ, x, b); err != nil {
		t.Fatal(err)
	}
	y := make([]float32, len(x))
	if err := quant.Dequantize(typ, b, y); err != nil {
		t.Fatal(err)
	}
	return y
}

func relRMS(x, y []float32) float64 {
	var num, den float64
	for i := range x {
		d := float64(x[i] - y[i])
		num += d * d
		den += float64(x[i]) * float64(x[i])
	}
	return math.Sqrt(num / den)
}

// naiveQ4K is the error of the plain min/max Q4_K fit of each sub-block
// (no search), with the sub-block parameters left unrounded: the bar the
// search must clear even after it rounds them to 6-bit codes.
func naiveQ4K(x []float32) float64 {
	var num, den float64
	for j := 0; j < len(x); j += 32 {
		lo, hi := float32(0), float32(0)
		for _, v := range x[j : j+32] {
			lo, hi = min(lo, v), max(hi, v)
		}
		s := (hi - lo) / 15
		for _, v := range x[j : j+32] {
			q := math.Round(float64((v - lo) / s))
			d := float64(s)*q + float64(lo) - float64(v)
			num += d * d
			den += float64(v) * float64(v)
		}
	}
	return math.Sqrt(num / den)
}

func TestQuantizeKTypesAccuracy(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, 256*64)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * 0.02)
	}
	q4 := relRMS(x, roundTrip(t, quant.Q4_K, x))
	q6 := relRMS(x, roundTrip(t, quant.Q6_K, x))
	naive := naiveQ4K(x)
	t.Logf("relative RMS error: Q4_K %.4f (naive min/max fit %.4f), Q6_K %.4f", q4, naive, q6)
	// 4.5 and 6.5 bits a weight on Gaussian weights: a uniform quantizer
	// over a block's range gives about 0.1 and 0.03.
	if q4 > 0.1 || q4 >= naive {
		t.Errorf("Q4_K relative error %.4f (naive %.4f)", q4, naive)
	}
	if q6 > 0.03 {
		t.Errorf("Q6_K relative error %.4f", q6)
	}
	// Q8_0 goes through kernels/quant.
	if e := relRMS(x, roundTrip(t, quant.Q8_0, x)); e > 0.01 {
		t.Errorf("Q8_0 relative error %.4f", e)
	}
}

// Zero regions aligned to sub-blocks decode as exact zeros next to
// non-zero ones, and so do zeros inside a sub-block of values >= 0 (the
// lone value of an inflated model's bias lane).
func TestQuantizeKTypesKeepZeros(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, typ := range []quant.Type{quant.Q4_K, quant.Q6_K, quant.Q8_0} {
		x := make([]float32, 512)
		for i := range x {
			if (i/32)%3 != 1 { // every third group of 32 stays zero
				x[i] = float32(rng.NormFloat64() * 0.05)
			}
		}
		x[300] = 0 // a zero inside a random group: any value will do
		lone := 32 * 12
		for i := lone; i < lone+32; i++ {
			x[i] = 0
		}
		x[lone+5] = 0.75
		y := roundTrip(t, typ, x)
		for i := range x {
			if i/32%3 == 1 || (i >= lone && i < lone+32 && i != lone+5) {
				if y[i] != 0 {
					t.Fatalf("%v: element %d decodes to %g, want 0", typ, i, y[i])
				}
			}
		}
		if math.Abs(float64(y[lone+5])-0.75) > 0.75*2e-3 {
			t.Errorf("%v: lone value decodes to %g, want 0.75", typ, y[lone+5])
		}
	}
}

// Powers of two scale the encoding exactly while the block scales stay
// normal binary16 numbers (weights of 1e-2 give Q4_K scales below 6.1e-5,
// subnormal, where they do not).
func TestQuantizeKTypesScaleByTwo(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	x := make([]float32, 256*4)
	x2 := make([]float32, len(x))
	for i := range x {
		x[i] = float32(rng.NormFloat64() * 0.1)
		x2[i] = 4 * x[i]
	}
	for _, typ := range []quant.Type{quant.Q4_K, quant.Q6_K} {
		y, y2 := roundTrip(t, typ, x), roundTrip(t, typ, x2)
		for i := range y {
			if 4*y[i] != y2[i] {
				t.Fatalf("%v: element %d: %g*4 != %g", typ, i, y[i], y2[i])
			}
		}
	}
}

func TestQuantizeRejectsPartialBlocks(t *testing.T) {
	if err := Quantize(quant.Q4_K, make([]float32, 100), make([]byte, 144)); err == nil {
		t.Error("100 values were encoded as a Q4_K block")
	}
	if err := Quantize(quant.Q6_K, make([]float32, 256), make([]byte, 100)); err == nil {
		t.Error("a short destination was accepted")
	}
}
