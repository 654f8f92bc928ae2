package cpu

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

var exhaustiveExp = flag.Bool("exhaustive-exp", false, "check onlineWeights' exponential on every float32 in [-105, 0] (minutes)")

// halfRows is n rows of stride bytes of random binary16 values (normal
// halves, never zero), scaled by mag.
func halfRows(rng *rand.Rand, n, stride int, mag float64) []byte {
	b := make([]byte, n*stride)
	for i := 0; i+1 < len(b); i += 2 {
		h := halfBitsOf(float32(rng.NormFloat64()*mag + 0.01))
		b[i], b[i+1] = byte(h), byte(h>>8)
	}
	return b
}

// TestScoresHalf: the scores of 16 keys at a time have the bits of
// dotHalfWide's, for every count of keys and for a cache that ends right
// after the last key (the partial block through pad).
func TestScoresHalf(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, hd := range []int{64, 128, 96} {
		kHead := 2 * hd
		stride := 3 * kHead // three KV heads a row
		for _, n := range []int{1, 5, 15, 16, 17, 31, 32, 33, 64, 70, 129} {
			for _, end := range []bool{false, true} {
				rows := n + 20
				if end {
					rows = n
				}
				cache := halfRows(rng, rows, stride, 1)
				q := make([]float32, hd)
				for i := range q {
					q[i] = roundHalf(float32(rng.NormFloat64()))
				}
				const g = 2
				k := cache[g*kHead:]
				if end {
					k = k[:(n-1)*stride+kHead]
				}
				want := make([]float32, n)
				scoresHalfGo(want, k, stride, kHead, q, 0.125, n)
				got := make([]float32, (n+15)&^15)
				scoresHalf(got, k, stride, kHead, q, 0.125, n, make([]byte, 16*kHead))
				sameBits(t, fmt.Sprintf("scoresHalf hd=%d end=%v", hd, end), n, got[:n], want)
			}
		}
	}
}

// TestOnlineWeights: each position's rescaling and weight have the bits of
// the sequential loop's, on scores of narrow and wide spreads (subnormal
// and zero weights), with infinities and NaN.
func TestOnlineWeights(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for trial := range 600 {
		n := 1 + rng.IntN(100)
		spread := []float64{0.01, 1, 8, 40, 200}[trial%5]
		x := make([]float32, (n+15)&^15)
		for i := range n {
			x[i] = float32(rng.NormFloat64() * spread)
			if trial%7 == 6 && rng.IntN(20) == 0 {
				x[i] = []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 0, float32(math.Copysign(0, -1))}[rng.IntN(5)]
			}
		}
		wantMs, wantVs := make([]float32, n), make([]float32, n)
		onlineWeightsGo(x[:n], wantMs, wantVs)
		ms, vs, d := make([]float32, len(x)), make([]float32, len(x)), make([]float32, len(x))
		onlineWeights(x, n, ms, vs, d)
		sameBitsNaN(t, "ms", n, ms[:n], wantMs)
		sameBitsNaN(t, "vs", n, vs[:n], wantVs)
	}
}

// TestOnlineWeightsExp: after a first score of 0, every weight is exp of
// its (non-positive) score: float32(math.Exp) bit for bit on random
// exponents over the whole range, rounding midpoints' neighbours included.
func TestOnlineWeightsExp(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	const n = 1 << 12
	x, ms, vs, d := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
	check := func(a, b float32) { // x between a and b, uniform in the bits
		lo, hi := min(math.Float32bits(a), math.Float32bits(b)), max(math.Float32bits(a), math.Float32bits(b))
		for i := 1; i < n; i++ {
			x[i] = math.Float32frombits(lo + uint32(rng.Int64N(int64(hi-lo)+1)))
		}
		onlineWeights(x, n, ms, vs, d)
		for i := 1; i < n; i++ {
			if want := float32(math.Exp(float64(x[i]))); math.Float32bits(vs[i]) != math.Float32bits(want) || ms[i] != 1 {
				t.Fatalf("exp(%g) = %g (ms %g), math.Exp %g", x[i], vs[i], ms[i], want)
			}
		}
	}
	negZero := float32(math.Copysign(0, -1))
	for range 64 {
		check(negZero, -110) // every magnitude of exponent down to past zero
		check(-1e-6, -0.5)
		check(-86, -88)
		check(-103, -105)
	}
}

