package cpu

import "math"

// ggml's CPU backend evaluates SiLU with a vectorised exp: a degree-5
// polynomial after range reduction (from Arm's optimized-routines), within
// about 1.5 ulp of expf but not equal to it. Quantized models round every
// activation to 8 bits, so the FFN rounds as llama.cpp does to reproduce its
// tokens. expApprox is that algorithm one lane at a time, in the form of
// ggml's AVX-512 build: the polynomial includes the leading 1 and 2^n
// scales the result exactly.

// fma32 is a*b+c for float32 operands rounded once, as a fused
// multiply-add instruction rounds it. The product is exact in float64, but
// rounding the float64 sum again to float32 could land on the wrong side of
// a float32 midpoint the first rounding made; an inexact sum is therefore
// rounded to odd first (its last bit set, toward the exact value), after
// which the rounding to float32 is exact, float64 carrying more than
// float32's 24 bits and two more.
func fma32(a, b, c float32) float32 {
	p, z := float64(a)*float64(b), float64(c)
	s := p + z
	if bits := math.Float64bits(s); bits&1 == 0 {
		bb := s - p
		if e := (p - (s - bb)) + (z - bb); e > 0 || e < 0 { // s's exact error (TwoSum); NaN when s overflowed
			if (e > 0) == (s > 0) {
				bits++
			} else {
				bits--
			}
			s = math.Float64frombits(bits)
		}
	}
	return float32(s)
}

const (
	expShift = 0x1.8p23 // adding it leaves round(x) in the low mantissa bits
	expLog2e = 0x1.715476p+0
	expLn2Hi = 0x1.62e4p-1
	expLn2Lo = 0x1.7f7d1cp-20
	expC1    = 0x1.ffffecp-1
	expC2    = 0x1.fffdb6p-2
	expC3    = 0x1.555e66p-3
	expC4    = 0x1.573e2ep-5
	expC5    = 0x1.0e4020p-7
)

// expApprox is e^x: x = n·ln2 + b with |b| ≤ ln2/2, e^b ≈ 1 + p(b), times
// 2^n. Beyond |n| > 192 it is 0 or +Inf.
func expApprox(x float32) float32 {
	z := fma32(x, expLog2e, expShift)
	n := z - expShift
	b := fma32(-n, expLn2Hi, x)
	b = fma32(-n, expLn2Lo, b)
	u := b * b
	p := fma32(fma32(fma32(expC5, b, expC4), u, fma32(expC3, b, expC2)), u, fma32(expC1, b, 1))
	if math.Abs(float64(n)) > 192 {
		if n <= 0 {
			return 0
		}
		return float32(math.Inf(1))
	}
	if n >= -126 && n <= 127 { // 2^n is a normal float32: one exact scaling
		return p * math.Float32frombits(uint32(int32(n)+127)<<23)
	}
	return float32(math.Ldexp(float64(p), int(n)))
}
