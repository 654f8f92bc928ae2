package cpu_test

import (
	"context"
	"errors"
	"testing"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/cpu"
	"github.com/tandem-run/tandem/kernels/kerneltest"
	"github.com/tandem-run/tandem/kernels/quant"
)

func newBackend(t testing.TB, opts cpu.Options) *cpu.Backend {
	be := cpu.New(opts)
	t.Cleanup(func() { be.Close() })
	return be
}

// TestOps checks every op against the float64 references, with one thread
// and with several (the parallel split must not change results).
func TestOps(t *testing.T) {
	for _, threads := range []int{1, 3} {
		t.Run(map[int]string{1: "serial", 3: "parallel"}[threads], func(t *testing.T) {
			kerneltest.Check(t, newBackend(t, cpu.Options{Threads: threads}))
		})
	}
}

func TestUsageAndLimit(t *testing.T) {
	be := newBackend(t, cpu.Options{MemoryLimit: 1000})
	kv := kernels.Label{Owner: "target", Cat: kernels.KV}
	a, err := be.Alloc(kv, 600)
	if err != nil {
		t.Fatal(err)
	}
	weights := make([]byte, 300)
	if _, err := be.Upload(kernels.Label{Owner: "target", Cat: kernels.Weights}, weights); err != nil {
		t.Fatal(err)
	}
	if _, err := be.Alloc(kv, 200); !errors.Is(err, kernels.ErrOutOfMemory) {
		t.Fatalf("allocation past the cap: %v, want ErrOutOfMemory", err)
	}
	u := be.Usage()
	if u[kv] != 600 || u.Total() != 900 || u.Of("target") != 900 {
		t.Fatalf("usage %v", u)
	}
	if err := be.Free(a); err != nil {
		t.Fatal(err)
	}
	if err := be.Free(a); err == nil {
		t.Fatal("second Free of a buffer succeeded")
	}
	if be.Usage().Total() != 300 {
		t.Fatalf("usage after free %v", be.Usage())
	}
}

func TestForeignAndReadOnly(t *testing.T) {
	a, b := newBackend(t, cpu.Options{}), newBackend(t, cpu.Options{})
	buf, err := a.Alloc(kernels.Label{Cat: kernels.Scratch}, 16)
	if err != nil {
		t.Fatal(err)
	}
	x := kernels.NewTensor(buf, quant.F32, 1, 4, 0)
	if err := b.Write(x, make([]byte, 16)); !errors.Is(err, kernels.ErrForeignBuffer) {
		t.Fatalf("write through another backend: %v", err)
	}
	w, err := a.Upload(kernels.Label{Cat: kernels.Weights}, make([]byte, 16))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Write(kernels.NewTensor(w, quant.F32, 1, 4, 0), make([]byte, 16)); err == nil {
		t.Fatal("write into uploaded weights succeeded")
	}
}

// TestBadIndices: ids and positions arrive at run time; out-of-range ones
// are an error, never a panic or a stray write.
func TestBadIndices(t *testing.T) {
	be := newBackend(t, cpu.Options{})
	alloc := func(typ quant.Type, rows, cols int) kernels.Tensor {
		rb, _ := typ.RowBytes(int64(cols))
		buf, err := be.Alloc(kernels.Label{Cat: kernels.Scratch}, int64(rows)*rb)
		if err != nil {
			t.Fatal(err)
		}
		return kernels.NewTensor(buf, typ, rows, cols, 0)
	}
	table, dst, idx := alloc(quant.F32, 4, 8), alloc(quant.F32, 1, 8), alloc(quant.I32, 1, 1)
	if err := be.Write(idx, kernels.I32Bytes([]int32{4})); err != nil {
		t.Fatal(err)
	}
	for _, op := range []kernels.Op{
		kernels.GetRows{Dst: dst, Src: table, Idx: idx},
		kernels.SetRows{Dst: table, Src: dst, Idx: idx},
	} {
		p, err := be.Compile([]kernels.Op{op})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Run(context.Background()); !errors.Is(err, kernels.ErrShape) {
			t.Errorf("%s with index 4 of 4 rows: %v", op.Name(), err)
		}
	}
}

func TestCompileRejects(t *testing.T) {
	be := newBackend(t, cpu.Options{})
	buf, err := be.Alloc(kernels.Label{Cat: kernels.Scratch}, 64)
	if err != nil {
		t.Fatal(err)
	}
	x := kernels.NewTensor(buf, quant.F32, 2, 8, 0)
	for name, op := range map[string]kernels.Op{
		"shape":    kernels.Add{Dst: x, A: x, B: x.Reshape(4, 4)},
		"overrun":  kernels.Softmax{Dst: x, X: kernels.NewTensor(buf, quant.F32, 3, 8, 0)},
		"overlap":  kernels.MatMul{Dst: x, W: x, X: x},
		"type":     kernels.Argmax{Dst: x, X: x},
		"no input": kernels.RMSNorm{Dst: x, X: x},
	} {
		if _, err := be.Compile([]kernels.Op{op}); err == nil {
			t.Errorf("%s: compiled", name)
		}
	}
}

func TestCancel(t *testing.T) {
	be := newBackend(t, cpu.Options{})
	buf, err := be.Alloc(kernels.Label{Cat: kernels.Scratch}, 64)
	if err != nil {
		t.Fatal(err)
	}
	x := kernels.NewTensor(buf, quant.F32, 2, 8, 0)
	p, err := be.Compile([]kernels.Op{kernels.Softmax{Dst: x, X: x}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("run after cancel: %v", err)
	}
}

func BenchmarkOps(b *testing.B) {
	kerneltest.Bench(b, newBackend(b, cpu.Options{}))
}
