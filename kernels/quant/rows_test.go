package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestRowsMatchDot: every output of RowsFunc has the bits of the
// single-row product of its row, for every type with products, row counts
// around the kernels' four, row lengths of one block and more, and strides
// with gaps; a row that does not fit the activations gives NaN.
func TestRowsMatchDot(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	for _, typ := range dotTypes {
		dot, err := DotFunc(typ)
		if err != nil {
			t.Fatal(err)
		}
		rowsFn, err := RowsFunc(typ)
		if err != nil {
			t.Fatal(err)
		}
		lengths := []int{256, 1024}
		if typ.BlockSize() < 256 {
			lengths = append(lengths, 32, 384)
			if typ.BlockSize() == 1 {
				lengths = append(lengths, 40) // not whole 32-element steps
			}
		}
		for _, n := range lengths {
			var v Vec
			if err := v.Prepare(typ, randomFloats(rng, n)); err != nil {
				t.Fatal(err)
			}
			for _, nrows := range []int{1, 3, 4, 5, 8, 13} {
				rowBytes := len(randomRow(t, rng, typ, n))
				stride := rowBytes + 5*(nrows%3) // some with gaps between rows
				rows := make([]byte, (nrows-1)*stride+rowBytes)
				for r := range nrows {
					copy(rows[r*stride:], randomRow(t, rng, typ, n))
				}
				out := make([]float32, nrows+1)
				out[nrows] = -1
				rowsFn(rows, stride, rowBytes, nrows, &v, out)
				for r := range nrows {
					want := dot(rows[r*stride:r*stride+rowBytes], &v)
					if want != want || want == 0 {
						t.Fatalf("%v n=%d: single-row product %v", typ, n, want)
					}
					if math.Float32bits(out[r]) != math.Float32bits(want) {
						t.Fatalf("%v n=%d rows=%d: row %d = %.9g, single-row %.9g", typ, n, nrows, r, out[r], want)
					}
				}
				if out[nrows] != -1 {
					t.Fatalf("%v: wrote past the rows", typ)
				}
			}
			if n/2%typ.BlockSize() != 0 {
				continue // no row of half the length
			}
			short := randomRow(t, rng, typ, n/2)
			out := make([]float32, 4)
			rowsFn(append(append(append(append([]byte{}, short...), short...), short...), short...), len(short), len(short), 4, &v, out)
			for r, got := range out {
				if got == got {
					t.Fatalf("%v: row %d of half the length gave %v, want NaN", typ, r, got)
				}
			}
		}
	}
}

// BenchmarkRows multiplies the 256 x 1024 matrix of BenchmarkDot with one
// prepared row, as decoding does. Bytes/s counts weight bytes: one core
// streams ~10-20 GB/s from memory, more from L2/L3, where a small model's
// layers sit.
func BenchmarkRows(b *testing.B) {
	const rows, n = 256, 1024
	t := &testing.T{}
	for _, typ := range []Type{F16, Q8_0, Q5_0, Q4_K, Q6_K} {
		rng := rand.New(rand.NewPCG(1, uint64(typ)))
		matrix := randomRow(t, rng, typ, rows*n)
		rowBytes := len(matrix) / rows
		var v Vec
		if err := v.Prepare(typ, randomFloats(rng, n)); err != nil {
			b.Fatal(err)
		}
		f, err := RowsFunc(typ)
		if err != nil {
			b.Fatal(err)
		}
		out := make([]float32, rows)
		b.Run(typ.String(), func(b *testing.B) {
			b.SetBytes(int64(len(matrix)))
			for b.Loop() {
				f(matrix, rowBytes, rowBytes, rows, &v, out)
			}
		})
	}
}
