package cuda

import (
	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// attention splits each (head, query) over up to attnMaxSplits slices of
// the cache so that decode, one query, still fills the GPU.
const attnMaxSplits = 64

func (c *compiler) attention(o kernels.Attention) error {
	q, k, v, err := c.addr3(o.Q, o.K, o.V)
	if err != nil {
		return err
	}
	pos, y, _, err := c.addr3(o.Pos, o.Dst, kernels.Tensor{})
	if err != nil {
		return err
	}
	b, nh, hd := o.Q.Rows, o.NHead, o.HeadDim
	splits := (2*c.be.info.Multiprocessors + nh*b - 1) / (nh * b)
	splits = max(1, min(splits, attnMaxSplits, (o.K.Rows+127)/128))
	part := c.scratch(scratchAttn, int64(b)*int64(nh)*int64(splits)*int64(hd+2)*4)
	kernel := "attn_partial_f32"
	if o.K.Type == quant.F16 {
		kernel = "attn_partial_f16"
	}
	if err := c.add(o.Name(), kernel, [3]uint32{uint32(nh), uint32(b), uint32(splits)}, [3]uint32{128, 1, 1}, 0,
		argPtr(q), argI64(stride(o.Q)), argPtr(k), argI64(stride(o.K)), argPtr(v), argI64(stride(o.V)), argPtr(pos), argPtr(part),
		argInt(nh), argInt(o.NKVHead), argInt(hd), argF32(o.Scale), argInt(o.K.Rows)); err != nil {
		return err
	}
	return c.add(o.Name(), "attn_combine", [3]uint32{uint32(nh), uint32(b), 1}, [3]uint32{uint32(hd), 1, 1}, 0,
		argPtr(part), argPtr(y), argI64(stride(o.Dst)), argInt(nh), argInt(hd), argInt(splits))
}
