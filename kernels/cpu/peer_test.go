package cpu_test

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/cpu"
	"github.com/tandem-run/tandem/kernels/quant"
)

// scratchTensor allocates a packed F32 [rows, cols] tensor on be.
func scratchTensor(t testing.TB, be *cpu.Backend, rows, cols int) kernels.Tensor {
	t.Helper()
	buf, err := be.Alloc(kernels.Label{Cat: kernels.Scratch}, int64(4*rows*cols))
	if err != nil {
		t.Fatal(err)
	}
	return kernels.NewTensor(buf, quant.F32, rows, cols, 0)
}

// CopyFrom moves rows between two CPU devices, refuses what is not its
// own kind of memory, and checks shapes and writability.
func TestCopyFrom(t *testing.T) {
	a, b := newBackend(t, cpu.Options{Name: "cpu0"}), newBackend(t, cpu.Options{Name: "cpu1"})
	if !b.CanCopyFrom(a) {
		t.Fatal("a CPU backend cannot copy from another")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	want := make([]float32, 6*8)
	for i := range want {
		want[i] = rng.Float32()*2 - 1
	}
	src, dst := scratchTensor(t, a, 6, 8), scratchTensor(t, b, 6, 8)
	if err := a.Write(src, kernels.F32Bytes(want)); err != nil {
		t.Fatal(err)
	}
	// Rows 1..3 only, into rows 2..4.
	if err := b.CopyFrom(dst.RowSlice(2, 3), a, src.RowSlice(1, 3)); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, len(want))
	if err := b.Read(kernels.F32Bytes(got), dst); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got[16:40], want[8:32]) || slices.ContainsFunc(got[:16], func(v float32) bool { return v != 0 }) ||
		slices.ContainsFunc(got[40:], func(v float32) bool { return v != 0 }) {
		t.Fatalf("rows after CopyFrom:\n got %v\nwant rows 1..3 of %v in rows 2..4", got, want)
	}
	if err := b.CopyFrom(dst, a, src.RowSlice(0, 5)); !errors.Is(err, kernels.ErrShape) {
		t.Errorf("copy of 5 rows into 6: %v, want ErrShape", err)
	}
	if err := b.CopyFrom(dst, b, src); !errors.Is(err, kernels.ErrForeignBuffer) {
		t.Errorf("copy naming the wrong source backend: %v, want ErrForeignBuffer", err)
	}
	w, err := b.Upload(kernels.Label{Cat: kernels.Weights}, make([]byte, 4*6*8))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.CopyFrom(kernels.NewTensor(w, quant.F32, 6, 8, 0), a, src); err == nil {
		t.Error("copy into uploaded weights succeeded")
	}
}

func BenchmarkCopyFrom(b *testing.B) {
	x, y := newBackend(b, cpu.Options{}), newBackend(b, cpu.Options{})
	src, dst := scratchTensor(b, x, 64, 2048), scratchTensor(b, y, 64, 2048)
	b.SetBytes(src.Bytes())
	for b.Loop() {
		if err := y.CopyFrom(dst, x, src); err != nil {
			b.Fatal(err)
		}
	}
}
