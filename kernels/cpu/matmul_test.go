package cpu_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/cpu"
	"github.com/tandem-run/tandem/kernels/quant"
)

// matMulTypes are the weight types of the demo models' files (Q4_K_M mixes
// Q4_K, Q6_K, Q5_0 and Q8_0), and two without a multi-row kernel.
var matMulTypes = []quant.Type{quant.F16, quant.Q8_0, quant.Q5_0, quant.Q4_K, quant.Q6_K, quant.Q4_0, quant.Q5_K}

// TestMatMulBatchIsPerRow: each row of a batched product has the bits of
// the same activation row multiplied alone (B = 1, the decode path), so a
// speculative verification batch rounds exactly as the target decoding
// token by token. Several threads, so the split over workers is covered.
func TestMatMulBatchIsPerRow(t *testing.T) {
	be := newBackend(t, cpu.Options{Threads: 3})
	rng := rand.New(rand.NewPCG(5, 6))
	const in, out = 512, 37
	for _, wt := range matMulTypes {
		w := upload(t, be, wt, out, in, randomWeights(t, rng, wt, out*in))
		for _, batch := range []int{2, 3, 5, 8, 17, 40} {
			x := make([]float32, batch*in)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			got := matMul(t, be, w, x, batch)
			for r := range batch {
				want := matMul(t, be, w, x[r*in:(r+1)*in], 1)
				for c := range want {
					if g := got[r*out+c]; math.Float32bits(g) != math.Float32bits(want[c]) {
						t.Fatalf("%v B=%d: row %d col %d = %.9g, alone %.9g", wt, batch, r, c, g, want[c])
					}
				}
			}
		}
	}
}

// BenchmarkMatMulBatch times a 1024 x 1024 product per weight type at the
// batch sizes of decode (1), speculative verification (2, 5) and prefill
// (16, 64). Bytes/s counts the weights once per product: the roofline for
// decode is memory bandwidth; batched, the weight bytes a second show how
// far a batch shares each weight row.
func BenchmarkMatMulBatch(b *testing.B) {
	be := newBackend(b, cpu.Options{})
	rng := rand.New(rand.NewPCG(7, 8))
	const n = 1024
	for _, wt := range matMulTypes[:5] {
		data := randomWeights(b, rng, wt, n*n)
		w := upload(b, be, wt, n, n, data)
		for _, batch := range []int{1, 2, 5, 16, 64} {
			b.Run(fmt.Sprintf("%v/B=%d", wt, batch), func(b *testing.B) {
				x := make([]float32, batch*n)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				p, _ := matMulProgram(b, be, w, x, batch)
				defer p.Close()
				b.SetBytes(int64(len(data)))
				for b.Loop() {
					if err := p.Run(context.Background()); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/row")
			})
		}
	}
}

// randomWeights is n weights of type wt: random blocks, redrawn until
// they decode to finite values of a sane size.
func randomWeights(t testing.TB, rng *rand.Rand, wt quant.Type, n int) []byte {
	t.Helper()
	size, err := wt.RowBytes(int64(n))
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, size)
	bs, ts := wt.BlockSize(), wt.TypeSize()
	vals := make([]float32, bs)
	for blk := 0; blk < len(data); blk += ts {
		b := data[blk : blk+ts]
		for {
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			if err := quant.Dequantize(wt, b, vals); err != nil {
				t.Fatal(err)
			}
			if saneBlock(vals) {
				break
			}
		}
	}
	return data
}

func saneBlock(v []float32) bool {
	var m float64
	for _, x := range v {
		a := math.Abs(float64(x))
		if math.IsNaN(a) || a > 1e2 {
			return false
		}
		m = max(m, a)
	}
	return m > 1e-2
}

// upload allocates a [rows, cols] tensor of type typ holding data (nil:
// left as allocated).
func upload(t testing.TB, be *cpu.Backend, typ quant.Type, rows, cols int, data []byte) kernels.Tensor {
	t.Helper()
	rb, err := typ.RowBytes(int64(cols))
	if err != nil {
		t.Fatal(err)
	}
	buf, err := be.Alloc(kernels.Label{Owner: "test", Cat: kernels.Scratch}, int64(rows)*rb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := be.Free(buf); err != nil {
			t.Error(err)
		}
	})
	x := kernels.NewTensor(buf, typ, rows, cols, 0)
	if data != nil {
		if err := be.Write(x, data); err != nil {
			t.Fatal(err)
		}
	}
	return x
}

// matMulProgram uploads the batch rows of x and compiles W [out, in]
// times them into Dst, which it returns with the program (the caller
// closes it).
func matMulProgram(t testing.TB, be *cpu.Backend, w kernels.Tensor, x []float32, batch int) (kernels.Program, kernels.Tensor) {
	t.Helper()
	X := upload(t, be, quant.F32, batch, w.Cols, kernels.F32Bytes(x))
	Dst := upload(t, be, quant.F32, batch, w.Rows, nil)
	p, err := be.Compile([]kernels.Op{kernels.MatMul{Dst: Dst, W: w, X: X}})
	if err != nil {
		t.Fatal(err)
	}
	return p, Dst
}

// matMul is W [out, in] times the batch rows of x, read back.
func matMul(t *testing.T, be *cpu.Backend, w kernels.Tensor, x []float32, batch int) []float32 {
	t.Helper()
	p, Dst := matMulProgram(t, be, w, x, batch)
	defer p.Close()
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := make([]float32, batch*w.Rows)
	if err := be.Read(kernels.F32Bytes(out), Dst); err != nil {
		t.Fatal(err)
	}
	return out
}

// BenchmarkMatMulVerify times a product with weights too big for any
// cache (about 64 MB, rows of 2048, as a 1.7B model's blocks) at the
// batch sizes of a speculative verification, on one and two threads.
// Decode (B=1) streams the weights from memory once; a verification of r
// rows should cost little more, its weights read once for all rows.
// Bytes/s counts the weights once per product: at B=1 against memory
// bandwidth, above it how far the batch shares each weight read.
// cpu-ns/op is the process's CPU time a product (on one thread what a
// loaded machine can compare, where wall time swings 2-5x).
func BenchmarkMatMulVerify(b *testing.B) {
	rng := rand.New(rand.NewPCG(9, 10))
	const n, size = 2048, 64 << 20
	for _, threads := range []int{1, 2} {
		be := newBackend(b, cpu.Options{Threads: threads})
		for _, wt := range []quant.Type{quant.Q4_K, quant.Q6_K, quant.Q8_0} {
			rb, err := wt.RowBytes(n)
			if err != nil {
				b.Fatal(err)
			}
			rows := int(size / rb)
			data := randomWeights(b, rng, wt, rows*n)
			w := upload(b, be, wt, rows, n, data)
			for _, batch := range []int{1, 2, 3, 4, 5, 8, 16} {
				b.Run(fmt.Sprintf("T%d/%v/B=%d", threads, wt, batch), func(b *testing.B) {
					x := make([]float32, batch*n)
					for i := range x {
						x[i] = float32(rng.NormFloat64())
					}
					p, _ := matMulProgram(b, be, w, x, batch)
					defer p.Close()
					b.SetBytes(int64(len(data)))
					cpu0 := processCPU()
					for b.Loop() {
						if err := p.Run(context.Background()); err != nil {
							b.Fatal(err)
						}
					}
					if cpu0 >= 0 {
						b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
					}
				})
			}
		}
	}
}
