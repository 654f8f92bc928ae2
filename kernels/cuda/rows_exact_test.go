package cuda

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// rowsMatch compares a pass of B rows with B one-row passes bit for bit:
// it returns how many of the values differ and the largest difference
// relative to the largest one-row value.
func rowsMatch(many, one []byte) (differ int, worst float64) {
	var top float64
	for i := 0; i+4 <= len(one); i += 4 {
		v := float64(math.Float32frombits(binary.LittleEndian.Uint32(one[i:])))
		if math.IsNaN(v) { // a value no kernel wrote: never a match
			return len(one) / 4, math.Inf(1)
		}
		top = max(top, math.Abs(v))
	}
	for i := 0; i+4 <= len(one); i += 4 {
		a := math.Float32frombits(binary.LittleEndian.Uint32(many[i:]))
		b := math.Float32frombits(binary.LittleEndian.Uint32(one[i:]))
		if math.Float32bits(a) != math.Float32bits(b) {
			differ++
			worst = max(worst, math.Abs(float64(a-b))/max(top, 1e-30))
		}
	}
	return differ, worst
}

// exactRows runs ops on the GPU twice with the same inputs, once as built
// for a B-row pass and once as B one-row passes, and returns the output
// of each. build gets the row range: (0, B) for the pass, (b, 1) for each
// one-row pass.
func (h *harness) exactRows(batch int, operands []*pair, out *pair, build func(b0, n int) []kernels.Op) (many, one []byte) {
	h.t.Helper()
	for _, p := range operands {
		if p.gen != nil {
			if err := h.gpu.Write(p.g, p.gen()); err != nil {
				h.t.Fatal(err)
			}
		}
	}
	var singles []kernels.Op
	for b := 0; b < batch; b++ {
		singles = append(singles, build(b, 1)...)
	}
	run := func(ops []kernels.Op) []byte {
		if err := h.gpu.Write(out.g, nanBytes(out.g.Bytes())); err != nil {
			h.t.Fatal(err)
		}
		p, err := h.gpu.Compile(ops)
		if err != nil {
			h.t.Fatal(err)
		}
		defer p.Close()
		if err := p.Run(context.Background()); err != nil {
			h.t.Fatal(err)
		}
		if err := h.gpu.Sync(); err != nil {
			h.t.Fatal(err)
		}
		b := make([]byte, out.g.Bytes())
		if err := h.gpu.Read(b, out.g); err != nil {
			h.t.Fatal(err)
		}
		return b
	}
	return run(build(0, batch)), run(singles)
}

