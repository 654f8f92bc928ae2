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

// TestDotHalfWide compares the F16 attention dot product with a float64
// sum, on rows of several lengths (whole steps of 64 and a tail); the fast
// version must equal the Go one bit for bit.
func TestDotHalfWide(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{64, 128, 192, 96, 40} {
		k, q := make([]byte, 2*n), make([]float32, n)
		var want, mag float64
		for i := range n {
			h := halfBitsOf(float32(rng.NormFloat64()))
			k[2*i], k[2*i+1] = byte(h), byte(h>>8)
			q[i] = float32(rng.NormFloat64())
			p := float64(halfBits(h)) * float64(q[i])
			want += p
			mag += math.Abs(p)
		}
		got := dotHalfWide(k, q)
		if math.Abs(float64(got)-want) > 1e-6*mag {
			t.Errorf("n=%d: %g, float64 %g", n, got, want)
		}
		if ref := dotHalfWideGo(k, q); math.Float32bits(got) != math.Float32bits(ref) {
			t.Errorf("n=%d: %g, Go version %g", n, got, ref)
		}
	}
}

// halfBitsOf is the binary16 encoding of f (a normal half value).
func halfBitsOf(f float32) uint16 {
	b := math.Float32bits(roundHalf(f))
	return uint16(b>>16&0x8000 | (b>>23&0xff-127+15)<<10 | b>>13&0x3ff)
}

func BenchmarkDotHalfWide(b *testing.B) {
	k, q := make([]byte, 128), make([]float32, 64)
	for i := range q {
		q[i] = float32(i) / 64
		k[2*i+1] = 0x3c
	}
	b.SetBytes(int64(len(k) + 4*len(q)))
	var s float32
	for b.Loop() {
		s += dotHalfWide(k, q)
	}
	_ = s
}
