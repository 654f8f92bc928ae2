package cuda

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/cpu"
	"github.com/tandem-run/tandem/kernels/quant"
)

// openPair opens two virtual devices on GPU 0, each with its own stream.
func openPair(t testing.TB) (*Backend, *Backend) {
	a := openGPU(t)
	o := testOptions()
	o.Name = "cuda0-b"
	b, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return a, b
}

// CopyFrom is ordered on both streams without a host wait: the copy sees
// the source's earlier programs and not its later ones, and the
// destination's later programs see the copy.
func TestCopyFromOrdered(t *testing.T) {
	a, b := openPair(t)
	host := cpu.New(cpu.Options{Threads: 1})
	defer host.Close()
	if !b.CanCopyFrom(a) || b.CanCopyFrom(host) {
		t.Fatal("CanCopyFrom: want CUDA backends only")
	}
	const n = 1 << 22 // long enough for the kernels to overlap a racing copy
	lbl := kernels.Label{Owner: "test", Cat: kernels.Scratch}
	alloc := func(be *Backend) kernels.Tensor {
		buf, err := be.Alloc(lbl, 4*n)
		if err != nil {
			t.Fatal(err)
		}
		return kernels.NewTensor(buf, quant.F32, 1, n, 0)
	}
	x, y := alloc(a), alloc(b)
	double := func(be *Backend, t0 kernels.Tensor) kernels.Program {
		p, err := be.Compile([]kernels.Op{kernels.Add{Dst: t0, A: t0, B: t0}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	da, db := double(a, x), double(b, y)
	rng := rand.New(rand.NewPCG(3, 4))
	v := make([]float32, n)
	ctx := context.Background()
	for round := range 6 { // eager, captured, replayed
		for i := range v {
			v[i] = rng.Float32()*2 - 1
		}
		if err := a.Write(x, kernels.F32Bytes(v)); err != nil {
			t.Fatal(err)
		}
		must(t, da.Run(ctx)) // x = 2v
		must(t, b.CopyFrom(y, a, x))
		must(t, da.Run(ctx)) // x = 4v, after the copy has read 2v
		must(t, da.Run(ctx)) // x = 8v
		must(t, db.Run(ctx)) // y = 4v, after the copy has landed
		got := make([]float32, n)
		must(t, b.Read(kernels.F32Bytes(got), y))
		for i := range got {
			if got[i] != 4*v[i] {
				t.Fatalf("round %d element %d: %v, want %v (4 x %v)", round, i, got[i], 4*v[i], v[i])
			}
		}
		must(t, a.Read(kernels.F32Bytes(got), x))
		if got[n-1] != 8*v[n-1] {
			t.Fatalf("round %d: source %v, want %v", round, got[n-1], 8*v[n-1])
		}
	}
	if err := b.CopyFrom(y, a, x.ColSlice(0, n/2)); !errors.Is(err, kernels.ErrShape) {
		t.Errorf("copy of half a row into a whole: %v, want ErrShape", err)
	}
	if err := b.CopyFrom(y, b, x); !errors.Is(err, kernels.ErrForeignBuffer) {
		t.Errorf("copy naming the wrong source backend: %v, want ErrForeignBuffer", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// BenchmarkCopyFrom moves an activation row block between two virtual
// devices, the exchange of a tensor split: bytes/s of the copy with its
// two-stream ordering.
func BenchmarkCopyFrom(b *testing.B) {
	x, y := openPair(b)
	lbl := kernels.Label{Owner: "bench", Cat: kernels.Scratch}
	const rows, cols = 1, 2048
	sb, err := x.Alloc(lbl, 4*rows*cols)
	if err != nil {
		b.Fatal(err)
	}
	db, err := y.Alloc(lbl, 4*rows*cols)
	if err != nil {
		b.Fatal(err)
	}
	src, dst := kernels.NewTensor(sb, quant.F32, rows, cols, 0), kernels.NewTensor(db, quant.F32, rows, cols, 0)
	b.SetBytes(src.Bytes())
	for b.Loop() {
		if err := y.CopyFrom(dst, x, src); err != nil {
			b.Fatal(err)
		}
	}
	if err := y.Sync(); err != nil {
		b.Fatal(err)
	}
}
