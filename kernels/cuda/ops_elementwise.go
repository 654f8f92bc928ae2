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

// rope rotates one or two tensors with the same positions and parameters
// (Q and K) in one launch.
func (c *compiler) rope(jobs ...kernels.Rope) error {
	o := jobs[0]
	var args []uint64
	maxThreads := 0
	for j := 0; j < 2; j++ {
		job := jobs[min(j, len(jobs)-1)]
		x, y, _, err := c.addr3(job.X, job.Dst, kernels.Tensor{})
		if err != nil {
			return err
		}
		heads := job.X.Cols / job.HeadDim
		threads := heads * job.Dims / 2
		if x != y || stride(job.X) != stride(job.Dst) {
			threads += heads * (job.HeadDim - job.Dims) // the unrotated tail is copied
		}
		maxThreads = max(maxThreads, threads)
		args = append(args, argPtr(x), argI64(stride(job.X)), argPtr(y), argI64(stride(job.Dst)), argInt(heads))
	}
	pos, err := c.be.addr(o.Pos)
	if err != nil {
		return err
	}
	var factors devicePtr
	if o.Factors.Valid() {
		if factors, err = c.be.addr(o.Factors); err != nil {
			return err
		}
	}
	neox := 0
	if o.Neox {
		neox = 1
	}
	args = append(args, argPtr(pos), argPtr(factors), argInt(o.HeadDim), argInt(o.Dims), argF32(o.Base), argF32(o.Scale), argInt(neox))
	return c.add(o.Name(), "rope_f32", [3]uint32{ceilDiv(maxThreads, 256), uint32(o.X.Rows), uint32(len(jobs))}, [3]uint32{256, 1, 1}, 0, args...)
}

// pairRope reports whether ops[i+1] is a Rope that can share ops[i]'s launch.
func pairRope(ops []kernels.Op, i int) (kernels.Rope, bool) {
	a := ops[i].(kernels.Rope)
	if i+1 >= len(ops) {
		return a, false
	}
	b, ok := ops[i+1].(kernels.Rope)
	return b, ok && sameRope(a, b) && kernels.Check(b) == nil && independent(a, b)
}

// sameRope reports whether a and b rotate the same rows by the same angles.
func sameRope(a, b kernels.Rope) bool {
	return b.Pos == a.Pos && b.X.Rows == a.X.Rows && b.HeadDim == a.HeadDim && b.Dims == a.Dims &&
		b.Base == a.Base && b.Scale == a.Scale && b.Neox == a.Neox && b.Factors == a.Factors
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
	c.holdQ8(o.Dst, 0, err)
	return err
}
