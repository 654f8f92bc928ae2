package cuda

import (
	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/cuda/workspace"
	"github.com/tandem-run/tandem/kernels/quant"
)

// attnSharedBytes is the dynamic shared memory of attention.cu for rows of
// hd elements of elem bytes: the query, a K tile padded by G chunks a row,
// a V tile, and the tile's scores and weights.
func attnSharedBytes(hd, elem int) uint32 {
	c := hd * elem / 16
	t := 16
	switch {
	case c <= 16:
		t = 64
	case c <= 32:
		t = 32
	}
	g := 128 / t
	return uint32(1024 + t*(c+g)*16 + t*c*16 + 512)
}

// attention runs as one launch: the last split of each (head, query) to
// finish merges the others, and when the next op is an integer product of
// the output it also leaves the output quantized for it.
func (c *compiler) attention(o kernels.Attention, quantize bool) error {
	q, k, v, err := c.addr3(o.Q, o.K, o.V)
	if err != nil {
		return err
	}
	pos, y, _, err := c.addr3(o.Pos, o.Dst, kernels.Tensor{})
	if err != nil {
		return err
	}
	b, nh, hd := o.Q.Rows, o.NHead, o.HeadDim
	// Each (head, query) is cut over slices of the cache so that decode,
	// one query, still fills the GPU.
	splits := workspace.AttentionSplits(nh*b, o.K.Rows, c.be.info.Multiprocessors)
	part := c.scratch(workspace.Attention, workspace.AttentionBytes(nh*b, splits, hd))
	done := c.scratch(workspace.Counters, workspace.CounterBytes(nh*b))
	var xq, xd devicePtr
	if quantize {
		xq, xd = c.q8Region(o.Dst)
	}
	kernel, elem := "attention_f32", 4
	if o.K.Type == quant.F16 {
		kernel, elem = "attention_f16", 2
	}
	err = c.add(o.Name(), kernel, [3]uint32{uint32(nh), uint32(b), uint32(splits)}, [3]uint32{128, 1, 1}, attnSharedBytes(hd, elem),
		argPtr(q), argI64(stride(o.Q)), argPtr(k), argI64(stride(o.K)), argPtr(v), argI64(stride(o.V)), argPtr(pos), argPtr(part),
		argPtr(done), argPtr(y), argI64(stride(o.Dst)), argPtr(xq), argPtr(xd),
		argInt(nh), argInt(o.NKVHead), argInt(hd), argF32(o.Scale), argInt(o.K.Rows))
	if quantize {
		c.holdQ8(o.Dst, 0, err)
	}
	return err
}
