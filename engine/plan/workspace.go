package plan

import (
	"fmt"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/kernels/cuda/workspace"
	"github.com/tandem-run/tandem/kernels/quant"
)

// workspaces is, per CUDA device of the model, the scratch the backend
// keeps of its own for the model's passes (kernels/cuda/workspace): 8-bit
// copies of the widest activation an integer product reads, attention
// partials and counters for the device's heads. CPU devices keep none.
func (m *model) workspaces(devs []device.Device, ctx, batch int64) map[int]workspace.Sizes {
	out := map[int]workspace.Sizes{}
	for d, l := range m.locals() {
		if dev, _ := findDevice(devs, d); dev.Kind != device.CUDA {
			continue
		}
		p := workspace.Pass{Rows: int(batch), Keys: int(ctx), Quantized: int(l.quantized), Half: int(l.half)}
		if l.kv > 0 {
			p.Heads, p.HeadDim = int(l.heads), int(max(m.shape.HeadDimK, m.shape.HeadDimV))
		}
		// The MoE scratch goes where the experts run: with their blocks, or
		// on the expert device when they are apart (ExpertsOnDevice).
		if l.blocks && m.p.Experts != ExpertsOnDevice || l.experts {
			p.Experts, p.ExpertsUsed, p.ExpertFF, p.Embd = m.experts()
		}
		if s := workspace.For(p); s.Total() > 0 {
			out[d] = s
		}
	}
	return out
}

// experts are the mixture-of-experts shape of the model's blocks (the
// CUDA backend's MoE scratch is sized by it): experts per block, experts a
// token uses, one expert's width, the residual's width; zeros for a dense
// model. The width is the 3-D gate tensor's, which the file must hold.
func (m *model) experts() (experts, used, ff, embd int) {
	e, _ := m.file.ArchUint("expert_count")
	u, _ := m.file.ArchUint("expert_used_count")
	t, ok := m.file.Tensor("blk.0.ffn_gate_exps.weight")
	if e == 0 || u == 0 || !ok || len(t.Dims) != 3 || e > 1<<16 || u > e {
		return 0, 0, 0, 0
	}
	return int(e), int(u), int(t.Dims[1]), int(m.shape.Embd)
}

// quantizedInputs is the widest activation of block b that a product with
// integer weights reads, for a device with heads query heads and ffn FFN
// rows of it.
func (m *model) quantizedInputs(b int, heads, ffn int64) int64 {
	return m.inputsOf(b, heads, ffn, workspace.QuantizesActivations)
}

// halfInputs is the widest activation of block b that a product copies
// to F16 for the prefill tiles (workspace.CopiesToHalf).
func (m *model) halfInputs(b int, heads, ffn int64) int64 {
	return m.inputsOf(b, heads, ffn, workspace.CopiesToHalf)
}

// inputsOf is the widest activation of block b that a product with
// weights of a type of pick reads.
func (m *model) inputsOf(b int, heads, ffn int64, pick func(quant.Type) bool) int64 {
	var w int64
	for _, p := range []struct {
		names []string
		width int64
	}{
		{[]string{"attn_q", "attn_k", "attn_v", "ffn_gate", "ffn_up"}, m.inputWidth(b)},
		{[]string{"attn_output"}, m.shape.HeadDimV * heads},
		{[]string{"ffn_down"}, ffn},
	} {
		for _, name := range p.names {
			if t, ok := m.file.Tensor(fmt.Sprintf("blk.%d.%s.weight", b, name)); ok && pick(t.Type) {
				w = max(w, p.width)
			}
		}
	}
	return w
}

// headQuantizes reports whether the head's product reads its input in 8
// bits; a head the file does not hold (borrowed) is taken to.
func (m *model) headQuantizes() bool {
	for _, name := range []string{nameHead, nameEmbd} {
		if t, ok := m.file.Tensor(name); ok {
			return workspace.QuantizesActivations(t.Type)
		}
	}
	return true
}

// headHalf reports whether the head's products copy their activations
// to F16 (workspace.CopiesToHalf); a head the file does not hold
// (borrowed) is taken to.
func (m *model) headHalf() bool {
	for _, name := range []string{nameHead, nameEmbd} {
		if t, ok := m.file.Tensor(name); ok {
			return workspace.CopiesToHalf(t.Type)
		}
	}
	return true
}
