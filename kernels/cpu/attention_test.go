package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tandem-run/tandem/kernels/quant"
)

// TestRoundHalf compares the bit-trick rounding with a binary16 round trip
// through kernels/quant, on every exponent and on random bits.
func TestRoundHalf(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(f float32) {
		var h [2]byte
		var want [1]float32
		_ = quant.Quantize(quant.F16, []float32{f}, h[:])
		_ = quant.Dequantize(quant.F16, h[:], want[:])
		got := roundHalf(f)
		if math.Float32bits(got) != math.Float32bits(want[0]) && !(got != got && want[0] != want[0]) {
			t.Fatalf("roundHalf(%g) = %g, want %g", f, got, want[0])
		}
	}
	for i := 0; i < 1<<20; i++ {
		check(math.Float32frombits(rng.Uint32()))
	}
	for e := uint32(0); e < 256; e++ {
		for _, m := range []uint32{0, 0xfff, 0x1000, 0x1001, 0x2000, 0x3000, 0x7fffff} {
			check(math.Float32frombits(e<<23 | m))
			check(math.Float32frombits(1<<31 | e<<23 | m))
		}
	}
}

// TestHalfBits checks the conversion of every binary16 value.
func TestHalfBits(t *testing.T) {
	for h := range 1 << 16 {
		var want [1]float32
		_ = quant.Dequantize(quant.F16, []byte{byte(h), byte(h >> 8)}, want[:])
		got := halfBits(uint16(h))
		if math.Float32bits(got) != math.Float32bits(want[0]) && !(got != got && want[0] != want[0]) {
			t.Fatalf("halfBits(%#04x) = %g, want %g", h, got, want[0])
		}
	}
}
