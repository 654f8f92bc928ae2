package model

import (
	"context"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/kernels"
)

// Experts apart (plan.ExpertsOnDevice, llama.cpp's --cpu-moe): a
// mixture-of-experts model keeps its routed experts, and the router that
// picks them, on one device of their own, the host's memory in practice,
// while attention, norms, embedding and head stay on the GPUs. Each block
// then runs in three programs: attention, residual and the FFN norm where
// the block is; the norm's output crosses to the expert device, which runs
// the routed experts; their output crosses back and is added to the
// stream. The activations cross once each way per block, b rows of n_embd.

// expertSegment runs blocks seg of pt with their experts on m.experts.
// first says the segment's input arrived in pt's receive buffer; inline
// that the token lookup opens block 0's program (inlineEmbedding).
func (m *Model) expertSegment(ctx context.Context, pt *part, seg [2]int, b int, first, inline bool) error {
	p, e := m.params, m.experts
	for l := seg[0]; l < seg[1]; l++ {
		err := pt.progs.run(ctx, progKey{kind: progStage, block: l, n: b, seqs: m.layout}, func() []kernels.Op {
			x, h := pt.s.x.RowSlice(0, b), pt.s.xn.RowSlice(0, b)
			var ops []kernels.Op
			switch {
			case l == seg[0] && first:
				ops = append(ops, kernels.Copy{Dst: x, Src: pt.s.recv.RowSlice(0, b)})
			case l == 0 && inline:
				ops = append(ops, kernels.GetRows{Dst: x, Src: pt.w.tokEmbd, Idx: pt.s.tokens.ColSlice(0, b)})
				ops = append(ops, m.embedScale(x)...)
			}
			ops = append(ops, m.captureOps(pt, l, x)...)
			ops = append(ops, m.attnOps(pt, l, b)...)
			return append(ops,
				kernels.Add{Dst: x, A: x, B: h},
				kernels.RMSNorm{Dst: h, X: x, W: pt.w.blocks[l].ffnNorm, Eps: p.NormEps})
		})
		if err != nil {
			return err
		}
		if err := m.spread(pt, pt.s.xn.RowSlice(0, b), []*part{e}); err != nil {
			return err
		}
		err = e.progs.run(ctx, progKey{kind: progExperts, block: l, n: b}, func() []kernels.Op {
			w := e.w.blocks[l]
			return []kernels.Op{kernels.MoE{Dst: e.s.xn.RowSlice(0, b), X: e.s.recv.RowSlice(0, b),
				Router: w.router, Gate: w.gate, Up: w.up, Down: w.down,
				Experts: p.Experts, Used: p.ExpertsUsed, Renorm: true}}
		})
		if err != nil {
			return err
		}
		if err := m.spread(e, e.s.xn.RowSlice(0, b), []*part{pt}); err != nil {
			return err
		}
		err = pt.progs.run(ctx, progKey{kind: progResidual, block: l, n: b}, func() []kernels.Op {
			x := pt.s.x.RowSlice(0, b)
			ops := []kernels.Op{kernels.Add{Dst: x, A: x, B: pt.s.recv.RowSlice(0, b)}}
			if l == p.Layers-1 {
				ops = append(ops, m.captureOps(pt, p.Layers, x)...)
			}
			return ops
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// checkTensors checks the architecture's tensors against the backends
// that will use them (checkTensors): with the experts apart, the expert
// tensors and router against the expert device only, so a GPU without the
// MoE op runs the rest.
func (m *Model) checkTensors(f *gguf.File, p Params, bes []kernels.Backend) error {
	specs := p.specs(&weights{})
	if m.experts == nil {
		return checkTensors(f, specs, bes)
	}
	var rest, experts []tensorSpec
	for _, s := range specs {
		if _, ok := s.use.(kernels.MoE); ok {
			experts = append(experts, s)
		} else {
			rest = append(rest, s)
		}
	}
	if err := checkTensors(f, rest, bes); err != nil {
		return err
	}
	return checkTensors(f, experts, []kernels.Backend{m.experts.be})
}
