package cuda

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/cpu"
	"github.com/tandem-run/tandem/kernels/quant"
)

// threads are the two ways backends make their driver calls: each on a
// thread of its own, or both on one shared Worker.
var threads = []struct {
	name   string
	shared bool
}{{"own threads", false}, {"shared thread", true}}

// openOn opens the GPU of ordinal as a backend named name, on w's thread
// (nil: its own), closed when the test ends.
func openOn(t testing.TB, ordinal int, name string, w *Worker) *Backend {
	o := testOptions()
	o.Ordinal, o.Name, o.Worker = ordinal, name, w
	return openGPUWith(t, o)
}

// sharedWorker is a Worker closed after the backends on it (cleanups run
// last-in first-out), or nil when shared is false.
func sharedWorker(t testing.TB, shared bool) *Worker {
	if !shared {
		return nil
	}
	w, err := NewWorker()
	if errors.Is(err, ErrNoDriver) || errors.Is(err, ErrNoDevice) {
		t.Skipf("no CUDA driver or device: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// openPair opens two virtual devices on GPU 0, each with its own stream.
func openPair(t testing.TB, shared bool) (*Backend, *Backend) {
	w := sharedWorker(t, shared)
	return openOn(t, 0, "cuda0", w), openOn(t, 0, "cuda0-b", w)
}

// openPeers opens GPUs 0 and 1, or skips on a machine with fewer, and logs
// whether each can reach the other's memory directly.
func openPeers(t testing.TB, shared bool) (*Backend, *Backend) {
	w := sharedWorker(t, shared)
	a := openOn(t, 0, "cuda0", w)
	if n, err := a.drv.deviceCount(); err != nil || n < 2 {
		t.Skipf("needs two GPUs: %d found (%v)", n, err)
	}
	b := openOn(t, 1, "cuda1", w)
	for _, p := range [][2]*Backend{{a, b}, {b, a}} {
		ok, err := p[0].drv.canAccessPeer(p[0].dev, p[1].dev)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s (%s) can reach %s directly: %v", p[0].name, p[0].info.Name, p[1].name, ok)
	}
	return a, b
}

// CopyFrom is ordered on both streams without a host wait: the copy sees
// the source's earlier programs and not its later ones, and the
// destination's later programs see the copy; between virtual devices of one
// GPU and, given two, between GPUs both ways; with the backends on threads
// of their own and on one shared thread.
func TestCopyFromOrdered(t *testing.T) {
	for _, th := range threads {
		t.Run(th.name, func(t *testing.T) {
			t.Run("virtual devices of GPU 0", func(t *testing.T) {
				checkCopyOrdered(t, func(t testing.TB) (*Backend, *Backend) { return openPair(t, th.shared) })
			})
			t.Run("GPU 0 to GPU 1", func(t *testing.T) {
				checkCopyOrdered(t, func(t testing.TB) (*Backend, *Backend) { return openPeers(t, th.shared) })
			})
			t.Run("GPU 1 to GPU 0", func(t *testing.T) {
				checkCopyOrdered(t, func(t testing.TB) (*Backend, *Backend) {
					a, b := openPeers(t, th.shared)
					return b, a
				})
			})
		})
	}
}

// checkCopyOrdered copies from the first backend open returns to the second.
func checkCopyOrdered(t *testing.T, open func(testing.TB) (*Backend, *Backend)) {
	a, b := open(t)
	host := cpu.New(cpu.Options{Threads: 1})
	defer host.Close()
	if !b.CanCopyFrom(a) || b.CanCopyFrom(host) {
		t.Fatal("CanCopyFrom: want CUDA backends only")
	}
	const n = 1 << 22 // long enough for the kernels to overlap a racing copy
	lbl := kernels.Label{Owner: "test", Cat: kernels.Scratch}
	x, y := deviceTensor(t, a, lbl, quant.F32, 1, n), deviceTensor(t, b, lbl, quant.F32, 1, n)
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

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// BenchmarkCopyFrom moves an activation row block between two virtual
// devices, the exchange of a tensor split: bytes/s of the copy with its
// two-stream ordering.
func BenchmarkCopyFrom(b *testing.B) {
	for _, th := range threads {
		b.Run(th.name, func(b *testing.B) {
			x, y := openPair(b, th.shared)
			benchCopy(b, x, y, 4*2048)
		})
	}
}

// BenchmarkPeerCopy moves bytes between GPUs 0 and 1, both ways, with the
// backends on threads of their own and on one: an 8B model's activation
// row (16 KiB, a decode step's exchange), a 512-token batch of them (8 MiB,
// a prefill's) and 256 MiB (the link's bandwidth). It skips on a machine
// with one GPU.
func BenchmarkPeerCopy(b *testing.B) {
	for _, th := range threads {
		b.Run(th.name, func(b *testing.B) {
			g0, g1 := openPeers(b, th.shared)
			for _, n := range []int64{16 << 10, 8 << 20, 256 << 20} {
				for _, dir := range []struct {
					name     string
					from, to *Backend
				}{{"0to1", g0, g1}, {"1to0", g1, g0}} {
					b.Run(fmt.Sprintf("%s/%dKiB", dir.name, n>>10), func(b *testing.B) { benchCopy(b, dir.from, dir.to, n) })
				}
			}
		})
	}
}

// benchCopy times CopyFrom of n bytes from one backend to another, in
// bytes/s; the copies queue without a host wait, as a forward pass's do.
func benchCopy(b *testing.B, from, to *Backend, n int64) {
	lbl := kernels.Label{Owner: "bench", Cat: kernels.Scratch}
	sb, err := from.Alloc(lbl, n)
	if err != nil {
		b.Fatal(err)
	}
	db, err := to.Alloc(lbl, n)
	if err != nil {
		b.Fatal(err)
	}
	src, dst := kernels.NewTensor(sb, quant.F32, 1, int(n/4), 0), kernels.NewTensor(db, quant.F32, 1, int(n/4), 0)
	b.SetBytes(n)
	b.ResetTimer()
	for range b.N {
		if err := to.CopyFrom(dst, from, src); err != nil {
			b.Fatal(err)
		}
	}
	if err := errors.Join(to.Sync(), from.Sync()); err != nil { // the copies are timed to their end
		b.Fatal(err)
	}
	b.StopTimer()
	if err := errors.Join(from.Free(sb), to.Free(db)); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPeerSetupMemory reports what the driver takes on each GPU,
// beyond the backends' own allocations, when GPUs 0 and 1 first exchange
// data (the first CopyFrom each way enables peer access): MiB-gpu0 and
// MiB-gpu1, memory the planner's per-GPU context figure must cover.
func BenchmarkPeerSetupMemory(b *testing.B) {
	g0, g1 := openPeers(b, false)
	lbl := kernels.Label{Owner: "bench", Cat: kernels.Scratch}
	const n = 16 << 10
	t := [2]kernels.Tensor{deviceTensor(b, g0, lbl, quant.F32, 1, n/4), deviceTensor(b, g1, lbl, quant.F32, 1, n/4)}
	free := func() (f [2]int64) {
		for i, be := range []*Backend{g0, g1} {
			var err error
			if f[i], _, err = be.MemoryInfo(); err != nil {
				b.Fatal(err)
			}
		}
		return f
	}
	before := free()
	for b.Loop() {
		must(b, g1.CopyFrom(t[1], g0, t[0]))
		must(b, g0.CopyFrom(t[0], g1, t[1]))
		must(b, errors.Join(g0.Sync(), g1.Sync()))
	}
	after := free()
	b.ReportMetric(float64(before[0]-after[0])/(1<<20), "MiB-gpu0")
	b.ReportMetric(float64(before[1]-after[1])/(1<<20), "MiB-gpu1")
}
