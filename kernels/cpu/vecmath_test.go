package cpu

import (
	"math/rand/v2"
	"testing"
)

// TestVecMath: the elementwise loops in assembly give the bits of their Go
// versions, for lengths with and without a tail, in place too.
func TestVecMath(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	vec := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * 3)
		}
		return v
	}
	for _, n := range []int{1, 15, 16, 17, 64, 100, 384} {
		x, w, y := vec(n), vec(n), vec(n)
		s := float32(rng.Float64())

		want, got := make([]float32, n), make([]float32, n)
		scaleMulGo(want, x, w, s)
		scaleMul(got, x, w, s)
		sameBits(t, "scaleMul", n, got, want)

		addRowGo(want, x, w)
		addRow(got, x, w)
		sameBits(t, "addRow", n, got, want)

		want0, want1 := make([]float32, n), make([]float32, n)
		sin := vec(n)
		rotateGo(want0, want1, x, y, w, sin)
		in0, in1 := append([]float32(nil), x...), append([]float32(nil), y...)
		rotate(in0, in1, in0, in1, w, sin) // in place, as RoPE runs
		sameBits(t, "rotate", n, in0, want0)
		sameBits(t, "rotate", n, in1, want1)
	}
}

// BenchmarkRotate: one NeoX head of 128 elements, in place; bytes read and
// written per second.
func BenchmarkRotate(b *testing.B) {
	rng := rand.New(rand.NewPCG(45, 46))
	v := make([]float32, 4*64)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	x0, x1, cos, sin := v[:64], v[64:128], v[128:192], v[192:]
	b.SetBytes(6 * 4 * 64)
	for b.Loop() {
		rotate(x0, x1, x0, x1, cos, sin)
	}
}

// BenchmarkScaleMul: one RMS norm row of the demo target's width (384)
// scaled and weighted; bytes read and written per second.
func BenchmarkScaleMul(b *testing.B) {
	rng := rand.New(rand.NewPCG(47, 48))
	x, w, dst := make([]float32, 384), make([]float32, 384), make([]float32, 384)
	for i := range x {
		x[i], w[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
	}
	b.SetBytes(3 * 4 * 384)
	for b.Loop() {
		scaleMul(dst, x, w, 0.5)
	}
}

// BenchmarkAddRow: one residual add of the demo target's width (384);
// bytes read and written per second.
func BenchmarkAddRow(b *testing.B) {
	rng := rand.New(rand.NewPCG(49, 50))
	x, y := make([]float32, 384), make([]float32, 384)
	for i := range x {
		x[i], y[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
	}
	b.SetBytes(3 * 4 * 384)
	for b.Loop() {
		addRow(x, x, y)
	}
}
