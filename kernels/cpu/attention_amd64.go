//go:build !purego

package cpu

import (
	"math"

	"golang.org/x/sys/cpu"
)

// hasAVX2 is set once at start from the CPU's features: the attention
// kernels need AVX2, FMA and F16C.
var hasAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C

// hasAttnAVX512 is set once at start: the attention's phases in AVX-512
// need AVX-512F alone (its F16 conversions and fused multiply-adds included).
var hasAttnAVX512 = cpu.X86.HasAVX512F

//go:noescape
func dotHalfWideAVX2(k []byte, q []float32, steps int) float32

// dotHalfWide is dotHalfWideGo, the whole steps of 64 in assembly.
func dotHalfWide(k []byte, q []float32) float32 {
	n := len(q)
	np := n &^ 63
	if !hasAVX2 || np == 0 {
		return dotHalfWideGo(k, q)
	}
	s := dotHalfWideAVX2(k[:2*np], q[:np], np/64)
	if np == n {
		return s
	}
	return float32(float64(s) + halfTail(k[2*np:2*n], q[np:]))
}

//go:noescape
func accumulateHalfAVX2(acc []float32, v []byte, vs float32, n int)

//go:noescape
func scaleHalfAVX2(acc []float32, ms float32, n int)

// accumulateHalf is accumulateHalfGo, whole groups of eight in assembly.
func accumulateHalf(acc []float32, v []byte, vs float32) {
	if n := len(acc) &^ 7; hasAVX2 && n > 0 {
		accumulateHalfAVX2(acc[:n], v[:2*n], vs, n)
		acc, v = acc[n:], v[2*n:]
	}
	accumulateHalfGo(acc, v, vs)
}

// scaleHalf is scaleHalfGo, whole groups of eight in assembly.
func scaleHalf(acc []float32, ms float32) {
	if n := len(acc) &^ 7; hasAVX2 && n > 0 {
		scaleHalfAVX2(acc[:n], ms, n)
		acc = acc[n:]
	}
	scaleHalfGo(acc, ms)
}

//go:noescape
func scoresHalf64AVX512(k []byte, stride int, q []float32, x []float32, scale float32, blocks int)

//go:noescape
func scoresHalf128AVX512(k []byte, stride int, q []float32, x []float32, scale float32, blocks int)

// scoresHalf is scoresHalfGo, for heads of 64 or 128 elements 16 keys at a
// time in assembly. x has room for n rounded up to 16; the lanes past n get
// the scores of whatever follows in the cache, or of zeros: k runs from the
// first key head to the end of the cache's buffer, and when that ends
// within the last block its keys are copied into pad (16 key heads).
func scoresHalf(x []float32, k []byte, stride, kHead int, q []float32, scale float32, n int, pad []byte) {
	f := scoresHalf64AVX512
	switch {
	case !hasAttnAVX512 || n == 0:
		scoresHalfGo(x, k, stride, kHead, q, scale, n)
		return
	case len(q) == 128:
		f = scoresHalf128AVX512
	case len(q) != 64:
		scoresHalfGo(x, k, stride, kHead, q, scale, n)
		return
	}
	blocks := (n + 15) / 16
	x = x[:16*blocks]
	if (16*blocks-1)*stride+kHead <= len(k) {
		f(k, stride, q, x, scale, blocks)
		return
	}
	full := n / 16
	if full > 0 {
		_ = k[(16*full-1)*stride+kHead-1]
		f(k, stride, q, x, scale, full)
	}
	t0 := 16 * full
	pad = pad[:16*kHead]
	clear(pad)
	for t := t0; t < n; t++ {
		copy(pad[(t-t0)*kHead:(t-t0+1)*kHead], k[t*stride:t*stride+kHead])
	}
	f(pad, kHead, q, x[t0:], scale, 1)
}

//go:noescape
func onlineWeightsAVX512(x, ms, vs, d []float32, blocks int) (flags int)

// onlineWeights is onlineWeightsGo for the first n scores of x, 16 at a
// time in assembly (the exponentials in float64, rounded as
// float32(math.Exp) is: any lane whose rounding is in doubt is recomputed
// by math.Exp); x, ms, vs and d have room for n rounded up to 16, d for
// the exponents.
func onlineWeights(x []float32, n int, ms, vs, d []float32) {
	if !hasAttnAVX512 {
		onlineWeightsGo(x[:n], ms[:n], vs[:n])
		return
	}
	blocks := (n + 15) / 16
	m := 16 * blocks
	x, ms, vs, d = x[:m], ms[:m], vs[:m], d[:m]
	for t := n; t < m; t++ {
		x[t] = x[n-1] // no new maximum, nothing left to Go
	}
	flags := onlineWeightsAVX512(x, ms, vs, d, blocks)
	if flags&2 != 0 { // a NaN score
		onlineWeightsGo(x[:n], ms[:n], vs[:n])
		return
	}
	if flags&1 != 0 {
		for t := range n {
			if ms[t] < 0 {
				ms[t] = float32(math.Exp(float64(d[t])))
			} else if vs[t] < 0 {
				vs[t] = float32(math.Exp(float64(d[t])))
			}
		}
	}
}

//go:noescape
func accumulateHalfUnits64AVX512(acc []float32, v []byte, stride int, ms, vs []float32, wstride, units, n int, sums []float32)

//go:noescape
func accumulateHalfUnits128AVX512(acc []float32, v []byte, stride int, ms, vs []float32, wstride, units, n int, sums []float32)

// accumulateHalfUnits is accumulateHalfUnitsGo, for heads of 64 or 128
// elements in assembly.
func accumulateHalfUnits(acc []float32, v []byte, stride int, ms, vs []float32, wstride, units, n int, sums []float32) {
	f := accumulateHalfUnits64AVX512
	hd := len(acc) / units
	switch {
	case !hasAttnAVX512 || n == 0:
		accumulateHalfUnitsGo(acc, v, stride, ms, vs, wstride, units, n, sums)
		return
	case hd == 128:
		f = accumulateHalfUnits128AVX512
	case hd != 64:
		accumulateHalfUnitsGo(acc, v, stride, ms, vs, wstride, units, n, sums)
		return
	}
	_, _, _ = v[(n-1)*stride+2*hd-1], ms[(units-1)*wstride+n-1], vs[(units-1)*wstride+n-1]
	_, _ = acc[units*hd-1], sums[units-1]
	f(acc, v, stride, ms, vs, wstride, units, n, sums)
}
