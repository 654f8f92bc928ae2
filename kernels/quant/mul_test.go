package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestMulMatchesDot: every output of Mul has the bits of the single-row
// product of its weight row and activation row, for every type with
// products, batches below and above the blocked kernels' shortest and
// around the tile sizes,
// weight row counts around the tiles, and row strides with gaps; outputs
// outside the requested block stay untouched. Prefill and decoding then
// round alike, and a speculative verification batch as the target alone.
// Under -tags purego this checks the DotsFunc path. Every type's Mul shares
// one panel, as a CPU backend's products on one worker do.
func TestMulMatchesDot(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	shared := new(MulScratch)
	for _, typ := range dotTypes {
		dot, err := DotFunc(typ)
		if err != nil {
			t.Fatal(err)
		}
		m, err := NewMul(typ)
		if err != nil {
			t.Fatal(err)
		}
		m.SharePanel(shared)
		k, hasBlocked := blockedKernel(typ)
		lengths := []int{256, 1024}
		if bs := typ.BlockSize(); bs < 256 {
			lengths = append(lengths, 384)
			if bs == 1 {
				lengths = append(lengths, 40) // not whole 32-element steps
			}
		}
		for _, n := range lengths {
			for _, nrows := range []int{1, 3, 4, 5, 13, 61} {
				rowBytes := len(randomRow(t, rng, typ, n))
				stride := rowBytes + 7*(nrows%2) // odd counts: rows with gaps
				rows := make([]byte, (nrows-1)*stride+rowBytes)
				for r := range nrows {
					copy(rows[r*stride:], randomRow(t, rng, typ, n))
				}
				for _, batch := range []int{1, 2, 3, 5, 9, 11, 12, 13, 25, 40} {
					vs := make([]Vec, batch)
					var b Batch
					b.Reset(typ, vs, n)
					for i := range vs {
						if err := vs[i].Prepare(typ, randomFloats(rng, n)); err != nil {
							t.Fatal(err)
						}
					}
					b.Pack(0, batch/2)
					b.Pack(batch/2, batch)
					if blocked := b.kern != nil; blocked != (hasBlocked && batch >= k.minRows && (typ.BlockSize() > 1 || n%32 == 0)) {
						t.Fatalf("%v n=%d B=%d: blocked layout %v", typ, n, batch, blocked)
					}
					ld := nrows + 3
					out := make([]float32, batch*ld)
					sentinel := float32(math.Inf(-1))
					for i := range out {
						out[i] = sentinel
					}
					m.Run(rows, stride, rowBytes, nrows, &b, out, ld)
					nonzero := false
					for a := range batch {
						for r := range ld {
							got := out[a*ld+r]
							if r >= nrows {
								if got != sentinel {
									t.Fatalf("%v n=%d B=%d: wrote column %d of row %d", typ, n, batch, r, a)
								}
								continue
							}
							want := dot(rows[r*stride:r*stride+rowBytes], &vs[a])
							if want != want {
								t.Fatalf("%v n=%d: single-row product %v", typ, n, want)
							}
							nonzero = nonzero || want != 0
							if math.Float32bits(got) != math.Float32bits(want) {
								t.Fatalf("%v n=%d rows=%d B=%d: weight row %d, act %d = %.9g, single-row %.9g",
									typ, n, nrows, batch, r, a, got, want)
							}
						}
					}
					if !nonzero {
						t.Fatalf("%v n=%d: every product is 0", typ, n)
					}
				}
			}
		}
	}
}

// TestMulMismatch: weight rows that do not fit the batch give NaN, as
// DotFunc does, instead of reading past a row.
func TestMulMismatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	for _, typ := range []Type{F16, Q8_0, Q5_0} {
		m, err := NewMul(typ)
		if err != nil {
			t.Fatal(err)
		}
		vs := make([]Vec, 16)
		for i := range vs {
			if err := vs[i].Prepare(typ, randomFloats(rng, 512)); err != nil {
				t.Fatal(err)
			}
		}
		var b Batch
		b.Reset(typ, vs, 512)
		b.Pack(0, len(vs))
		row := randomRow(t, rng, typ, 256) // half the batch's length
		out := make([]float32, len(vs))
		m.Run(row, len(row), len(row), 1, &b, out, 1)
		for a, v := range out {
			if v == v {
				t.Fatalf("%v: act %d gave %v for a short row, want NaN", typ, a, v)
			}
		}
	}
}

// BenchmarkMul multiplies the 256 x 1024 matrix of BenchmarkDots with a
// prefill batch, one worker. Bytes/s counts the weight bytes once per
// batch; GMAC/s is multiply-adds per second, against one core's peak of
// 2 FMA x 16 lanes a cycle (about 64-100 GMAC/s at 2-3 GHz); ns/dot is
// per output, as BenchmarkDots reports it.
func BenchmarkMul(b *testing.B) {
	const rows, n = 256, 1024
	t := &testing.T{}
	for _, typ := range []Type{F16, Q8_0, Q5_0, Q4_K, Q6_K} {
		rng := rand.New(rand.NewPCG(1, uint64(typ)))
		matrix := randomRow(t, rng, typ, rows*n)
		rowBytes := len(matrix) / rows
		m, err := NewMul(typ)
		if err != nil {
			b.Fatal(err)
		}
		for _, batch := range []int{12, 36, 128} {
			vs := make([]Vec, batch)
			var bt Batch
			bt.Reset(typ, vs, n)
			for i := range vs {
				if err := vs[i].Prepare(typ, randomFloats(rng, n)); err != nil {
					b.Fatal(err)
				}
			}
			bt.Pack(0, batch)
			out := make([]float32, batch*rows)
			b.Run(fmt.Sprintf("%v/B%d", typ, batch), func(b *testing.B) {
				b.SetBytes(int64(len(matrix)))
				for b.Loop() {
					m.Run(matrix, rowBytes, rowBytes, rows, &bt, out, rows)
				}
				ns := float64(b.Elapsed().Nanoseconds())
				b.ReportMetric(ns/float64(b.N*rows*batch), "ns/dot")
				b.ReportMetric(float64(b.N*rows*batch*n)/ns, "GMAC/s")
			})
		}
	}
}