// TestOnlineWeightsExpExhaustive runs the exponential of every float32 in
// [-105, 0] (with -exhaustive-exp).
func TestOnlineWeightsExpExhaustive(t *testing.T) {
	if !*exhaustiveExp {
		t.Skip("with -exhaustive-exp")
	}
	const n = 1 << 16
	x, ms, vs, d := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
	end := math.Float32bits(-105)
	for b := uint32(1 << 31); b <= end; {
		m := 1
		for ; m < n && b <= end; m++ {
			x[m] = math.Float32frombits(b)
			b++
		}
		onlineWeights(x, m, ms, vs, d)
		for i := 1; i < m; i++ {
			if want := float32(math.Exp(float64(x[i]))); math.Float32bits(vs[i]) != math.Float32bits(want) {
				t.Fatalf("exp(%g) = %g, math.Exp %g", x[i], vs[i], want)
			}
		}
	}
}

// TestAccumulateHalfUnits: the accumulation of several query heads over
// shared F16 value heads has, for each head, the bits of the
// per-position Go loop for that head alone, with rescalings mixed in.
func TestAccumulateHalfUnits(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	for _, hd := range []int{64, 128, 40} {
		for _, units := range []int{1, 2, 3, 4} {
			for _, n := range []int{1, 2, 17, 100} {
				stride, wstride := 4*hd, n+5
				v := halfRows(rng, n, stride, 1)
				ms, vs := make([]float32, units*wstride), make([]float32, units*wstride)
				for i := range ms {
					ms[i], vs[i] = 1, float32(rng.Float64())
					if rng.IntN(4) == 0 {
						ms[i], vs[i] = float32(rng.Float64()), 1
					}
				}
				want, wantSums := make([]float32, units*hd), make([]float32, units)
				for i := range want {
					want[i] = roundHalf(float32(rng.NormFloat64()))
				}
				for u := range units {
					wantSums[u] = float32(rng.Float64())
				}
				got, gotSums := append([]float32(nil), want...), append([]float32(nil), wantSums...)
				for u := range units {
					o := u * wstride
					wantSums[u] = accumulateHalfRowsGo(want[u*hd:(u+1)*hd], v[hd:], stride, ms[o:o+n], vs[o:o+n], wantSums[u])
				}
				accumulateHalfUnits(got, v[hd:], stride, ms, vs, wstride, units, n, gotSums)
				what := fmt.Sprintf("accumulateHalfUnits hd=%d units=%d", hd, units)
				sameBits(t, what, n, got, want)
				sameBits(t, what+" sums", n, gotSums, wantSums)
			}
		}
	}
}

func sameBitsNaN(t *testing.T, what string, n int, got, want []float32) {
	t.Helper()
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
			t.Fatalf("%s n=%d: element %d = %g, Go version %g", what, n, i, got[i], want[i])
		}
	}
}

// TestFlashMatchesLoop: the attention op on F16, Q8_0 and Q4_0 caches
// gives, for every query row of a batch, the bits of llama.cpp's loop run
// position by position for that row alone (flashLoop), with one thread and
// with several, for head sizes the assembly takes and one it does not.
func TestFlashMatchesLoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 30))
	types := []quant.Type{quant.F16, quant.Q8_0, quant.Q4_0}
	for _, threads := range []int{1, 2} {
		be := New(Options{Threads: threads})
		defer be.Close()
		for _, hd := range []int{64, 128, 96} {
			for _, kt := range types {
				for _, vt := range types {
					const nctx, heads, kvHeads = 45, 6, 2
					pos := []int32{0, 1, 2, 15, 16, 17, 40, 44, 3, 31}
					name := fmt.Sprintf("threads=%d hd=%d K=%v V=%v", threads, hd, kt, vt)
					got, want := runFlash(t, be, rng, kt, vt, nctx, heads, kvHeads, hd, pos)
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s: row %d element %d = %g, loop %g", name, i/(heads*hd), i%(heads*hd), got[i], want[i])
						}
					}
				}
			}
		}
	}
}

