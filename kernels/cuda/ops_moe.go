package cuda

import (
	"fmt"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/cuda/workspace"
	"github.com/tandem-run/tandem/kernels/quant"
)

// moeMaxExperts bounds Experts: moe_group counts in shared memory, and
// moe_topk keeps a row's probabilities there.
const moeMaxExperts = 4096

// moeMaxUsed bounds Used: moe_topk keeps the chosen experts in shared
// arrays of 64.
const moeMaxUsed = 64

// moeWarps is MOE_WARPS of moe.cu: weight rows per block of a product.
const moeWarps = 4

// moeTypes are the weight types moe.cu reads (FOR_EACH_MOE_TYPE: those
// with a dequant1), for the router and the experts alike.
var moeTypes = map[quant.Type]string{
	quant.F32: "f32", quant.F16: "f16", quant.BF16: "bf16", quant.Q4_0: "q4_0", quant.Q4_1: "q4_1",
	quant.Q5_0: "q5_0", quant.Q5_1: "q5_1", quant.Q8_0: "q8_0", quant.IQ4_NL: "iq4_nl",
	quant.Q4_K: "q4_k", quant.Q5_K: "q5_k", quant.Q6_K: "q6_k",
}

// supportsMoE reports whether moe.cu has kernels for o's weight types:
// the router and down of any of moeTypes, gate and up of one of them.
func supportsMoE(o kernels.MoE) bool {
	for _, t := range []quant.Type{o.Router.Type, o.Gate.Type, o.Up.Type, o.Down.Type} {
		if _, ok := moeTypes[t]; !ok {
			return false
		}
	}
	return o.Gate.Type == o.Up.Type
}

// moeSupported is what Compile refuses of a MoE that kernels.Check passed.
func moeSupported(o kernels.MoE) error {
	switch {
	case !supportsMoE(o):
		return fmt.Errorf("%w: router %v, experts %v/%v/%v (gate and up of one type)", kernels.ErrUnsupported,
			o.Router.Type, o.Gate.Type, o.Up.Type, o.Down.Type)
	case o.Experts > moeMaxExperts || o.Used > moeMaxUsed:
		return fmt.Errorf("%w: %d of %d experts (at most %d of %d)", kernels.ErrUnsupported, o.Used, o.Experts, moeMaxUsed, moeMaxExperts)
	case o.Up.Stride != o.Gate.Stride:
		return fmt.Errorf("%w: gate rows of %d bytes, up rows of %d", kernels.ErrUnsupported, o.Gate.Stride, o.Up.Stride)
	case o.X.Cols%32 != 0 || (o.Gate.Rows/o.Experts)%32 != 0:
		return fmt.Errorf("%w: widths %d and %d, not multiples of 32", kernels.ErrUnsupported, o.X.Cols, o.Gate.Rows/o.Experts)
	}
	return nil
}

// moe launches a mixture-of-experts FFN (moe.cu says how): router
// logits, top experts, group by expert, the gate/up products with their
// SwiGLU, the down products, the weighted sum. The routing and the pairs' activations live in the
// workspace's MoE region.
func (c *compiler) moe(o kernels.MoE) error {
	rows, n, used, experts := o.X.Rows, o.X.Cols, o.Used, o.Experts
	ff, pairs := o.Gate.Rows/experts, rows*used
	l := workspace.MoEFor(rows, used, experts, n, ff)
	base := c.scratch(workspace.MoE, l.Bytes)
	at := func(off int64) devicePtr { return base + devicePtr(off) }
	x, xstride, err := c.alignedX(o.X)
	if err != nil {
		return err
	}
	router, err := c.be.addr(o.Router)
	if err != nil {
		return err
	}
	gate, up, down, err := c.addr3(o.Gate, o.Up, o.Down)
	if err != nil {
		return err
	}
	y, err := c.be.addr(o.Dst)
	if err != nil {
		return err
	}
	renorm := 0
	if o.Renorm {
		renorm = 1
	}
	err = c.add(o.Name(), "moe_logits_"+moeTypes[o.Router.Type], [3]uint32{ceilDiv(experts, 8), uint32(rows), 1},
		[3]uint32{256, 1, 1}, 0, argPtr(router), argI64(o.Router.Stride), argPtr(x), argI64(xstride), argInt(n),
		argInt(experts), argPtr(at(l.Logits)))
	if err != nil {
		return err
	}
	err = c.add(o.Name(), "moe_topk", [3]uint32{uint32(rows), 1, 1}, [3]uint32{32, 1, 1}, uint32(4*experts),
		argPtr(at(l.Logits)), argInt(experts), argInt(used), argInt(renorm), argPtr(at(l.IDs)), argPtr(at(l.Weights)))
	if err != nil {
		return err
	}
	err = c.add(o.Name(), "moe_group", [3]uint32{1, 1, 1}, [3]uint32{1024, 1, 1}, uint32(8*experts),
		argPtr(at(l.IDs)), argInt(pairs), argInt(experts), argPtr(at(l.Count)), argPtr(at(l.First)),
		argPtr(at(l.Active)), argPtr(at(l.NActive)), argPtr(at(l.Order)), argPtr(at(l.Slot)))
	if err != nil {
		return err
	}
	// A batch uses at most min(pairs, experts) experts: one block row each.
	inUse := uint32(min(pairs, experts))
	name := moeTypes[o.Gate.Type]
	err = c.add(o.Name(), "moe_gate_up_"+name, [3]uint32{ceilDiv(ff, moeWarps), inUse, 1}, [3]uint32{32 * moeWarps, 1, 1}, 0,
		argPtr(gate), argPtr(up), argI64(o.Gate.Stride), argI64(int64(ff)*o.Gate.Stride), argPtr(x), argI64(xstride),
		argInt(n), argInt(ff), argInt(used), argPtr(at(l.Count)), argPtr(at(l.First)), argPtr(at(l.Active)),
		argPtr(at(l.NActive)), argPtr(at(l.Order)), argPtr(at(l.Act)))
	if err != nil {
		return err
	}
	err = c.add(o.Name(), "moe_down_"+moeTypes[o.Down.Type], [3]uint32{ceilDiv(n, moeWarps), inUse, 1}, [3]uint32{32 * moeWarps, 1, 1}, 0,
		argPtr(down), argI64(o.Down.Stride), argI64(int64(n)*o.Down.Stride), argPtr(at(l.Act)), argInt(ff), argInt(n),
		argPtr(at(l.Count)), argPtr(at(l.First)), argPtr(at(l.Active)), argPtr(at(l.NActive)), argPtr(at(l.Out)))
	if err != nil {
		return err
	}
	return c.add(o.Name(), "moe_sum", [3]uint32{ceilDiv(n, 256), uint32(rows), 1}, [3]uint32{256, 1, 1}, 0,
		argPtr(at(l.Out)), argInt(n), argInt(used), argPtr(at(l.Slot)), argPtr(at(l.Weights)), argPtr(y), argI64(stride(o.Dst)))
}
