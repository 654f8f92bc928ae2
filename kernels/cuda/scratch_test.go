package cuda

import (
	"fmt"
	"testing"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/cuda/workspace"
	"github.com/tandem-run/tandem/kernels/quant"
)

var workspaceLabel = kernels.Label{Owner: ScratchOwner, Cat: kernels.Scratch}

// Programs share one workspace. When a later program grows it, an earlier
// one, already captured as a graph, compiles again against the new buffer
// on its next run and still matches the CPU, eager, captured and replayed.
func TestWorkspaceShared(t *testing.T) {
	h := newHarness(t)
	const nHead, nKV, hd, nCtx = 8, 2, 64, 300
	k := h.random(quant.F16, nCtx, nKV*hd)
	v := h.random(quant.F16, nCtx, nKV*hd)
	wo := h.random(quant.Q8_0, 256, nHead*hd)
	type block struct {
		cp, gp         kernels.Program
		q, pos, y, out *pair
	}
	compile := func(batch int) *block {
		b := &block{
			q:   h.random(quant.F32, batch, nHead*hd),
			pos: h.ints(batch, func(i int) int32 { return int32(nCtx - batch + i) }),
			y:   h.output(quant.F32, batch, nHead*hd),
			out: h.output(quant.F32, batch, 256),
		}
		ops := func(s func(*pair) kernels.Tensor) []kernels.Op {
			return []kernels.Op{
				kernels.Attention{Dst: s(b.y), Q: s(b.q), K: s(k), V: s(v), Pos: s(b.pos), NHead: nHead, NKVHead: nKV, HeadDim: hd, Scale: 0.125},
				kernels.MatMul{Dst: s(b.out), W: s(wo), X: s(b.y)},
			}
		}
		var err error
		if b.cp, err = h.cpu.Compile(ops(func(p *pair) kernels.Tensor { return p.c })); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.cp.Close() })
		if b.gp, err = h.gpu.Compile(ops(func(p *pair) kernels.Tensor { return p.g })); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.gp.Close() })
		return b
	}
	run := func(b *block, rounds int, what string) {
		for r := range rounds {
			h.round(b.cp, b.gp, []*pair{b.q, k, v, b.pos, b.y, wo, b.out})
			h.expectClose(b.y, attentionTolerance(quant.F16), fmt.Sprintf("%s, round %d: attention", what, r))
			h.expectClose(b.out, matMulTolerance(quant.Q8_0, b.q.c.Rows), fmt.Sprintf("%s, round %d: o-projection", what, r))
		}
	}
	decode := compile(1)
	run(decode, 3, "decode")
	before := h.gpu.Usage()[workspaceLabel]
	wide := compile(8) // more items, more partials and counters, more rows to quantize
	after := h.gpu.Usage()[workspaceLabel]
	if after <= before {
		t.Fatalf("workspace %d bytes after a wider program, %d before: it did not grow", after, before)
	}
	run(wide, 3, "batch of 8")
	run(decode, 3, "decode after the workspace grew")
	if u := h.gpu.Usage()[workspaceLabel]; u != after {
		t.Errorf("workspace %d bytes, want %d: one region of each kind for all programs", u, after)
	}
}

// A workspace reserved from workspace.For holds what Compile needs for
// every batch up to the pass's rows: the planner's figure is an upper bound
// of the backend's, so a planned model never grows it.
func TestWorkspaceForBoundsCompile(t *testing.T) {
	gpu := openGPU(t)
	const embd, nHead, nKV, hd, ffn, nCtx, rows = 512, 8, 2, 64, 1536, 1000, 24
	pass := workspace.Pass{Rows: rows, Keys: nCtx, Heads: nHead, HeadDim: hd, Quantized: ffn}
	if err := gpu.Reserve(workspace.For(pass)); err != nil {
		t.Fatal(err)
	}
	reserved := gpu.Usage()[workspaceLabel]
	if want := workspace.For(pass).Total(); reserved != want {
		t.Fatalf("reserved %d bytes, want %d", reserved, want)
	}
	alloc := func(typ quant.Type, r, c int) kernels.Tensor { return deviceTensor(t, gpu, testLabel, typ, r, c) }
	wq, wo := alloc(quant.Q8_0, nHead*hd, embd), alloc(quant.Q6_K, embd, nHead*hd)
	wu, wd := alloc(quant.Q4_K, ffn, embd), alloc(quant.Q8_0, embd, ffn)
	norm := alloc(quant.F32, 1, embd)
	kc, vc := alloc(quant.F16, nCtx, nKV*hd), alloc(quant.F16, nCtx, nKV*hd)
	for b := 1; b <= rows; b++ {
		for _, heads := range []int{nHead, nHead / 2} { // a tensor split's share too
			x, xn := alloc(quant.F32, b, embd), alloc(quant.F32, b, embd)
			q, attn := alloc(quant.F32, b, heads*hd), alloc(quant.F32, b, heads*hd)
			gate, up := alloc(quant.F32, b, ffn), alloc(quant.F32, b, ffn)
			pos := alloc(quant.I32, 1, b)
			p, err := gpu.Compile([]kernels.Op{
				kernels.RMSNorm{Dst: xn, X: x, W: norm, Eps: 1e-6},
				kernels.MatMul{Dst: q, W: wq.RowSlice(0, heads*hd), X: xn},
				kernels.Attention{Dst: attn, Q: q, K: kc.ColSlice(0, heads/4*hd), V: vc.ColSlice(0, heads/4*hd), Pos: pos,
					NHead: heads, NKVHead: heads / 4, HeadDim: hd, Scale: 0.125},
				kernels.MatMul{Dst: x, W: wo.ColSlice(0, heads*hd), X: attn},
				kernels.MatMul{Dst: gate, W: wu, X: xn},
				kernels.MatMul{Dst: up, W: wu, X: xn},
				kernels.SwiGLU{Dst: up, Gate: gate, Up: up}, // gate, up and SwiGLU in one launch up to 8 rows
				kernels.MatMul{Dst: x, W: wd, X: up},
			})
			if err != nil {
				t.Fatalf("batch %d, %d heads: %v", b, heads, err)
			}
			p.Close()
			if u := gpu.Usage()[workspaceLabel]; u != reserved {
				t.Fatalf("batch %d, %d heads: the workspace grew from %d to %d bytes", b, heads, reserved, u)
			}
		}
	}
}
