package cuda

import (
	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/cuda/workspace"
	"github.com/tandem-run/tandem/kernels/quant"
)

// rmsNorm normalises; when the next op is an integer product of its
// output, it also leaves that output quantized for it.
func (c *compiler) rmsNorm(o kernels.RMSNorm, quantize bool) error {
	x, y, w, err := c.addr3(o.X, o.Dst, o.W)
	if err != nil {
		return err
	}
	if quantize && o.X.Cols%32 == 0 {
		xq, xd := c.q8Region(o.Dst)
		threads := 32 * min(o.X.Cols/32, 32) // a warp per group of 32
		err := c.add(o.Name(), "rms_norm_q8", [3]uint32{uint32(o.X.Rows), 1, 1}, [3]uint32{uint32(threads), 1, 1}, 0,
			argPtr(x), argI64(stride(o.X)), argPtr(w), argPtr(y), argI64(stride(o.Dst)), argInt(o.X.Cols), argF32(o.Eps),
			argPtr(xq), argPtr(xd))
		c.holdQ8(o.Dst, 0, err)
		return err
	}
	threads := 32 * min(int(ceilDiv(o.X.Cols, 32)), 32)
	return c.add(o.Name(), "rms_norm", [3]uint32{uint32(o.X.Rows), 1, 1}, [3]uint32{uint32(threads), 1, 1}, 0,
		argPtr(x), argI64(stride(o.X)), argPtr(w), argPtr(y), argI64(stride(o.Dst)), argInt(o.X.Cols), argF32(o.Eps))
}

func (c *compiler) softmax(o kernels.Softmax) error {
	x, y, _, err := c.addr3(o.X, o.Dst, kernels.Tensor{})
	if err != nil {
		return err
	}
	return c.add(o.Name(), "softmax", [3]uint32{uint32(o.X.Rows), 1, 1}, [3]uint32{1024, 1, 1}, 0,
		argPtr(x), argI64(stride(o.X)), argPtr(y), argI64(stride(o.Dst)), argInt(o.X.Cols))
}

func (c *compiler) argmax(o kernels.Argmax) error {
	x, y, _, err := c.addr3(o.X, o.Dst, kernels.Tensor{})
	if err != nil {
		return err
	}
	return c.add(o.Name(), "argmax", [3]uint32{uint32(o.X.Rows), 1, 1}, [3]uint32{1024, 1, 1}, 0,
		argPtr(x), argI64(stride(o.X)), argPtr(y), argInt(o.X.Cols))
}

// Top-k works in two passes: the k best of each chunk of topKChunk values
// (held in shared memory), then the k best of all chunks' candidates.
const (
	topKChunk         = 4096
	topKMaxCandidates = 6144 // 48 KiB of shared memory in the merge
)

func (c *compiler) topK(o kernels.TopK) error {
	x, ids, vals, err := c.addr3(o.X, o.Ids, o.Vals)
	if err != nil {
		return err
	}
	rows, n, k := o.X.Rows, o.X.Cols, o.Ids.Cols
	chunks := (n + topKChunk - 1) / topKChunk
	ncand := chunks * k
	chunk := topKChunk
	if chunks == 1 {
		chunk = (n + 31) &^ 31
	}
	cv := c.scratch(workspace.TopK, workspace.TopKBytes(rows, ncand))
	ci := cv + devicePtr(int64(rows)*int64(ncand)*4)
	if err := c.add(o.Name(), "top_k_chunk", [3]uint32{uint32(chunks), uint32(rows), 1}, [3]uint32{1024, 1, 1}, uint32(4*chunk),
		argPtr(x), argI64(stride(o.X)), argPtr(cv), argPtr(ci), argInt(n), argInt(chunk), argInt(k)); err != nil {
		return err
	}
	return c.add(o.Name(), "top_k_merge", [3]uint32{uint32(rows), 1, 1}, [3]uint32{256, 1, 1}, uint32(8*ncand),
		argPtr(cv), argPtr(ci), argInt(ncand), argPtr(ids), argI64(stride(o.Ids)), argPtr(vals), argI64(stride(o.Vals)), argInt(k))
}

func (c *compiler) getRows(o kernels.GetRows) error {
	src, y, idx, err := c.addr3(o.Src, o.Dst, o.Idx)
	if err != nil {
		return err
	}
	n, b := o.Src.Cols, o.Dst.Rows
	if o.Src.Type == quant.F32 && n%32 != 0 {
		return c.add(o.Name(), "get_rows_f32_any", [3]uint32{ceilDiv(n, 256), uint32(b), 1}, [3]uint32{256, 1, 1}, 0,
			argPtr(src), argI64(stride(o.Src)), argPtr(idx), argPtr(y), argI64(stride(o.Dst)), argInt(n), argInt(o.Src.Rows))
	}
	return c.add(o.Name(), "get_rows_"+weightKernels[o.Src.Type], [3]uint32{ceilDiv(n/32, 128), uint32(b), 1}, [3]uint32{128, 1, 1}, 0,
		argPtr(src), argI64(o.Src.Stride), argPtr(idx), argPtr(y), argI64(stride(o.Dst)), argInt(n), argInt(o.Src.Rows))
}

