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
	qbytes       int // attention_rows_kv: shared bytes of the queries (0 for the others)
}

// attnRowUnits is ATR_UNITS_MAX of attention.cu; faUnits is FA_UNITS.
const (
	attnRowUnits = 16
	faUnits      = 64
)

func planRowAttention(o kernels.Attention, multiprocessors int) rowAttention {
	nb, hd := o.Q.Rows, o.HeadDim
	g := o.NHead / o.NKVHead
	if !floatPair(o.K.Type, o.V.Type) {
		return planRowAttentionKV(o, multiprocessors)
	}
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
	if o.Rows.Valid() {
		return c.seqsAttention(o, quantize, q, k, v, pos, y)
	}
	if o.Q.Rows > workspace.VerifyRows {
		return c.rowAttention(o, quantize, q, k, v, pos, y)
	}
	if !floatPair(o.K.Type, o.V.Type) {
		return c.attentionKV(o, quantize, q, k, v, pos, y)
	}
	// Each (head, query) is cut over slices of the cache so that decode,
	// one query, still fills the GPU. Up to VerifyRows queries (the rows a
	// verification pass checks) run on the same kernel, one grid row each,
	// cut as one query is: each row then takes exactly the steps of its
	// own decode, so its output has the same bits (the several-row kernels
	// order and round differently), at the price of reading a KV head once
	// per query and query head rather than once for all of them.
	return c.decodeAttention(o, quantize, q, k, v, pos, y, 0)
}

// decodeAttention launches attention_<type>, or with rows (the cache row
// of each query's own key: several sequences) attention_seqs_<type>, cut
// for a cache of slot rows: the whole cache, or one sequence's slot of
// Ctx rows, so that each row takes the slices and steps (and has the
// bits) of its sequence's own decode.
func (c *compiler) decodeAttention(o kernels.Attention, quantize bool, q, k, v, pos, y, rows devicePtr) error {
	b, nh, hd := o.Q.Rows, o.NHead, o.HeadDim
	kernel, slot := "attention_", o.K.Rows
	if rows != 0 {
		kernel, slot = "attention_seqs_", o.Ctx
	}
	splits := workspace.AttentionSplits(nh, slot, c.be.info.Multiprocessors)
	part := c.scratch(workspace.Attention, workspace.AttentionBytes(nh*b, splits, hd))
	done := c.scratch(workspace.Counters, workspace.CounterBytes(nh*b))
	var xq, xd devicePtr
	if quantize {
		xq, xd = c.q8Region(o.Dst)
	}
	typ, elem := "f32", 4
	if o.K.Type == quant.F16 {
		typ, elem = "f16", 2
	}
	args := []uint64{argPtr(q), argI64(stride(o.Q)), argPtr(k), argI64(stride(o.K)), argPtr(v), argI64(stride(o.V)), argPtr(pos)}
	if rows != 0 {
		args = append(args, argPtr(rows))
	}
	args = append(args, argPtr(part), argPtr(done), argPtr(y), argI64(stride(o.Dst)), argPtr(xq), argPtr(xd),
		argInt(nh), argInt(o.NKVHead), argInt(hd), argF32(o.Scale), argInt(slot))
	err := c.add(o.Name(), kernel+typ, [3]uint32{uint32(nh), uint32(b), uint32(splits)}, [3]uint32{128, 1, 1}, attnSharedBytes(hd, elem), args...)
	if quantize {
		c.holdQ8(o.Dst, 0, err)
	}
	return err
}

// seqsSupported checks an Attention over several sequences (Rows set):
// attention_seqs_<type> is decode's kernel with each row's slot, so it
// takes what decode's several rows take, F32 or F16 caches and up to
// VerifyRows rows, without a window.
func seqsSupported(o kernels.Attention) error {
	switch {
	case !floatPair(o.K.Type, o.V.Type):
		return fmt.Errorf("%w: several sequences on K %v, V %v caches", kernels.ErrUnsupported, o.K.Type, o.V.Type)
	case o.Q.Rows > workspace.VerifyRows:
		return fmt.Errorf("%w: %d rows of several sequences (at most %d)", kernels.ErrUnsupported, o.Q.Rows, workspace.VerifyRows)
	case o.Window > 0:
		return fmt.Errorf("%w: several sequences under a sliding window", kernels.ErrUnsupported)
	}
	return nil
}

