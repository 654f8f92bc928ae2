package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestDotsMatchDot: every output of the multi-row product has the bits of
// the single-row product for its (weight row, activation row) pair, for
// every type with products, batches below, at and above dotsMax, and row
// lengths with and without tails. Greedy speculative decoding relies on
// it: a verified batch must round as the target alone would, token by
// token. Under -tags purego this checks the pure-Go path.
func TestDotsMatchDot(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, typ := range dotTypes {
		dot, err := DotFunc(typ)
		if err != nil {
			t.Fatal(err)
		}
		dots, err := DotsFunc(typ)
		if err != nil {
			t.Fatal(err)
		}
		lengths := []int{256, 1024, 1536}
		if bs := typ.BlockSize(); bs < 256 {
			lengths = append(lengths, 384, 1056)
			if bs == 1 {
				lengths = append(lengths, 5, 1003) // float tails
			}
		}
		for _, n := range lengths {
			for _, batch := range []int{1, 2, 3, 5, 8, 16, 17, 35} {
				row := randomRow(t, rng, typ, n)
				vs := make([]Vec, batch)
				for i := range vs {
					if err := vs[i].Prepare(typ, randomFloats(rng, n)); err != nil {
						t.Fatal(err)
					}
				}
				out := make([]float32, batch)
				dots(row, vs, out)
				for i := range vs {
					want := dot(row, &vs[i])
					if want != want || want == 0 {
						t.Fatalf("%v n=%d: single-row product %v", typ, n, want)
					}
					if math.Float32bits(out[i]) != math.Float32bits(want) {
						t.Fatalf("%v n=%d B=%d row %d: %.9g, single-row %.9g", typ, n, batch, i, out[i], want)
					}
				}
			}
		}
	}
}

// TestDotsMismatch: a row that does not fit its activations gives NaN for
// that pair alone, as DotFunc does.
func TestDotsMismatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for _, typ := range []Type{F16, Q8_0, Q5_0, Q4_K, Q6_K} {
		dot, _ := DotFunc(typ)
		dots, err := DotsFunc(typ)
		if err != nil {
			t.Fatal(err)
		}
		row := randomRow(t, rng, typ, 512)
		vs := make([]Vec, 4)
		for i := range vs {
			n := 512
			if i == 2 {
				n = 256
			}
			if err := vs[i].Prepare(typ, randomFloats(rng, n)); err != nil {
				t.Fatal(err)
			}
		}
		out := make([]float32, len(vs))
		dots(row, vs, out)
		for i, got := range out {
			want := dot(row, &vs[i])
			if i == 2 && got == got {
				t.Errorf("%v: mismatched row gave %v, want NaN", typ, got)
			}
			if i != 2 && math.Float32bits(got) != math.Float32bits(want) {
				t.Errorf("%v row %d: %v, single-row %v", typ, i, got, want)
			}
		}
	}
	if _, err := DotsFunc(IQ2_XXS); err == nil {
		t.Error("DotsFunc accepted a type without products")
	}
}

// BenchmarkDots multiplies the 256 x 1024 matrix of BenchmarkDot with B
// prepared rows, as a matmul does for a verification or prefill batch.
// Bytes/s counts the weight bytes once per batch (the matrix streamed
// once); ns/dot is the time per output, which B = 1 gives for the
// single-row path.
func BenchmarkDots(b *testing.B) {
	const rows, n = 256, 1024
	t := &testing.T{}
	for _, typ := range []Type{F16, Q8_0, Q5_0, Q4_K, Q6_K} {
		rng := rand.New(rand.NewPCG(1, uint64(typ)))
		matrix := randomRow(t, rng, typ, rows*n)
		rowBytes := len(matrix) / rows
		dots, err := DotsFunc(typ)
		if err != nil {
			b.Fatal(err)
		}
		for _, batch := range []int{1, 2, 3, 4, 5, 16} {
			vs := make([]Vec, batch)
			for i := range vs {
				if err := vs[i].Prepare(typ, randomFloats(rng, n)); err != nil {
					b.Fatal(err)
				}
			}
			out := make([]float32, batch)
			b.Run(fmt.Sprintf("%v/B%d", typ, batch), func(b *testing.B) {
				b.SetBytes(int64(len(matrix)))
				for b.Loop() {
					for r := range rows {
						dots(matrix[r*rowBytes:(r+1)*rowBytes], vs, out)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows*batch), "ns/dot")
			})
		}
	}
}