// setRows scatters one or two sets of rows with the same indices (the K
// and V of a block) in one launch.
func (c *compiler) setRows(jobs ...kernels.SetRows) error {
	o := jobs[0]
	if !floatPair(o.Dst.Type, jobs[len(jobs)-1].Dst.Type) {
		return c.setRowsKV(jobs...)
	}
	kernel := "set_rows_f32"
	if o.Dst.Type == quant.F16 {
		kernel = "set_rows_f16"
	}
	var args []uint64
	maxCols := 0
	for j := 0; j < 2; j++ {
		job := jobs[min(j, len(jobs)-1)]
		x, dst, _, err := c.addr3(job.Src, job.Dst, kernels.Tensor{})
		if err != nil {
			return err
		}
		args = append(args, argPtr(x), argI64(stride(job.Src)), argPtr(dst), argI64(stride(job.Dst)),
			argInt(job.Src.Cols), argInt(job.Dst.Rows))
		maxCols = max(maxCols, job.Src.Cols)
	}
	idx, err := c.be.addr(o.Idx)
	if err != nil {
		return err
	}
	args = append(args, argPtr(idx))
	return c.add(o.Name(), kernel, [3]uint32{ceilDiv(maxCols, 256), uint32(o.Src.Rows), uint32(len(jobs))}, [3]uint32{256, 1, 1}, 0, args...)
}

// setRowsKV launches set_rows_kv: rows of any cache type (Q8_0 and Q4_0
// quantized as kernels/quant does), the two jobs' types apart, one warp a
// group of 32 values.
func (c *compiler) setRowsKV(jobs ...kernels.SetRows) error {
	o := jobs[0]
	var args []uint64
	maxGroups := 0
	for j := 0; j < 2; j++ {
		job := jobs[min(j, len(jobs)-1)]
		x, dst, _, err := c.addr3(job.Src, job.Dst, kernels.Tensor{})
		if err != nil {
			return err
		}
		args = append(args, argPtr(x), argI64(stride(job.Src)), argPtr(dst), argI64(job.Dst.Stride),
			argInt(job.Src.Cols), argInt(job.Dst.Rows), argInt(int(job.Dst.Type)))
		maxGroups = max(maxGroups, int(ceilDiv(job.Src.Cols, 32)))
	}
	idx, err := c.be.addr(o.Idx)
	if err != nil {
		return err
	}
	args = append(args, argPtr(idx))
	return c.add(o.Name(), "set_rows_kv", [3]uint32{ceilDiv(maxGroups, 4), uint32(o.Src.Rows), uint32(len(jobs))}, [3]uint32{128, 1, 1}, 0, args...)
}

// independent reports whether b neither reads nor writes what a writes,
// nor writes what a reads, so the two may run in one launch.
func independent(a, b kernels.Op) bool {
	for _, out := range outputs(a) {
		for _, t := range append(inputs(b), outputs(b)...) {
			if t.Valid() && overlaps(out, t) {
				return false
			}
		}
	}
	for _, out := range outputs(b) {
		for _, in := range inputs(a) {
			if in.Valid() && overlaps(out, in) {
				return false
			}
		}
	}
	return true
}

// pairSetRows reports whether ops[i+1] is a SetRows that can share ops[i]'s
// launch (set_rows_kv takes two jobs of different types).
func pairSetRows(ops []kernels.Op, i int) (kernels.SetRows, bool) {
	a := ops[i].(kernels.SetRows)
	if i+1 >= len(ops) {
		return a, false
	}
	b, ok := ops[i+1].(kernels.SetRows)
	return b, ok && b.Idx == a.Idx && b.Src.Rows == a.Src.Rows &&
		kernels.Check(b) == nil && independent(a, b)
}

// addr3 resolves up to three tensors' addresses (an absent one is 0).
func (c *compiler) addr3(a, b, t kernels.Tensor) (pa, pb, pt devicePtr, err error) {
	for _, x := range []struct {
		t kernels.Tensor
		p *devicePtr
	}{{a, &pa}, {b, &pb}, {t, &pt}} {
		if !x.t.Valid() {
			continue
		}
		if *x.p, err = c.be.addr(x.t); err != nil {
			return 0, 0, 0, err
		}
	}
	return pa, pb, pt, nil
}
