package cpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// seqRows is one sequence of a several-sequence attention test: n query
// rows from position pos in slot slot.
type seqRows struct{ slot, pos, n int }

// TestAttentionSeqsIsPerSequence: one Attention over the rows of several
// sequences (Rows set, each in its own slot of the caches) gives each row
// the bits of an Attention of its sequence alone on that slot, for every
// cache type, with and without a sliding window.
func TestAttentionSeqsIsPerSequence(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	const slots, ctx, heads, kvHeads, hd = 3, 40, 6, 2, 64
	seqs := []seqRows{{slot: 2, pos: 39, n: 1}, {slot: 0, pos: 10, n: 3}, {slot: 1, pos: 0, n: 2}, {slot: 1, pos: 20, n: 1}}
	for _, threads := range []int{1, 2} {
		be := New(Options{Threads: threads})
		defer be.Close()
		for _, typ := range []quant.Type{quant.F32, quant.F16, quant.Q8_0, quant.Q4_0} {
			for _, window := range []int{0, 5} {
				name := fmt.Sprintf("threads=%d %v window=%d", threads, typ, window)
				K, V := randomCache(t, be, rng, typ, slots*ctx, kvHeads*hd), randomCache(t, be, rng, typ, slots*ctx, kvHeads*hd)
				b := 0
				var pos, rows []int32
				for _, s := range seqs {
					for i := range s.n {
						pos, rows = append(pos, int32(s.pos+i)), append(rows, int32(s.slot*ctx+s.pos+i))
					}
					b += s.n
				}
				Q := randomF32(t, be, rng, b, heads*hd)
				P := upload(t, be, quant.I32, 1, b, kernels.I32Bytes(pos))
				R := upload(t, be, quant.I32, 1, b, kernels.I32Bytes(rows))
				all := upload(t, be, quant.F32, b, heads*hd, make([]byte, 4*b*heads*hd))
				one := upload(t, be, quant.F32, b, heads*hd, make([]byte, 4*b*heads*hd))
				op := kernels.Attention{Dst: all, Q: Q, K: K, V: V, Pos: P, Rows: R, Ctx: ctx,
					NHead: heads, NKVHead: kvHeads, HeadDim: hd, Scale: 0.125, Window: window}
				ops := []kernels.Op{op}
				row := 0
				for _, s := range seqs {
					ops = append(ops, kernels.Attention{Dst: one.RowSlice(row, s.n), Q: Q.RowSlice(row, s.n),
						K: K.RowSlice(s.slot*ctx, ctx), V: V.RowSlice(s.slot*ctx, ctx), Pos: P.ColSlice(row, s.n),
						NHead: heads, NKVHead: kvHeads, HeadDim: hd, Scale: 0.125, Window: window})
					row += s.n
				}
				runOps(t, be, ops)
				got, want := readF32(t, be, all), readF32(t, be, one)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s: row %d element %d = %g, alone %g", name, i/(heads*hd), i%(heads*hd), got[i], want[i])
					}
				}
				if slices.Max(got) == 0 {
					t.Fatalf("%s: no output", name)
				}
			}
		}
	}
}

// TestAttentionSeqsRefusesBadRows: a row whose key is not at its
// position's row of a slot, and slots that do not divide the cache, are
// errors, not reads of another sequence's keys.
func TestAttentionSeqsRefusesBadRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	be := New(Options{Threads: 1})
	defer be.Close()
	const ctx, hd = 16, 32
	K, V := randomCache(t, be, rng, quant.F32, 2*ctx, hd), randomCache(t, be, rng, quant.F32, 2*ctx, hd)
	Q := randomF32(t, be, rng, 1, hd)
	Y := upload(t, be, quant.F32, 1, hd, make([]byte, 4*hd))
	P := upload(t, be, quant.I32, 1, 1, kernels.I32Bytes([]int32{3}))
	op := kernels.Attention{Dst: Y, Q: Q, K: K, V: V, Pos: P, NHead: 1, NKVHead: 1, HeadDim: hd, Scale: 0.1, Ctx: ctx}
	for _, r := range []int32{2, 20, 35, -1} {
		op.Rows = upload(t, be, quant.I32, 1, 1, kernels.I32Bytes([]int32{r}))
		p, err := be.Compile([]kernels.Op{op})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Run(context.Background()); !errors.Is(err, kernels.ErrShape) {
			t.Errorf("key row %d at position 3: %v, want ErrShape", r, err)
		}
		p.Close()
	}
	op.Ctx = 10
	if _, err := be.Compile([]kernels.Op{op}); !errors.Is(err, kernels.ErrShape) {
		t.Errorf("slots of 10 rows in a cache of 32: %v, want ErrShape", err)
	}
}

// randomCache is a cache of rows x cols random values (never zero) of type typ.
func randomCache(t *testing.T, be *Backend, rng *rand.Rand, typ quant.Type, rows, cols int) kernels.Tensor {
	t.Helper()
	x := make([]float32, rows*cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64()) + 0.01
	}
	rb, _ := typ.RowBytes(int64(cols))
	data := make([]byte, int64(rows)*rb)
	for r := range rows {
		if err := quant.Quantize(typ, x[r*cols:(r+1)*cols], data[int64(r)*rb:int64(r+1)*rb]); err != nil {
			t.Fatal(err)
		}
	}
	return upload(t, be, typ, rows, cols, data)
}

func randomF32(t *testing.T, be *Backend, rng *rand.Rand, rows, cols int) kernels.Tensor {
	t.Helper()
	x := make([]float32, rows*cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64()) + 0.01
	}
	return upload(t, be, quant.F32, rows, cols, kernels.F32Bytes(x))
}

func runOps(t *testing.T, be *Backend, ops []kernels.Op) {
	t.Helper()
	p, err := be.Compile(ops)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func readF32(t *testing.T, be *Backend, x kernels.Tensor) []float32 {
	t.Helper()
	out := make([]float32, x.Rows*x.Cols)
	if err := be.Read(kernels.F32Bytes(out), x); err != nil {
		t.Fatal(err)
	}
	return out
}