// seqsAttention launches attention_seqs_<type> (decodeAttention) for the
// query rows of several sequences, each with its key's cache row in Rows.
func (c *compiler) seqsAttention(o kernels.Attention, quantize bool, q, k, v, pos, y devicePtr) error {
	rows, _, _, err := c.addr3(o.Rows, kernels.Tensor{}, kernels.Tensor{})
	if err != nil {
		return err
	}
	return c.decodeAttention(o, quantize, q, k, v, pos, y, rows)
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
	// attention_rows_kv takes strides in bytes, the tile and the queries' bytes
	kvKernel := r.qbytes > 0
	ks, vs := o.K.Stride, o.V.Stride
	if !kvKernel {
		ks, vs = stride(o.K), stride(o.V)
	}
	args := []uint64{argPtr(q), argI64(stride(o.Q)), argPtr(k), argI64(ks), argPtr(v), argI64(vs), argPtr(pos), argPtr(part),
		argPtr(done), argPtr(y), argI64(stride(o.Dst)), argPtr(xq), argPtr(xd),
		argInt(nh), argInt(o.NKVHead), argInt(hd), argF32(o.Scale), argInt(o.K.Rows), argInt(nb), argInt(r.gh), argInt(r.qr)}
	if kvKernel {
		args = append(args, argInt(r.t), argInt(r.qbytes))
	}
	err := c.add(o.Name(), r.kernel, r.grid, [3]uint32{r.threads, 1, 1}, r.shared, args...)
	if quantize {
		c.holdQ8(o.Dst, 0, err)
	}
	return err
}

// floatPair reports whether K and V are both F32 or both F16, the caches
// attention.cu's kernels take; every other pair runs attention_kv.cu's.
func floatPair(k, v quant.Type) bool { return k == v && (k == quant.F32 || k == quant.F16) }

// kvCache mirrors kvt of attention_kv.cu: bytes per 32 elements, rows
// 16-byte aligned (F32, F16: supported checks), a query quantized for it,
// and the most 16-byte loads a thread makes per tile in the decode (ld1)
// and the several-row (ldr) kernels.
type kvCache struct {
	groupBytes int
	aligned    bool
	quantized  bool
	ld1, ldr   int
	name       string
}

var kvCaches = map[quant.Type]kvCache{
	quant.F32:  {128, true, false, 8, 4, "f32"},
	quant.F16:  {64, true, false, 8, 4, "f16"},
	quant.Q8_0: {34, false, true, 5, 3, "q8_0"},
	quant.Q4_0: {18, false, true, 5, 2, "q4_0"},
}

// kvChunks is kv_chunks of attention_kv.cu: the 16-byte chunks of a
// shared row holding one head of hd elements of type t, misalignment
// included.
func kvChunks(t quant.Type, hd int) int {
	c := kvCaches[t]
	hb := c.groupBytes * (hd / 32)
	if c.aligned {
		return hb / 16
	}
	return (hb + 14 + 15) / 16
}

// kvRow is kv_srow: the bytes of a shared row of nc chunks.
func kvRow(nc int) int { return 16*nc + 4 }

// kvTile is the keys of a tile: the most of 64 (decode only), 32 and 16
// whose K and V chunks take at most loads(type) 16-byte loads for each of
// threads threads.
func kvTile(k, v quant.Type, hd, threads int, most int, loads func(kvCache) int) int {
	nck, ncv := kvChunks(k, hd), kvChunks(v, hd)
	for t := most; t > 16; t /= 2 {
		if t*nck <= threads*loads(kvCaches[k]) && t*ncv <= threads*loads(kvCaches[v]) {
			return t
		}
	}
	return 16
}

// kvDecodeShared is the dynamic shared memory of attention_kv_<k>_<v>
// with tiles of t keys: the query area (AKV_Q), the K and V tiles, and
// t scores and t weights.
func kvDecodeShared(k, v quant.Type, hd, t int) uint32 {
	return uint32(1088 + t*(kvRow(kvChunks(k, hd))+kvRow(kvChunks(v, hd))) + 8*t)
}

