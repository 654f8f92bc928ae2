package cuda

import (
	"fmt"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// weightKernels names the kernel suffix of each weight type src/*.cu
// instantiates (mv_<name>_<NB>, mm_<name>, get_rows_<name>).
var weightKernels = map[quant.Type]string{
	quant.F32: "f32", quant.F16: "f16", quant.BF16: "bf16",
	quant.Q4_0: "q4_0", quant.Q4_1: "q4_1", quant.Q5_0: "q5_0", quant.Q5_1: "q5_1",
	quant.Q8_0: "q8_0", quant.IQ4_NL: "iq4_nl", quant.Q2_K: "q2_k", quant.Q3_K: "q3_k",
	quant.Q4_K: "q4_k", quant.Q5_K: "q5_k", quant.Q6_K: "q6_k", quant.IQ4_XS: "iq4_xs",
}

// mvMaxBatch is the largest batch the matrix-vector kernels take; above it
// the tiled matrix-matrix kernel runs.
const mvMaxBatch = 8

// batchVariant is the smallest compiled batch size (1, 2, 4, 8) >= nb.
func batchVariant(nb int) int {
	v := 1
	for v < nb {
		v *= 2
	}
	return v
}

// matMul picks a kernel by batch size and weight type: the integer (dp4a)
// matrix-vector kernels for Q8_0/Q4_K/Q6_K on 8-bit activations, the
// vectorised F16 one, the generic dequantizing one, or for large batches
// the tiled matrix-matrix kernel.
func (c *compiler) matMul(o kernels.MatMul) error {
	w, err := c.be.addr(o.W)
	if err != nil {
		return err
	}
	y, err := c.be.addr(o.Dst)
	if err != nil {
		return err
	}
	rows, n, nb := o.W.Rows, o.W.Cols, o.X.Rows
	name := weightKernels[o.W.Type]
	wAligned := o.W.Off%16 == 0 && (o.W.Rows == 1 || o.W.Stride%16 == 0)
	ystride := stride(o.Dst)
	mvGrid := [3]uint32{ceilDiv(rows, mvWarps), 1, 1}
	mvBlock := [3]uint32{32 * mvWarps, 1, 1}

	if nb > mvMaxBatch {
		x, xstride, err := c.alignedX(o.X)
		if err != nil {
			return err
		}
		return c.add(o.Name(), "mm_"+name,
			[3]uint32{ceilDiv(rows, 64), ceilDiv(nb, 64), 1}, [3]uint32{256, 1, 1}, 0,
			argPtr(w), argI64(o.W.Stride), argPtr(x), argI64(xstride), argPtr(y), argI64(ystride),
			argInt(rows), argInt(n), argInt(nb), argInt(0))
	}
	nbv := batchVariant(nb)
	if o.W.Type == quant.Q8_0 || o.W.Type == quant.Q6_K || (o.W.Type == quant.Q4_K && wAligned) {
		xq, xd, err := c.quantizeQ8(o.X)
		if err != nil {
			return err
		}
		return c.add(o.Name(), fmt.Sprintf("mvq_%s_%d", name, nbv), mvGrid, mvBlock, 0,
			argPtr(w), argI64(o.W.Stride), argPtr(xq), argPtr(xd), argPtr(y), argI64(ystride),
			argInt(rows), argInt(n), argInt(nb), argInt(0))
	}
	x, xstride, err := c.alignedX(o.X)
	if err != nil {
		return err
	}
	kernel := fmt.Sprintf("mv_%s_%d", name, nbv)
	if o.W.Type == quant.F16 && wAligned && n%8 == 0 {
		kernel = fmt.Sprintf("mvv_f16_%d", nbv)
	}
	return c.add(o.Name(), kernel, mvGrid, mvBlock, 0,
		argPtr(w), argI64(o.W.Stride), argPtr(x), argI64(xstride), argPtr(y), argI64(ystride),
		argInt(rows), argInt(n), argInt(nb), argInt(0))
}

// mvWarps is MV_WARPS of matvec.cu: rows per block.
const mvWarps = 4

// quantizeQ8 returns x quantized to 8 bits (values, then per-32 scales),
// adding the quantize step unless the region already holds x.
func (c *compiler) quantizeQ8(x kernels.Tensor) (xq, xd devicePtr, err error) {
	n, rows := x.Cols, x.Rows
	valBytes := int64(rows) * int64(n)
	valBytes = (valBytes + 15) &^ 15
	base := c.scratch(scratchQ8, valBytes+int64(rows)*int64(n/32)*8)
	xq, xd = base, base+devicePtr(valBytes)
	if c.q8Set && c.q8 == x {
		return xq, xd, nil
	}
	src, err := c.be.addr(x)
	if err != nil {
		return 0, 0, err
	}
	err = c.add("quantize", "quantize_q8", [3]uint32{ceilDiv(rows*n, 256), 1, 1}, [3]uint32{256, 1, 1}, 0,
		argPtr(src), argI64(stride(x)), argPtr(xq), argPtr(xd), argInt(n), argInt(rows))
	c.q8, c.q8Set = x, err == nil
	return xq, xd, err
}

// alignedX returns x's address and row stride in elements, first copying
// it into scratch when its rows are not 16-byte aligned (the kernels read
// activations as float4).
func (c *compiler) alignedX(x kernels.Tensor) (devicePtr, int64, error) {
	p, err := c.be.addr(x)
	if err != nil {
		return 0, 0, err
	}
	if x.Off%16 == 0 && (x.Rows == 1 || x.Stride%16 == 0) {
		return p, stride(x), nil
	}
	n := int64(x.Cols+3) &^ 3
	dst := c.scratch(scratchAligned, int64(x.Rows)*n*4)
	err = c.add("align", "copy_f32_f32", [3]uint32{ceilDiv(x.Cols, 256), uint32(x.Rows), 1}, [3]uint32{256, 1, 1}, 0,
		argPtr(p), argI64(stride(x)), argPtr(dst), argI64(n), argInt(x.Cols))
	return dst, n, err
}
