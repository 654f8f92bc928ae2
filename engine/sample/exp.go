package sample

import "math"

// expNeg is e^y for y <= 0 in float64, within a relative 1e-12 of
// math.Exp (TestExpNeg), in a fraction of its time: a softmax over a 152k
// vocabulary is one exponential a token, per sampled token and per
// verified row, and math.Exp made that a millisecond. The probabilities
// it feeds are stored as float32, whose rounding (3e-8) is far above this
// error, so the distribution is the one math.Exp gives.
//
// y = (32n + j)·ln2/32 + r with |r| <= ln2/64: e^y = 2^n · 2^(j/32) · e^r,
// the middle factor from a table and e^r by its Taylor series to r^4 (the
// next term is under 1.2e-12 of the sum), 2^n added to the table entry's
// exponent. Below -708 (where the result would not be a normal float64)
// it is 0.
func expNeg(y float64) float64 {
	const (
		scale = 32 / math.Ln2
		ln2Hi = 6.93147180369123816490e-01 / 32 // ln2's high bits: k·ln2Hi is exact
		ln2Lo = 1.90821492927058770002e-10 / 32
		round = 0x1.8p52 // adding it leaves round(v) in the low bits
	)
	if !(y >= -708) {
		return 0
	}
	z := y*scale + round
	k := int64(math.Float64bits(z)) << 12 >> 12 // round(y·scale), sign-extended from 52 bits
	kf := z - round
	r := y - kf*ln2Hi - kf*ln2Lo
	r2 := r * r
	p := 1 + r + r2*(0.5+r*(1.0/6)+r2*(1.0/24))
	return p * math.Float64frombits(exp2Table[k&31]+uint64(k>>5)<<52)
}

// exp2Table holds the bits of 2^(j/32), j = 0..31.
var exp2Table = func() (t [32]uint64) {
	for j := range t {
		t[j] = math.Float64bits(math.Exp2(float64(j) / 32))
	}
	return t
}()
