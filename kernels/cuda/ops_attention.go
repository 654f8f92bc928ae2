package cuda

import (
	"fmt"

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

// rowAttention is the launch of a several-row kernel for a batch of nb
// query rows: gh query heads of a KV group by qr rows per block. F16
// caches with heads of 64 or 128 take the tensor-core kernel
// (attention_fa_f16_<D>: 64 units a block, 16 a warp, 32-key tiles);
// the rest the SIMT one (attention_rows: at most attnRowUnits units,
// half that for heads of 256, so that the queries and a K and V tile fit
// in 48 KiB of shared memory; t keys a tile, 16 where an F32 row of 256
// would make the tiles too large).
type rowAttention struct {
	gh, qr, t    int
	grid         [3]uint32
	threads      uint32
	shared       uint32
	kernel       string
	splits, elem int
}

// attnRowUnits is ATR_UNITS_MAX of attention.cu; faUnits is FA_UNITS.
const (
	attnRowUnits = 16
	faUnits      = 64
)

func planRowAttention(o kernels.Attention, multiprocessors int) rowAttention {
	nb, hd := o.Q.Rows, o.HeadDim
	g := o.NHead / o.NKVHead
	qAligned := o.Q.Off%16 == 0 && (o.Q.Rows == 1 || o.Q.Stride%16 == 0) // 16-byte query loads
	if o.K.Type == quant.F16 && o.V.Type == quant.F16 && (hd == 64 || hd == 128) && qAligned {
		r := rowAttention{t: 32, elem: 2, kernel: fmt.Sprintf("attention_fa_f16_%d", hd), threads: 128}
		r.gh = min(g, faUnits)
		r.qr = max(1, faUnits/r.gh)
		chunks := (g + r.gh - 1) / r.gh
		blocks := o.NKVHead * chunks * ((nb + r.qr - 1) / r.qr)
		r.splits = workspace.AttentionRowSplits(blocks, o.K.Rows, multiprocessors)
		r.grid = [3]uint32{uint32(o.NKVHead * chunks), ceilDiv(nb, r.qr), uint32(r.splits)}
		r.shared = uint32((faUnits + 2*r.t) * (hd + 8) * 2)
		return r
	}
	units := attnRowUnits
	if hd > 128 {
		units /= 2
	}
	r := rowAttention{t: 32, elem: 4, kernel: "attention_rows_f32", threads: 256}
	if o.K.Type == quant.F16 {
		r.elem, r.kernel = 2, "attention_rows_f16"
	}
	if hd*r.elem > 512 {
		r.t, r.kernel = 16, "attention_rows_f32_t16"
	}
	r.gh = min(g, units)
	r.qr = max(1, units/r.gh)
	chunks := (g + r.gh - 1) / r.gh
	blocks := o.NKVHead * chunks * ((nb + r.qr - 1) / r.qr)
	r.splits = workspace.AttentionRowSplits(blocks, o.K.Rows, multiprocessors)
	r.grid = [3]uint32{uint32(o.NKVHead * chunks), ceilDiv(nb, r.qr), uint32(r.splits)}
	r.shared = uint32(r.gh*r.qr*hd*4 + r.t*(hd*r.elem+16) + r.t*hd*r.elem)
	return r
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
	if b > 1 {
		return c.rowAttention(o, quantize, q, k, v, pos, y)
	}
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

// rowAttention launches the several-row kernel: one block per (KV head,
// head chunk, row tile, key slice), the last slice of each merging.
func (c *compiler) rowAttention(o kernels.Attention, quantize bool, q, k, v, pos, y devicePtr) error {
	r := planRowAttention(o, c.be.info.Multiprocessors)
	nb, nh, hd := o.Q.Rows, o.NHead, o.HeadDim
	part := c.scratch(workspace.Attention, workspace.AttentionBytes(nh*nb, r.splits, hd))
	done := c.scratch(workspace.Counters, workspace.CounterBytes(nh*nb))
	var xq, xd devicePtr
	if quantize {
		xq, xd = c.q8Region(o.Dst)
	}
	err := c.add(o.Name(), r.kernel, r.grid, [3]uint32{r.threads, 1, 1}, r.shared,
		argPtr(q), argI64(stride(o.Q)), argPtr(k), argI64(stride(o.K)), argPtr(v), argI64(stride(o.V)), argPtr(pos), argPtr(part),
		argPtr(done), argPtr(y), argI64(stride(o.Dst)), argPtr(xq), argPtr(xd),
		argInt(nh), argInt(o.NKVHead), argInt(hd), argF32(o.Scale), argInt(o.K.Rows), argInt(nb), argInt(r.gh), argInt(r.qr))
	if quantize {
		c.holdQ8(o.Dst, 0, err)
	}
	return err
}
