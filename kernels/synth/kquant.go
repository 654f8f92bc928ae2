package synth

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/tandem-run/tandem/kernels/quant"
)

// Quantize encodes src as type t into dst (t.RowBytes(len(src)) bytes).
// Beyond what quant.Quantize covers (float and 8-bit types) it encodes the
// weight types of Q4_K_M files, Q4_K and Q6_K, so that synthetic models can
// hold chosen values (an inflated model's real weights) rather than random
// bytes.
//
// The K-type encoders are least-squares searches written for this
// package, not ggml's: they fit each sub-block's scale (and Q4_K's min)
// over a few candidate scales, refit on the chosen quants, then round the
// sub-block parameters to the 6- or 8-bit codes the block stores and try
// each code's neighbours. A sub-block of zeros always encodes as exact
// zeros (scale and min 0), and so does every zero of a sub-block whose
// values are all >= 0 (Q4_K) or of any sub-block (Q6_K, symmetric), which
// is what lets inflated models keep zero regions exact inside mixed blocks.
func Quantize(t quant.Type, src []float32, dst []byte) error {
	var bytes, size int
	switch t {
	case quant.Q4_K:
		bytes, size = 144, 256
	case quant.Q6_K:
		bytes, size = 210, 256
	default:
		return quant.Quantize(t, src, dst)
	}
	if len(src)%size != 0 || len(dst) != len(src)/size*bytes {
		return fmt.Errorf("synth: quantize %d values into %d bytes of %v: %w", len(src), len(dst), t, quant.ErrBlockAlign)
	}
	for i := range len(src) / size {
		x, b := src[i*size:(i+1)*size], dst[i*bytes:(i+1)*bytes]
		if t == quant.Q4_K {
			quantizeQ4KBlock(x, b)
		} else {
			quantizeQ6KBlock(x, b)
		}
	}
	return nil
}

// f16 rounds v to the nearest binary16 value, returned with its bits.
func f16(v float32) (float32, uint16) {
	var b [2]byte
	var out [1]float32
	// Neither call can fail for one F16 element.
	_ = quant.Quantize(quant.F16, []float32{v}, b[:])
	_ = quant.Dequantize(quant.F16, b[:], out[:])
	return out[0], binary.LittleEndian.Uint16(b[:])
}

// fitScaleMin fits x ≈ s*q - m with q in [0, 15], s >= 0, m >= 0, for one
// Q4_K sub-block, minimising the squared error.
func fitScaleMin(x []float32) (s, m float32) {
	lo, hi := float32(0), float32(0)
	for _, v := range x {
		lo, hi = min(lo, v), max(hi, v)
	}
	if hi == lo {
		return 0, -lo // all equal and <= 0: the min alone
	}
	// Values >= 0 that include a zero keep m = 0, so the zeros stay exact.
	pin := lo == 0 && slices.Contains(x, 0)
	best := float32(math.Inf(1))
	for step := -10; step <= 10; step += 2 {
		cs := (hi - lo) / (15 + float32(step)/10)
		cm := -lo
		for range 2 {
			cs, cm = refitScaleMin(x, cs, cm, pin)
		}
		if e := errScaleMin(x, cs, cm); e < best {
			best, s, m = e, cs, cm
		}
	}
	return s, m
}

func quant4(v, s, m float32) float32 {
	if s <= 0 {
		return 0
	}
	return min(15, max(0, float32(math.Round(float64((v+m)/s)))))
}

// refitScaleMin quantizes x with (s, m) and solves the least-squares s, m
// for those quants (m clamped at 0, or held at 0 when pinned).
func refitScaleMin(x []float32, s, m float32, pin bool) (float32, float32) {
	var sq, sqq, sx, sqx float64
	for _, v := range x {
		q := float64(quant4(v, s, m))
		sq += q
		sqq += q * q
		sx += float64(v)
		sqx += q * float64(v)
	}
	n := float64(len(x))
	det := sqq*n - sq*sq
	if det == 0 || sqq == 0 {
		return s, m
	}
	ns := (n*sqx - sq*sx) / det
	nm := (sq*sqx - sqq*sx) / det
	if nm < 0 || pin {
		nm = 0
		ns = sqx / sqq
	}
	if ns <= 0 {
		return s, m
	}
	return float32(ns), float32(nm)
}

func errScaleMin(x []float32, s, m float32) float32 {
	var e float32
	for _, v := range x {
		d := s*quant4(v, s, m) - m - v
		e += d * d
	}
	return e
}