func runFlash(t *testing.T, be *Backend, rng *rand.Rand, kt, vt quant.Type, nctx, heads, kvHeads, hd int, pos []int32) (got, want []float32) {
	t.Helper()
	kvDim := kvHeads * hd
	cache := func(typ quant.Type) (kernels.Tensor, []byte) {
		x := make([]float32, nctx*kvDim)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		rb, _ := typ.RowBytes(int64(kvDim))
		data := make([]byte, int64(nctx)*rb)
		for r := range nctx {
			if err := quant.Quantize(typ, x[r*kvDim:(r+1)*kvDim], data[int64(r)*rb:int64(r+1)*rb]); err != nil {
				t.Fatal(err)
			}
		}
		return upload(t, be, typ, nctx, kvDim, data), data
	}
	K, kData := cache(kt)
	V, vData := cache(vt)
	b := len(pos)
	q := make([]float32, b*heads*hd)
	for i := range q {
		q[i] = float32(rng.NormFloat64())
	}
	Q := upload(t, be, quant.F32, b, heads*hd, kernels.F32Bytes(q))
	P := upload(t, be, quant.I32, 1, b, kernels.I32Bytes(pos))
	Dst := upload(t, be, quant.F32, b, heads*hd, make([]byte, 4*b*heads*hd))
	scale := float32(1 / math.Sqrt(float64(hd)))
	p, err := be.Compile([]kernels.Op{kernels.Attention{Dst: Dst, Q: Q, K: K, V: V, Pos: P,
		NHead: heads, NKVHead: kvHeads, HeadDim: hd, Scale: scale}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 4*b*heads*hd)
	if err := be.Read(out, Dst); err != nil {
		t.Fatal(err)
	}
	got = make([]float32, b*heads*hd)
	for i := range got {
		got[i] = math.Float32frombits(uint32(out[4*i]) | uint32(out[4*i+1])<<8 | uint32(out[4*i+2])<<16 | uint32(out[4*i+3])<<24)
	}
	want = make([]float32, b*heads*hd)
	krb, _ := kt.RowBytes(int64(kvDim))
	vrb, _ := vt.RowBytes(int64(kvDim))
	for r := range b {
		for h := range heads {
			o := (r*heads + h) * hd
			flashLoop(want[o:o+hd], q[o:o+hd], kData, vData, int(krb), int(vrb), kt, vt, h/(heads/kvHeads), int(pos[r])+1, scale)
		}
	}
	return got, want
}

func upload(t *testing.T, be *Backend, typ quant.Type, rows, cols int, data []byte) kernels.Tensor {
	t.Helper()
	buf, err := be.Alloc(kernels.Label{Cat: kernels.Scratch}, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	x := kernels.NewTensor(buf, typ, rows, cols, 0)
	if err := be.Write(x, data); err != nil {
		t.Fatal(err)
	}
	return x
}

// flashLoop is llama.cpp's CPU flash attention for one query head, written
// as its loop runs: position by position, the running maximum, the
// exponentials and the accumulator in one pass, with the Go versions of
// the product and accumulation kernels.
func flashLoop(out, q []float32, kData, vData []byte, krb, vrb int, kt, vt quant.Type, g, n int, scale float32) {
	hd := len(q)
	kh, _ := kt.RowBytes(int64(hd))
	vh, _ := vt.RowBytes(int64(hd))
	key := func(t int) []byte { return kData[t*krb+g*int(kh) : t*krb+(g+1)*int(kh)] }
	val := func(t int) []byte { return vData[t*vrb+g*int(vh) : t*vrb+(g+1)*int(vh)] }
	var qh []float32
	var qv quant.Vec
	if kt == quant.F16 {
		half := make([]byte, 2*hd)
		qh = make([]float32, hd)
		_ = quant.Quantize(quant.F16, q, half)
		_ = quant.Dequantize(quant.F16, half, qh)
	} else {
		_ = qv.Prepare(kt, q)
	}
	dot, _ := quant.DotFunc(kt)
	acc, row := make([]float32, hd), make([]float32, hd)
	m, sum := float32(math.Inf(-1)), float32(0)
	for t := range n {
		var x float32
		if kt == quant.F16 {
			x = scale * dotHalfWideGo(key(t), qh)
		} else {
			x = scale * dot(key(t), &qv)
		}
		ms, vs := float32(1), float32(1)
		if x > m {
			ms = float32(math.Exp(float64(m - x)))
			m = x
			if ms != 1 {
				if vt == quant.F16 {
					scaleHalfGo(acc, ms)
				} else {
					for i := range acc {
						acc[i] *= ms
					}
				}
			}
		} else {
			vs = float32(math.Exp(float64(x - m)))
		}
		if vt == quant.F16 {
			accumulateHalfGo(acc, val(t), vs)
		} else {
			_ = quant.Dequantize(vt, val(t), row)
			madF32(acc, row, vs)
		}
		sum = fma32(sum, ms, vs)
	}
	for i, a := range acc {
		out[i] = a * (1 / sum)
	}
}

// TestFma32 checks fma32 against the exact a·b+c rounded once to float32
// (math/big), on random operands of near and far magnitudes and on sums a
// float64 rounding would put on a float32 midpoint: a·b just below 2^-24
// added to 1+2^-23 lies just below the midpoint 1+3·2^-24, which float64
// rounds onto, and ties to even then round up.
func TestFma32(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	exact := func(a, b, c float32) float32 {
		x := new(big.Float).SetPrec(400).SetFloat64(float64(a))
		x.Mul(x, new(big.Float).SetPrec(400).SetFloat64(float64(b)))
		x.Add(x, new(big.Float).SetPrec(400).SetFloat64(float64(c)))
		f, _ := x.Float32()
		return f
	}
	check := func(a, b, c float32) {
		if got, want := fma32(a, b, c), exact(a, b, c); got != want {
			t.Fatalf("fma32(%g, %g, %g) = %.10g, want %.10g", a, b, c, got, want)
		}
	}
	for range 1 << 16 {
		a := float32(rng.NormFloat64() * math.Exp2(float64(rng.IntN(80)-40)))
		b := float32(rng.NormFloat64())
		c := float32(rng.NormFloat64() * math.Exp2(float64(rng.IntN(80)-40)))
		check(a, b, c)
	}
	a, b, c := float32(0x1p-12*(1+0x1p-23)), float32(0x1p-12*(1-0x1p-23)), float32(1+0x1p-23)
	if float32(float64(a)*float64(b)+float64(c)) == exact(a, b, c) {
		t.Fatal("the hard case is not one")
	}
	check(a, b, c)
	check(-a, b, -c)
}

// BenchmarkFlashPhases times each phase of the F16 attention on the demo
// target's shape (64-element heads, three query heads per KV head) over
// 128 positions, per position and query head.
func BenchmarkFlashPhases(b *testing.B) {
	rng := rand.New(rand.NewPCG(33, 34))
	const hd, units, n, kvHeads = 64, 3, 128, 2
	stride := kvHeads * 2 * hd
	cache := halfRows(rng, n, stride, 1)
	q := make([]float32, hd)
	for i := range q {
		q[i] = roundHalf(float32(rng.NormFloat64()))
	}
	x, d := make([]float32, n), make([]float32, n)
	ms, vs := make([]float32, units*n), make([]float32, units*n)
	acc, sums := make([]float32, units*hd), make([]float32, units)
	pad := make([]byte, 16*2*hd)
	b.Run("scores", func(b *testing.B) {
		b.SetBytes(int64(n * 2 * hd))
		perKey(b, n, func() { scoresHalf(x, cache, stride, 2*hd, q, 0.125, n, pad) })
	})
	b.Run("weights", func(b *testing.B) {
		perKey(b, n, func() { onlineWeights(x, n, ms, vs, d) })
	})
	for u := 1; u < units; u++ {
		copy(ms[u*n:(u+1)*n], ms[:n])
		copy(vs[u*n:(u+1)*n], vs[:n])
	}
	b.Run("accumulate", func(b *testing.B) {
		b.SetBytes(int64(n * 2 * hd))
		perKey(b, n*units, func() {
			clear(acc)
			clear(sums)
			accumulateHalfUnits(acc, cache, stride, ms, vs, n, units, n, sums)
		})
	})
}

// perKey runs f b.N times on one locked OS thread and reports its thread
// CPU time per key (the machine's wall time is shared with other work).
func perKey(b *testing.B, keys int, f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t0, ok := threadCPU()
	for b.Loop() {
		f()
	}
	if t1, _ := threadCPU(); ok {
		b.ReportMetric(float64((t1-t0).Nanoseconds())/float64(b.N*keys), "cpu-ns/key")
	}
}
