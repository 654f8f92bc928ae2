package cuda

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/cpu"
	"github.com/tandem-run/tandem/kernels/cuda/workspace"
	"github.com/tandem-run/tandem/kernels/quant"
	"github.com/tandem-run/tandem/kernels/synth"
)

// reduceRef is the all-reduce on the host: the valid shares added in member
// order, then added to a (nil: none).
func reduceRef(a []float32, shares [][]float32) []float32 {
	var sum []float32
	for _, s := range shares {
		switch {
		case s == nil:
		case sum == nil:
			sum = slices.Clone(s)
		default:
			for i, v := range s {
				sum[i] += v
			}
		}
	}
	if a != nil {
		for i := range sum {
			sum[i] = a[i] + sum[i]
		}
	}
	return sum
}

// openVirtual opens n virtual devices of GPU 0.
func openVirtual(t testing.TB, n int, shared bool) []*Backend {
	w := sharedWorker(t, shared)
	var out []*Backend
	for i := range n {
		out = append(out, openOn(t, 0, fmt.Sprintf("cuda0-%d", i), w))
	}
	return out
}

// newGroup joins bes into a reduce group, closed when the test ends.
func newGroup(t testing.TB, bes []*Backend) kernels.ReduceGroup {
	var members []kernels.Backend
	for _, be := range bes {
		members = append(members, be)
	}
	g, err := bes[0].Group(kernels.Label{Owner: "test", Cat: kernels.Staging}, members)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Error(err)
		}
	})
	return g
}

// AllReduce on virtual devices of one GPU (and on two GPUs where there
// are two) gives every member the host's sum to the bit, over shapes of
// one row (decode), a few (verification) and a batch (prefill), with a
// member that adds nothing, without a residual, and with views that are
// not 16-byte aligned; every program runs four times (eager, capture,
// replays) with new inputs each time, and its second reduce reads shares
// that the op before it overwrote after the first: the members must not
// run ahead of one another's reads. Members opened on threads of their
// own run on one once grouped; before that move, these cases hung now and
// then on own threads (kernels/cuda/NOTES.md, htp2).
func TestAllReduce(t *testing.T) {
	cases := []struct {
		name       string
		rows, cols int
		members    int
		idle       int  // a member without a share; -1: none
		residual   bool // A given
		offset     int  // elements: shares and Dst start this far into their buffers
	}{
		{"decode", 1, 4096, 2, -1, true, 0},
		{"verify rows", 5, 4096, 2, -1, true, 0},
		{"prefill", 512, 4096, 2, -1, true, 0},
		{"three, one idle", 3, 2048, 3, 1, true, 0},
		{"no residual", 2, 1024, 2, -1, false, 0},
		{"unaligned", 3, 1001, 2, -1, true, 1},
		{"four", 7, 4096, 4, 0, true, 0},
	}
	for _, th := range threads {
		for _, tc := range cases {
			t.Run(th.name+"/"+tc.name, func(t *testing.T) {
				checkAllReduce(t, openVirtual(t, tc.members, th.shared), tc.rows, tc.cols, tc.idle, tc.residual, tc.offset)
			})
		}
		t.Run(th.name+"/two GPUs", func(t *testing.T) {
			a, b := openPeers(t, th.shared)
			checkAllReduce(t, []*Backend{a, b}, 4, 4096, -1, true, 0)
		})
	}
}

