package cpu

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// TestRopeSharedAngles: rope ops of one program that rotate by the same
// positions share their angles, also between runs; each gives the bits of
// the op compiled alone, when the positions repeat and when they change.
func TestRopeSharedAngles(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	be := New(Options{Threads: 2})
	defer be.Close()
	const rows, hd = 9, 64
	read := func(x kernels.Tensor) []uint32 {
		b := make([]byte, x.Bytes())
		if err := be.Read(b, x); err != nil {
			t.Fatal(err)
		}
		out := make([]uint32, len(b)/4)
		for i := range out {
			out[i] = uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24
		}
		return out
	}
	x := make([]float32, rows*3*hd)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	P := upload(t, be, quant.I32, 1, rows, kernels.I32Bytes(make([]int32, rows)))
	zeros := func(cols int) kernels.Tensor { return upload(t, be, quant.F32, rows, cols, make([]byte, 4*rows*cols)) }
	q, k, qa, ka := zeros(2*hd), zeros(hd), zeros(2*hd), zeros(hd)
	rope := func(dst, src kernels.Tensor) kernels.Rope {
		return kernels.Rope{Dst: dst, X: src, Pos: P, HeadDim: hd, Dims: hd, Base: 1e6, Scale: 1, Neox: true}
	}
	src := func(cols int, off int) kernels.Tensor {
		return upload(t, be, quant.F32, rows, cols, kernels.F32Bytes(x[off:off+rows*cols]))
	}
	qs, ks := src(2*hd, 0), src(hd, rows*2*hd)
	both, err := be.Compile([]kernels.Op{rope(q, qs), rope(k, ks)})
	if err != nil {
		t.Fatal(err)
	}
	alone := func(op kernels.Op) kernels.Program {
		p, err := be.Compile([]kernels.Op{op})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	ctx := context.Background()
	pos := make([]int32, rows)
	for run := range 4 {
		switch run {
		case 0, 3:
			for i := range pos {
				pos[i] = int32(rng.IntN(5000))
			}
		case 2:
			pos[rows-1]++ // one position changed; run 1 repeats run 0's
		}
		if err := be.Write(P, kernels.I32Bytes(pos)); err != nil {
			t.Fatal(err)
		}
		// The ops alone, compiled afresh: nothing kept from other runs.
		for _, p := range []kernels.Program{both, alone(rope(qa, qs)), alone(rope(ka, ks))} {
			if err := p.Run(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range [][2]kernels.Tensor{{q, qa}, {k, ka}} {
			got, want := read(c[0]), read(c[1])
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("run %d element %d: %g, alone %g", run, i, math.Float32frombits(got[i]), math.Float32frombits(want[i]))
				}
			}
		}
	}
}