// decodeSplits is the key slices of decode's attention launch: those of
// one query row, whatever the rows, so that each of several rows is cut
// (and its slices merged) as its own decode cuts it.
func decodeSplits(o kernels.Attention, multiprocessors int) int {
	return workspace.AttentionSplits(o.NHead, o.K.Rows, multiprocessors)
}

// attentionKV launches attention_kv_<k>_<v> for up to VerifyRows query
// rows: the layout of attention_f16's launch, strides in bytes, and the
// tile.
func (c *compiler) attentionKV(o kernels.Attention, quantize bool, q, k, v, pos, y devicePtr) error {
	nh, hd := o.NHead, o.HeadDim
	b := o.Q.Rows
	t := kvTile(o.K.Type, o.V.Type, hd, 128, 64, func(c kvCache) int { return c.ld1 })
	splits := decodeSplits(o, c.be.info.Multiprocessors)
	part := c.scratch(workspace.Attention, workspace.AttentionBytes(nh*b, splits, hd))
	done := c.scratch(workspace.Counters, workspace.CounterBytes(nh*b))
	var xq, xd devicePtr
	if quantize {
		xq, xd = c.q8Region(o.Dst)
	}
	kernel := "attention_kv_" + kvCaches[o.K.Type].name + "_" + kvCaches[o.V.Type].name
	err := c.add(o.Name(), kernel, [3]uint32{uint32(nh), uint32(b), uint32(splits)}, [3]uint32{128, 1, 1}, kvDecodeShared(o.K.Type, o.V.Type, hd, t),
		argPtr(q), argI64(stride(o.Q)), argPtr(k), argI64(o.K.Stride), argPtr(v), argI64(o.V.Stride), argPtr(pos), argPtr(part),
		argPtr(done), argPtr(y), argI64(stride(o.Dst)), argPtr(xq), argPtr(xd),
		argInt(nh), argInt(o.NKVHead), argInt(hd), argF32(o.Scale), argInt(o.K.Rows), argInt(t))
	if quantize {
		c.holdQ8(o.Dst, 0, err)
	}
	return err
}

// kvRowUnits is ARK_UNITS_MAX of attention_kv.cu; kvMaxShared the
// shared memory a block may take without opting in.
const (
	kvRowUnits  = 16
	kvMaxShared = 48 << 10
)

// planRowAttentionKV is planRowAttention for attention_rows_kv_<k>_<v>:
// up to 16 units a block (8 for heads over 128), tiles of 32 keys, or 16
// where 32 would not fit the loads or the shared memory.
func planRowAttentionKV(o kernels.Attention, multiprocessors int) rowAttention {
	nb, hd := o.Q.Rows, o.HeadDim
	g := o.NHead / o.NKVHead
	units := kvRowUnits
	if hd > 128 {
		units /= 2
	}
	r := rowAttention{kernel: "attention_rows_kv_" + kvCaches[o.K.Type].name + "_" + kvCaches[o.V.Type].name, threads: 256}
	r.gh = min(g, units)
	r.qr = max(1, units/r.gh)
	ucap := r.gh * r.qr
	r.qbytes = ucap * hd * 4
	if kvCaches[o.K.Type].quantized {
		r.qbytes = ucap*hd + ucap*(hd/32)*8
	}
	r.qbytes = (r.qbytes + 15) &^ 15
	tiles := kvRow(kvChunks(o.K.Type, hd)) + kvRow(kvChunks(o.V.Type, hd))
	r.t = kvTile(o.K.Type, o.V.Type, hd, 256, 32, func(c kvCache) int { return c.ldr })
	if r.qbytes+r.t*tiles > kvMaxShared {
		r.t = 16
	}
	r.shared = uint32(r.qbytes + r.t*tiles)
	chunks := (g + r.gh - 1) / r.gh
	blocks := o.NKVHead * chunks * ((nb + r.qr - 1) / r.qr)
	r.splits = workspace.AttentionRowSplits(blocks, o.K.Rows, multiprocessors)
	r.grid = [3]uint32{uint32(o.NKVHead * chunks), ceilDiv(nb, r.qr), uint32(r.splits)}
	return r
}