func checkAllReduce(t *testing.T, bes []*Backend, rows, cols, idle int, residual bool, offset int) {
	g := newGroup(t, bes)
	rng := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
	lbl := kernels.Label{Owner: "test", Cat: kernels.Scratch}
	n := rows * cols
	tensor := func(be *Backend) kernels.Tensor {
		buf, err := be.Alloc(lbl, int64(4*(n+offset)))
		if err != nil {
			t.Fatal(err)
		}
		return kernels.NewTensor(buf, quant.F32, rows, cols, int64(4*offset))
	}
	type member struct {
		share, a, dst1, dst2 kernels.Tensor
		prog                 kernels.Program
	}
	ms := make([]member, len(bes))
	var shares []kernels.Tensor
	for i, be := range bes {
		m := &ms[i]
		m.share, m.dst1, m.dst2 = tensor(be), tensor(be), tensor(be)
		if residual {
			m.a = tensor(be)
		}
		if i == idle {
			shares = append(shares, kernels.Tensor{})
		} else {
			shares = append(shares, m.share)
		}
	}
	for i, be := range bes {
		m := &ms[i]
		ops := []kernels.Op{
			kernels.AllReduce{Dst: m.dst1, A: m.a, Shares: shares, Group: g},
			kernels.Scale{Dst: m.share, X: m.share, C: 2},
			kernels.AllReduce{Dst: m.dst2, A: m.a, Shares: shares, Group: g},
		}
		if !be.Supports(ops[0]) {
			t.Fatal("Supports: AllReduce of its own group refused")
		}
		p, err := be.Compile(ops)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		m.prog = p
	}
	random := func() []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	for run := range 4 {
		host := make([][]float32, len(bes))
		var as [][]float32
		for i, be := range bes {
			host[i] = random()
			if err := be.Write(ms[i].share, kernels.F32Bytes(host[i])); err != nil {
				t.Fatal(err)
			}
			var a []float32
			if residual {
				a = random()
				if err := be.Write(ms[i].a, kernels.F32Bytes(a)); err != nil {
					t.Fatal(err)
				}
			}
			as = append(as, a)
			if i == idle {
				host[i] = nil
			}
		}
		for i := range bes {
			if err := ms[i].prog.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		doubled := make([][]float32, len(host))
		for i, s := range host {
			if s != nil {
				doubled[i] = make([]float32, n)
				for j, v := range s {
					doubled[i][j] = 2 * v
				}
			}
		}
		for i, be := range bes {
			for k, want := range [][]float32{reduceRef(as[i], host), reduceRef(as[i], doubled)} {
				got := make([]float32, n)
				dst := ms[i].dst1
				if k == 1 {
					dst = ms[i].dst2
				}
				if err := be.Read(kernels.F32Bytes(got), dst); err != nil {
					t.Fatal(err)
				}
				for j := range got {
					if got[j] != want[j] {
						t.Fatalf("run %d, member %d, reduce %d: element %d is %g, want %g", run, i, k+1, j, got[j], want[j])
					}
				}
			}
		}
	}
}

// A group refuses what it cannot serve: a CPU member, a backend twice, a
// group that leaves the caller out; and an AllReduce of another group's
// does not compile on a backend outside it.
func TestGroupRefusals(t *testing.T) {
	bes := openVirtual(t, 3, false)
	host := cpu.New(cpu.Options{Threads: 1})
	defer host.Close()
	lbl := kernels.Label{Owner: "test", Cat: kernels.Staging}
	for name, members := range map[string][]kernels.Backend{
		"cpu member": {bes[0], host},
		"twice":      {bes[0], bes[0]},
		"not in it":  {bes[1], bes[2]},
		"none":       nil,
	} {
		if _, err := bes[0].Group(lbl, members); err == nil {
			t.Errorf("%s: group made", name)
		}
	}
	g := newGroup(t, bes[:2])
	buf, err := bes[2].Alloc(kernels.Label{Owner: "test", Cat: kernels.Scratch}, 2*4*64)
	if err != nil {
		t.Fatal(err)
	}
	x, y := kernels.NewTensor(buf, quant.F32, 1, 64, 0), kernels.NewTensor(buf, quant.F32, 1, 64, 4*64)
	op := kernels.AllReduce{Dst: x, Shares: []kernels.Tensor{y, {}}, Group: g}
	if bes[2].Supports(op) {
		t.Error("Supports: AllReduce outside its group")
	}
	if _, err := bes[2].Compile([]kernels.Op{op}); !errors.Is(err, kernels.ErrUnsupported) {
		t.Errorf("Compile outside the group: %v, want ErrUnsupported", err)
	}
}

// BenchmarkAllReduce times back-to-back reduces of a decode row and of a
// prefill batch of the 8B shape (n_embd 4096) over two virtual devices of
// one GPU, and over two GPUs where there are two. Bytes are what a member
// reads and writes (its residual, every share, its output): on one GPU the
// roofline is the device's memory, on two the latency of a flag's round
// trip and then NVLink's bandwidth for the peer's share.
func BenchmarkAllReduce(b *testing.B) {
	for _, rows := range []int{1, 8, 512} {
		b.Run(fmt.Sprintf("virtual/rows=%d", rows), func(b *testing.B) { benchAllReduce(b, openVirtual(b, 2, false), rows) })
		b.Run(fmt.Sprintf("gpus/rows=%d", rows), func(b *testing.B) {
			x, y := openPeers(b, false)
			benchAllReduce(b, []*Backend{x, y}, rows)
		})
	}
}

func benchAllReduce(b *testing.B, bes []*Backend, rows int) {
	const cols, reduces = 4096, 32
	g := newGroup(b, bes)
	rng := rand.New(rand.NewPCG(3, 4))
	lbl := kernels.Label{Owner: "bench", Cat: kernels.Scratch}
	var progs []kernels.Program
	var shares []kernels.Tensor
	xs := make([]kernels.Tensor, len(bes))
	for i, be := range bes {
		buf, err := be.Alloc(lbl, int64(4*rows*cols))
		if err != nil {
			b.Fatal(err)
		}
		s := kernels.NewTensor(buf, quant.F32, rows, cols, 0)
		v := make([]float32, rows*cols)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		if err := be.Write(s, kernels.F32Bytes(v)); err != nil {
			b.Fatal(err)
		}
		shares = append(shares, s)
		xb, err := be.Alloc(lbl, int64(4*rows*cols))
		if err != nil {
			b.Fatal(err)
		}
		xs[i] = kernels.NewTensor(xb, quant.F32, rows, cols, 0)
	}
	for i, be := range bes {
		var ops []kernels.Op
		for range reduces {
			ops = append(ops, kernels.AllReduce{Dst: xs[i], A: xs[i], Shares: shares, Group: g})
		}
		p, err := be.Compile(ops)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { p.Close() })
		progs = append(progs, p)
	}
	run := func() {
		for _, p := range progs {
			if err := p.Run(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
	}
	for range 3 { // eager, capture, replay
		run()
	}
	for _, be := range bes {
		if err := be.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(reduces * 4 * rows * cols * (len(bes) + 2)))
	b.ResetTimer()
	for range b.N {
		run()
	}
	for _, be := range bes {
		if err := be.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/reduces/1e3, "us/reduce")
}

// A reduce's blocks a member leave one multiprocessor free of waiting
// blocks on a GPU that hosts several members, and every member of a group
// gets the same limit.
func TestBlockLimit(t *testing.T) {
	h200 := func(ordinal int) DeviceInfo { return DeviceInfo{Ordinal: ordinal, Multiprocessors: 132} }
	for _, c := range []struct {
		name    string
		members []DeviceInfo
		want    int
	}{
		{"two GPUs", []DeviceInfo{h200(0), h200(1)}, reduceBlocks},
		{"two virtual", []DeviceInfo{h200(0), h200(0)}, reduceBlocks}, // 131/2 is more
		{"three virtual", []DeviceInfo{h200(0), h200(0), h200(0)}, 131 / 3},
		{"eight virtual", []DeviceInfo{h200(0), h200(0), h200(0), h200(0), h200(0), h200(0), h200(0), h200(0)}, 131 / 8},
		{"two on GPU 1, one on GPU 0", []DeviceInfo{h200(0), h200(1), h200(1)}, reduceBlocks},
		{"four on a small GPU", []DeviceInfo{{Multiprocessors: 3}, {Multiprocessors: 3}, {Multiprocessors: 3}, {Multiprocessors: 3}}, 1},
	} {
		got := blockLimit(c.members)
		if got != c.want {
			t.Errorf("%s: %d blocks, want %d", c.name, got, c.want)
		}
	}
}

// The launch order that hung before the members shared a thread, forced:
// member 0's reduce is launched and waits on the device for member 1's,
// and the host waits on member 0 (and on member 1) before running member
// 1's program. Every member now makes its calls on the group's one thread,
// and those waits are refused with ErrReduceOpen at once instead of
// waiting forever; once member 1's program runs, both get the sum.
func TestAllReduceOpenRound(t *testing.T) {
	for _, th := range threads {
		t.Run(th.name, func(t *testing.T) {
			bes := openVirtual(t, 2, th.shared)
			g := newGroup(t, bes)
			if bes[0].w != bes[1].w {
				t.Fatal("the group's members make their calls on different threads")
			}
			const n = 4096
			rng := rand.New(rand.NewPCG(5, 6))
			lbl := kernels.Label{Owner: "test", Cat: kernels.Scratch}
			var shares, dsts []kernels.Tensor
			var host [][]float32
			for _, be := range bes {
				buf, err := be.Alloc(lbl, 2*4*n)
				if err != nil {
					t.Fatal(err)
				}
				s, d := kernels.NewTensor(buf, quant.F32, 1, n, 0), kernels.NewTensor(buf, quant.F32, 1, n, 4*n)
				v := make([]float32, n)
				for i := range v {
					v[i] = float32(rng.NormFloat64())
				}
				if err := be.Write(s, kernels.F32Bytes(v)); err != nil {
					t.Fatal(err)
				}
				shares, dsts, host = append(shares, s), append(dsts, d), append(host, v)
			}
			var progs []kernels.Program
			for i, be := range bes {
				p, err := be.Compile([]kernels.Op{kernels.AllReduce{Dst: dsts[i], Shares: shares, Group: g}})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { p.Close() })
				progs = append(progs, p)
			}
			if err := progs[0].Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := make([]float32, n)
			if err := bes[0].Read(kernels.F32Bytes(got), dsts[0]); !errors.Is(err, ErrReduceOpen) {
				t.Errorf("Read on member 0 before member 1's program: %v, want ErrReduceOpen", err)
			}
			if err := bes[1].Sync(); !errors.Is(err, ErrReduceOpen) {
				t.Errorf("Sync of member 1 before its program: %v, want ErrReduceOpen", err)
			}
			if err := progs[1].Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			want := reduceRef(nil, host)
			for i, be := range bes {
				if err := be.Read(kernels.F32Bytes(got), dsts[i]); err != nil {
					t.Fatalf("member %d after both programs: %v", i, err)
				}
				for j := range got {
					if got[j] != want[j] {
						t.Fatalf("member %d: element %d is %g, want %g", i, j, got[j], want[j])
					}
				}
			}
		})
	}
}

// A group's rounds (group.Run) over programs of two row counts, run in
// turns, with each member's workspace grown between some rounds, so that
// rounds go eager, capture, replay, and then rebuild and capture again
// with the old graphs destroyed inside a round: every member gets the
// sum of the members' products, in member order, to the bit, each round.
// The hang this guards against (engine/model's tensor split, greedy rounds
// then sampled ones) left a graph's instantiation or destruction for one
// member between two members' launches.
func TestGroupRun(t *testing.T) {
	bes := openVirtual(t, 2, false)
	g := newGroup(t, bes)
	const cols, out = 256, 512
	rng := rand.New(rand.NewPCG(7, 8))
	lbl := kernels.Label{Owner: "test", Cat: kernels.Scratch}
	alloc := func(be *Backend, typ quant.Type, rows, cols int) kernels.Tensor {
		t.Helper()
		shape := kernels.Tensor{Type: typ, Rows: rows, Cols: cols}
		buf, err := be.Alloc(lbl, shape.RowBytes()*int64(rows))
		if err != nil {
			t.Fatal(err)
		}
		return kernels.NewTensor(buf, typ, rows, cols, 0)
	}
	type member struct{ w, x, y, dst kernels.Tensor }
	const most = 9
	ms := make([]member, len(bes))
	for i, be := range bes {
		m := &ms[i]
		m.w, m.x = alloc(be, quant.Q8_0, out, cols), alloc(be, quant.F32, most, cols)
		m.y, m.dst = alloc(be, quant.F32, most, out), alloc(be, quant.F32, most, out)
		w := make([]byte, m.w.Bytes())
		if err := synth.Fill(rng, quant.Q8_0, w, 0.1); err != nil {
			t.Fatal(err)
		}
		if err := be.Write(m.w, w); err != nil {
			t.Fatal(err)
		}
	}
	progs := map[int][]kernels.Program{}
	for _, rows := range []int{1, most} {
		var shares []kernels.Tensor
		for i := range bes {
			shares = append(shares, ms[i].y.RowSlice(0, rows))
		}
		for i, be := range bes {
			m := ms[i]
			p, err := be.Compile([]kernels.Op{
				kernels.MatMul{Dst: m.y.RowSlice(0, rows), W: m.w, X: m.x.RowSlice(0, rows)},
				kernels.AllReduce{Dst: m.dst.RowSlice(0, rows), Shares: shares, Group: g},
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			progs[rows] = append(progs[rows], p)
		}
	}
	grow := func() {
		for _, be := range bes {
			s := be.scratch.sizes
			s[workspace.Q8] += 1 << 12
			if err := be.Reserve(s); err != nil {
				t.Fatal(err)
			}
		}
	}
	for round, rows := range []int{1, 1, 1, most, most, most, 0, 1, most, 1, most, 0, most, 1, 1} {
		if rows == 0 {
			grow()
			continue
		}
		for i, be := range bes {
			x := make([]float32, rows*cols)
			for j := range x {
				x[j] = float32(rng.NormFloat64())
			}
			if err := be.Write(ms[i].x.RowSlice(0, rows), kernels.F32Bytes(x)); err != nil {
				t.Fatal(err)
			}
		}
		if err := g.Run(context.Background(), progs[rows]); err != nil {
			t.Fatalf("round %d (%d rows): %v", round, rows, err)
		}
		shares := make([][]float32, len(bes))
		for i, be := range bes {
			shares[i] = make([]float32, rows*out)
			if err := be.Read(kernels.F32Bytes(shares[i]), ms[i].y.RowSlice(0, rows)); err != nil {
				t.Fatalf("round %d (%d rows): %v", round, rows, err)
			}
		}
		want := reduceRef(nil, shares)
		for i, be := range bes {
			got := make([]float32, rows*out)
			if err := be.Read(kernels.F32Bytes(got), ms[i].dst.RowSlice(0, rows)); err != nil {
				t.Fatal(err)
			}
			for j := range got {
				if got[j] != want[j] {
					t.Fatalf("round %d (%d rows), member %d: element %d is %g, want %g", round, rows, i, j, got[j], want[j])
				}
			}
		}
	}
	if err := g.Run(context.Background(), progs[1][:1]); !errors.Is(err, kernels.ErrShape) {
		t.Errorf("a round of one program for two members: %v, want ErrShape", err)
	}
	swapped := []kernels.Program{progs[1][1], progs[1][0]}
	if err := g.Run(context.Background(), swapped); !errors.Is(err, kernels.ErrForeignBuffer) {
		t.Errorf("a round with each member's program in the other's place: %v, want ErrForeignBuffer", err)
	}
}

// A reduce whose peer never comes gives the round up after the group's
// timeout instead of trapping: the next call the host waits for reports
// ErrReduceStuck, the CUDA context lives on, and the group's next round
// sums right, its flags started anew. The peer is made missing with
// programs that disagree: member 0 reduces 1024 elements (one block),
// member 1 4096 (four), so member 1's blocks 1-3 wait for blocks of
// member 0 that never run.
func TestAllReduceGivesUp(t *testing.T) {
	bes := openVirtual(t, 2, false)
	g := newGroup(t, bes)
	g.(*group).timeout = 50 * time.Millisecond
	const small, large = 1024, 4096
	rng := rand.New(rand.NewPCG(9, 10))
	lbl := kernels.Label{Owner: "test", Cat: kernels.Scratch}
	var shares, dsts []kernels.Tensor
	for _, be := range bes {
		buf, err := be.Alloc(lbl, 2*4*large)
		if err != nil {
			t.Fatal(err)
		}
		shares = append(shares, kernels.NewTensor(buf, quant.F32, 1, large, 0))
		dsts = append(dsts, kernels.NewTensor(buf, quant.F32, 1, large, 4*large))
	}
	compile := func(i, n int) kernels.Program {
		t.Helper()
		p, err := bes[i].Compile([]kernels.Op{kernels.AllReduce{Dst: dsts[i].ColSlice(0, n),
			Shares: []kernels.Tensor{shares[0].ColSlice(0, n), shares[1].ColSlice(0, n)}, Group: g}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	if err := g.Run(context.Background(), []kernels.Program{compile(0, small), compile(1, large)}); err != nil {
		t.Fatal(err)
	}
	err := bes[1].Sync()
	if !errors.Is(err, ErrReduceStuck) {
		t.Fatalf("Sync after a round member 0 left short: %v, want ErrReduceStuck", err)
	}
	t.Log(err)
	host := make([][]float32, len(bes))
	for i, be := range bes {
		host[i] = make([]float32, large)
		for j := range host[i] {
			host[i][j] = float32(rng.NormFloat64())
		}
		if err := be.Write(shares[i], kernels.F32Bytes(host[i])); err != nil {
			t.Fatal(err)
		}
	}
	progs := []kernels.Program{compile(0, large), compile(1, large)}
	want := reduceRef(nil, host)
	for round := range 3 { // eager, capture, replay
		if err := g.Run(context.Background(), progs); err != nil {
			t.Fatal(err)
		}
		for i, be := range bes {
			got := make([]float32, large)
			if err := be.Read(kernels.F32Bytes(got), dsts[i]); err != nil {
				t.Fatalf("round %d after the group started anew, member %d: %v", round, i, err)
			}
			for j := range got {
				if got[j] != want[j] {
					t.Fatalf("round %d after the group started anew, member %d: element %d is %g, want %g", round, i, j, got[j], want[j])
				}
			}
		}
	}
}