// Row b of a verification pass (2 to VerifyRows rows) is bit for bit what
// a one-row decode of the same position computes, for the products of
// every weight type the backend keeps decode's order for (Q4_K, Q6_K and
// Q8_0 on mvx_<type>, the generic types up to 8 rows) and for attention
// over F16, F32 and quantized caches: greedy speculation is then exactly
// the target alone. Where the default paths do not keep it (F16 products
// of several rows, which round the activations to F16 on tensor cores;
// the generic products above 8 rows), and on the tensor-core paths
// forced by MatVecRows 1 (the paths before this test), the differences
// are logged: they say which op a quantized target's speculation diverged
// at.
func TestRowsAsDecode(t *testing.T) {
	for _, o := range []struct {
		name    string
		opts    Options
		mvx     int // weight rows a block of mvx_q4_k (0: the default)
		mvxp    int // Options.MVXPairRows (0: the default, defaultMVXPairRows)
		exactly bool
	}{
		{"default", testOptions(), 0, 0, true},
		{"mvx32", testOptions(), 32, 0, true},
		{"mvx-unpaired", testOptions(), 0, -1, true},
		{"mvxp2", testOptions(), 0, 2, true},
		{"mvxp8", testOptions(), 0, 8, true},
		{"tensor-cores", Options{Kernels: testOptions().Kernels, MatVecRows: 1}, 0, 0, false},
	} {
		t.Run(o.name, func(t *testing.T) {
			h := newHarnessWith(t, o.opts)
			h.gpu.mvxRows, h.gpu.mvxpRows = o.mvx, o.mvxp
			for _, typ := range []quant.Type{quant.Q4_K, quant.Q6_K, quant.Q8_0, quant.Q5_0, quant.F16} {
				for _, s := range []struct{ rows, n int }{{96, 1024}, {100, 2560}, {64, 4096}} {
					for _, batch := range []int{2, 3, 4, 5, 8, 9, 16} {
						t.Run(fmt.Sprintf("%v/%dx%d/b%d", typ, s.rows, s.n, batch), func(t *testing.T) {
							h.t = t
							w := h.random(typ, s.rows, s.n)
							x := h.random(quant.F32, batch, s.n)
							y := h.output(quant.F32, batch, s.rows)
							many, one := h.exactRows(batch, []*pair{w, x, y}, y, func(b0, n int) []kernels.Op {
								return []kernels.Op{kernels.MatMul{Dst: y.g.RowSlice(b0, n), W: w.g, X: x.g.RowSlice(b0, n)}}
							})
							differ, worst := rowsMatch(many, one)
							path := pathOf(kernels.MatMul{Dst: y.g, W: w.g, X: x.g}, h.gpu.vecRows)
							keeps := path == pathMVX || path == pathQ8 || path == pathGeneric || path == pathF16Vec
							if differ > 0 && o.exactly && keeps {
								t.Errorf("path %d: %d of %d values differ from one-row passes (largest %.3g)", path, differ, batch*s.rows, worst)
							} else if differ > 0 {
								t.Logf("path %d: %d of %d values differ from one-row passes (largest %.3g)", path, differ, batch*s.rows, worst)
							}
						})
					}
				}
			}
			for _, c := range []struct {
				k, v            quant.Type
				hd, nHead, nKV  int
				firstPos, nKeys int
			}{
				{quant.F16, quant.F16, 128, 32, 8, 250, 4096},
				{quant.F16, quant.F16, 64, 6, 2, 20, 300},
				{quant.F32, quant.F32, 128, 8, 2, 100, 512},
				{quant.Q8_0, quant.Q8_0, 128, 16, 4, 500, 1024},
				{quant.Q4_0, quant.F16, 64, 6, 2, 40, 300},
			} {
				for _, batch := range []int{2, 4, 5, 8, 16} {
					t.Run(fmt.Sprintf("attention/%v-%v/hd%d/h%d-%d/pos%d/b%d", c.k, c.v, c.hd, c.nHead, c.nKV, c.firstPos, batch), func(t *testing.T) {
						h.t = t
						a := h.attention(attnShape{kType: c.k, vType: c.v, headDim: c.hd, rows: batch, nCtx: c.nKeys, nHead: c.nHead, nKV: c.nKV},
							h.positions(c.firstPos, c.nKeys))
						many, one := h.exactRows(batch, a.pairs(), a.y, func(b0, n int) []kernels.Op {
							return []kernels.Op{kernels.Attention{Dst: a.y.g.RowSlice(b0, n), Q: a.q.g.RowSlice(b0, n), K: a.k.g, V: a.v.g,
								Pos: a.pos.g.ColSlice(b0, n), NHead: c.nHead, NKVHead: c.nKV, HeadDim: c.hd,
								Scale: float32(1 / math.Sqrt(float64(c.hd)))}}
						})
						differ, worst := rowsMatch(many, one)
						if differ == 0 && bytes.Equal(many, one) {
							return
						}
						if o.exactly {
							t.Errorf("%d of %d values differ from one-row passes (largest %.3g)", differ, batch*c.nHead*c.hd, worst)
						} else {
							t.Logf("%d of %d values differ from one-row passes (largest %.3g)", differ, batch*c.nHead*c.hd, worst)
						}
					})
				}
			}
		})
	}
}