// quantizeQ4KBlock encodes 256 values as one Q4_K block (layout in
// kernels/quant/q4_k.go).
func quantizeQ4KBlock(x []float32, b []byte) {
	clear(b)
	var s, m [8]float32
	var sMax, mMax float32
	for j := range 8 {
		s[j], m[j] = fitScaleMin(x[32*j : 32*j+32])
		sMax, mMax = max(sMax, s[j]), max(mMax, m[j])
	}
	d, dBits := f16(sMax / 63)
	dmin, dminBits := f16(mMax / 63)
	binary.LittleEndian.PutUint16(b[0:], dBits)
	binary.LittleEndian.PutUint16(b[2:], dminBits)
	code := func(v, unit float32) int {
		if unit <= 0 {
			return 0
		}
		return min(63, max(0, int(math.Round(float64(v/unit)))))
	}
	for j := range 8 {
		xs := x[32*j : 32*j+32]
		sc, mn := code(s[j], d), code(m[j], dmin)
		// The codes' neighbours may fit better once d and dmin are rounded.
		best := errScaleMin(xs, d*float32(sc), dmin*float32(mn))
		for ds := -1; ds <= 1; ds++ {
			for dm := -1; dm <= 1; dm++ {
				a, c := sc+ds, mn+dm
				if a < 0 || a > 63 || c < 0 || c > 63 || (ds == 0 && dm == 0) || (m[j] == 0 && c != 0) {
					continue
				}
				if e := errScaleMin(xs, d*float32(a), dmin*float32(c)); e < best {
					best, sc, mn = e, a, c
				}
			}
		}
		if s[j] == 0 && m[j] == 0 {
			sc, mn = 0, 0 // a zero sub-block stays exactly zero
		}
		putScaleMin(b[4:16], j, sc, mn)
		S, M := d*float32(sc), dmin*float32(mn)
		for l, v := range xs {
			q := byte(quant4(v, S, M))
			i := 16 + 32*(j/2) + l
			if j%2 == 0 {
				b[i] |= q
			} else {
				b[i] |= q << 4
			}
		}
	}
}

// putScaleMin stores sub-block j's 6-bit scale and min as
// kernels/quant's kScaleMin reads them.
func putScaleMin(s []byte, j, sc, mn int) {
	if j < 4 {
		s[j] |= byte(sc)
		s[j+4] |= byte(mn)
		return
	}
	s[j+4] = byte(sc&15) | byte(mn&15)<<4
	s[j-4] |= byte(sc>>4) << 6
	s[j] |= byte(mn>>4) << 6
}

func quant6(v, s float32) float32 {
	if s == 0 {
		return 0
	}
	return min(31, max(-32, float32(math.Round(float64(v/s)))))
}

func err6(x []float32, s float32) float32 {
	var e float32
	for _, v := range x {
		d := s*quant6(v, s) - v
		e += d * d
	}
	return e
}

// fitScale6 fits x ≈ s*q with q in [-32, 31] for one Q6_K sub-block of 16.
func fitScale6(x []float32) float32 {
	var big float32 // the value of largest magnitude, with its sign
	for _, v := range x {
		if abs32(v) > abs32(big) {
			big = v
		}
	}
	if big == 0 {
		return 0
	}
	best, s := float32(math.Inf(1)), float32(0)
	for step := -8; step <= 8; step++ {
		// Map big towards -32, the side with one more level.
		cs := -big / (32 + float32(step)/8)
		var sqx, sqq float64
		for _, v := range x {
			q := float64(quant6(v, cs))
			sqx += q * float64(v)
			sqq += q * q
		}
		if sqq > 0 {
			cs = float32(sqx / sqq)
		}
		if e := err6(x, cs); e < best {
			best, s = e, cs
		}
	}
	return s
}

func abs32(v float32) float32 { return float32(math.Abs(float64(v))) }

// quantizeQ6KBlock encodes 256 values as one Q6_K block (layout in
// kernels/quant/q6_k.go).
func quantizeQ6KBlock(x []float32, b []byte) {
	clear(b)
	var s [16]float32
	var sMax float32
	for j := range 16 {
		s[j] = fitScale6(x[16*j : 16*j+16])
		sMax = max(sMax, abs32(s[j]))
	}
	d, dBits := f16(sMax / 127)
	binary.LittleEndian.PutUint16(b[208:], dBits)
	var q [256]int
	for j := range 16 {
		xs := x[16*j : 16*j+16]
		sc := 0
		if d > 0 {
			sc = min(127, max(-127, int(math.Round(float64(s[j]/d)))))
			best := err6(xs, d*float32(sc))
			for _, c := range []int{sc - 1, sc + 1} {
				if c >= -127 && c <= 127 {
					if e := err6(xs, d*float32(c)); e < best {
						best, sc = e, c
					}
				}
			}
		}
		b[192+j] = byte(int8(sc))
		for l, v := range xs {
			q[16*j+l] = int(quant6(v, d*float32(sc))) + 32
		}
	}
	for h := range 2 {
		ql, qh := b[64*h:64*h+64], b[128+32*h:128+32*h+32]
		y := q[128*h : 128*h+128]
		for l := range 32 {
			q0, q1, q2, q3 := y[l], y[l+32], y[l+64], y[l+96]
			ql[l] = byte(q0&15 | (q2&15)<<4)
			ql[l+32] = byte(q1&15 | (q3&15)<<4)
			qh[l] = byte(q0>>4 | (q1>>4)<<2 | (q2>>4)<<4 | (q3>>4)<<6)
		}
	}
}
