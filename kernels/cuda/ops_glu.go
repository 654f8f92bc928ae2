package cuda

import (
	"fmt"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/cuda/workspace"
)

// matchGLU reports whether the gate and up products of group (ops[i],
// ops[i+1]) are followed by their SwiGLU, whose output the next product
// reads through the integer kernels: then the three run as one launch
// (mvq_glu), each warp computing a row of both products, and the SwiGLU
// output is quantized on the way, beside the copy of the activations the
// products read.
func (c *compiler) matchGLU(ops []kernels.Op, i int, group []kernels.MatMul, path mvPath) (kernels.SwiGLU, bool) {
	if path != pathQ8 || len(group) != 2 || i+2 >= len(ops) {
		return kernels.SwiGLU{}, false
	}
	sw, ok := ops[i+2].(kernels.SwiGLU)
	gate, up := group[0], group[1]
	if !ok || sw.Gate != gate.Dst || sw.Up != up.Dst || gate.W.Rows != up.W.Rows || sw.Dst.Cols%32 != 0 ||
		kernels.Check(sw) != nil {
		return sw, false
	}
	// A lane writes its row's gate, then up, then SwiGLU value: the SwiGLU
	// may overwrite the gate or the up output, but not part of one.
	for _, t := range []kernels.Tensor{gate.Dst, up.Dst} {
		if sw.Dst != t && overlaps(sw.Dst, t) {
			return sw, false
		}
	}
	// The output's copy goes after the activations', which must be first.
	if c.q8Set && c.q8 == gate.X && c.q8Off != 0 {
		return sw, false
	}
	return sw, c.quantizesNext(ops, i+3, sw.Dst)
}

// glu launches gate, up and their SwiGLU as matchGLU found them.
func (c *compiler) glu(gate, up kernels.MatMul, sw kernels.SwiGLU) error {
	xq, xd, err := c.quantizeQ8(gate.X)
	if err != nil {
		return err
	}
	_, off := workspace.Q8Layout(gate.X.Rows, gate.X.Cols)
	oq, od := c.q8RegionAt(sw.Dst, off)
	wg, yg, _, err := c.addr3(gate.W, gate.Dst, kernels.Tensor{})
	if err != nil {
		return err
	}
	wu, yu, y, err := c.addr3(up.W, up.Dst, sw.Dst)
	if err != nil {
		return err
	}
	rows, nb := gate.W.Rows, gate.X.Rows
	counters := c.scratch(workspace.Counters, workspace.CounterBytes(rows/32))
	kernel := fmt.Sprintf("mvq_glu_%s_%d", weightKernels[gate.W.Type], batchVariant(nb))
	err = c.add(sw.Name(), kernel, [3]uint32{ceilDiv(rows, mvWarps), 1, 1}, [3]uint32{32 * mvWarps, 1, 1}, 0,
		argPtr(wg), argI64(gate.W.Stride), argPtr(yg), argI64(stride(gate.Dst)),
		argPtr(wu), argI64(up.W.Stride), argPtr(yu), argI64(stride(up.Dst)),
		argPtr(y), argI64(stride(sw.Dst)), argInt(rows), argPtr(xq), argPtr(xd), argInt(gate.W.Cols), argInt(nb),
		argPtr(oq), argPtr(od), argPtr(counters))
	c.holdQ8(sw.Dst, off, err)
	c.q8Final = err == nil
	return err
}
