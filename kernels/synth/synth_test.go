package synth

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tandem-run/tandem/kernels/quant"
)

// Every supported type decodes to finite, non-zero values of a weight's
// magnitude.
func TestFillDecodes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, typ := range []quant.Type{quant.F32, quant.F16, quant.BF16, quant.Q4_0, quant.Q4_1,
		quant.Q5_0, quant.Q5_1, quant.Q8_0, quant.IQ4_NL, quant.Q2_K, quant.Q3_K, quant.Q4_K,
		quant.Q5_K, quant.Q6_K, quant.IQ4_XS} {
		n := 1024
		rb, err := typ.RowBytes(int64(n))
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, rb)
		if err := Fill(rng, typ, buf, 0.02); err != nil {
			t.Fatalf("%v: %v", typ, err)
		}
		v := make([]float32, n)
		if err := quant.Dequantize(typ, buf, v); err != nil {
			t.Fatalf("%v: %v", typ, err)
		}
		var sum2 float64
		nonzero := 0
		for _, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("%v: non-finite value", typ)
			}
			sum2 += float64(x) * float64(x)
			if x != 0 {
				nonzero++
			}
		}
		rms := math.Sqrt(sum2 / float64(n))
		if rms < 1e-3 || rms > 0.5 || nonzero < n/2 {
			t.Errorf("%v: rms %.4g, %d of %d non-zero", typ, rms, nonzero, n)
		}
	}
}

func TestFillRejectsPartialBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	if err := Fill(rng, quant.Q4_K, make([]byte, 100), 0); err == nil {
		t.Fatal("a partial Q4_K block was accepted")
	}
}

func TestHalf(t *testing.T) {
	for _, v := range []float64{1, 0.5, 2e-4, 1e-4, 65504} {
		out := make([]float32, 1)
		b := half(v)
		if err := quant.Dequantize(quant.F16, []byte{byte(b), byte(b >> 8)}, out); err != nil {
			t.Fatal(err)
		}
		if math.Abs(float64(out[0])-v) > v*1e-3 {
			t.Errorf("half(%g) decodes to %g", v, out[0])
		}
	}
}
