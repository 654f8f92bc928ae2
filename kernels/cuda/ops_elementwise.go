package cuda

import (
	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// binary launches an elementwise kernel dst = f(a, b); b of one row is
// broadcast over a's rows.
func (c *compiler) binary(kernel string, dst, a, b kernels.Tensor) error {
	pa, pb, pd, err := c.addr3(a, b, dst)
	if err != nil {
		return err
	}
	bstride := stride(b)
	if b.Rows == 1 {
		bstride = 0
	}
	return c.add(kernel, kernel, [3]uint32{ceilDiv(a.Cols, 256), uint32(a.Rows), 1}, [3]uint32{256, 1, 1}, 0,
		argPtr(pa), argI64(stride(a)), argPtr(pb), argI64(bstride), argPtr(pd), argI64(stride(dst)), argInt(a.Cols))
}

func (c *compiler) copyOp(o kernels.Copy) error {
	src, dst, _, err := c.addr3(o.Src, o.Dst, kernels.Tensor{})
	if err != nil {
		return err
	}
	name := map[quant.Type]string{quant.F32: "f32", quant.F16: "f16"}
	kernel := "copy_" + name[o.Src.Type] + "_" + name[o.Dst.Type]
	return c.add(o.Name(), kernel, [3]uint32{ceilDiv(o.Src.Cols, 256), uint32(o.Src.Rows), 1}, [3]uint32{256, 1, 1}, 0,
		argPtr(src), argI64(stride(o.Src)), argPtr(dst), argI64(stride(o.Dst)), argInt(o.Src.Cols))
}

func (c *compiler) rope(o kernels.Rope) error {
	x, y, pos, err := c.addr3(o.X, o.Dst, o.Pos)
	if err != nil {
		return err
	}
	var factors devicePtr
	if o.Factors.Valid() {
		if factors, err = c.be.addr(o.Factors); err != nil {
			return err
		}
	}
	heads := o.X.Cols / o.HeadDim
	threads := heads * o.Dims / 2
	if x != y || stride(o.X) != stride(o.Dst) {
		threads += heads * (o.HeadDim - o.Dims) // the unrotated tail is copied
	}
	neox := 0
	if o.Neox {
		neox = 1
	}
	return c.add(o.Name(), "rope_f32", [3]uint32{ceilDiv(threads, 256), uint32(o.X.Rows), 1}, [3]uint32{256, 1, 1}, 0,
		argPtr(x), argI64(stride(o.X)), argPtr(y), argI64(stride(o.Dst)), argPtr(pos), argPtr(factors),
		argInt(heads), argInt(o.HeadDim), argInt(o.Dims), argF32(o.Base), argF32(o.Scale), argInt(neox))
}

// swiGLUQ8 is SwiGLU that also quantizes its output for the next product.
func (c *compiler) swiGLUQ8(o kernels.SwiGLU) error {
	g, u, y, err := c.addr3(o.Gate, o.Up, o.Dst)
	if err != nil {
		return err
	}
	xq, xd := c.q8Region(o.Dst)
	n := o.Dst.Cols
	err = c.add(o.Name(), "swiglu_q8", [3]uint32{ceilDiv(n/32, 8), uint32(o.Dst.Rows), 1}, [3]uint32{256, 1, 1}, 0,
		argPtr(g), argI64(stride(o.Gate)), argPtr(u), argI64(stride(o.Up)), argPtr(y), argI64(stride(o.Dst)), argInt(n),
		argPtr(xq), argPtr(xd))
	c.q8, c.q8Set = o.Dst, err == nil
	return err
}
