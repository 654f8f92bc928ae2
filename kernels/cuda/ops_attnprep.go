package cuda

import (
	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// attnPrep is what a decoder block runs between its Q/K/V products and
// attention: optional per-head RMSNorms of Q and K, their rotations in
// place, and the K and V cache writes. Four to six ops, each a few
// microseconds of launch for a few kilobytes of work at decode, run as one
// launch (attn_prep in rows.cu).
type attnPrep struct {
	qNorm, kNorm kernels.RMSNorm // W invalid when there are no norms
	ropeQ, ropeK kernels.Rope
	setK, setV   kernels.SetRows
}

// attnPrepMaxHead is the widest head attn_prep holds in shared memory.
const attnPrepMaxHead = 256

// matchAttnPrep reports whether ops[i:] begins with an attnPrep sequence,
// and how many ops it spans.
func matchAttnPrep(ops []kernels.Op, i int) (attnPrep, int, bool) {
	var p attnPrep
	j := i
	if nq, ok := ops[j].(kernels.RMSNorm); ok {
		if j+1 >= len(ops) {
			return p, 0, false
		}
		nk, ok := ops[j+1].(kernels.RMSNorm)
		if !ok {
			return p, 0, false
		}
		p.qNorm, p.kNorm = nq, nk
		j += 2
	}
	if j+4 > len(ops) {
		return p, 0, false
	}
	var ok [4]bool
	p.ropeQ, ok[0] = ops[j].(kernels.Rope)
	p.ropeK, ok[1] = ops[j+1].(kernels.Rope)
	p.setK, ok[2] = ops[j+2].(kernels.SetRows)
	p.setV, ok[3] = ops[j+3].(kernels.SetRows)
	if ok != [4]bool{true, true, true, true} || !p.fusable() {
		return p, 0, false
	}
	return p, j + 4 - i, true
}

// fusable reports whether one attn_prep launch does exactly what the ops
// do one after another: rotations in place with the same parameters, the
// K cache written from the rotated K, norms in place over exactly the
// heads rotated, and no written tensor overlapping another operand.
func (p attnPrep) fusable() bool {
	rq, rk, sk, sv := p.ropeQ, p.ropeK, p.setK, p.setV
	q, k, v := rq.X, rk.X, sv.Src
	hd, b := rq.HeadDim, q.Rows
	if rq.Dst != q || rk.Dst != k || !sameRope(rq, rk) || hd > attnPrepMaxHead ||
		k.Rows != b || sk.Src != k || v.Rows != b || v.Cols%hd != 0 || sk.Idx != sv.Idx {
		return false
	}
	// attn_prep_kv writes whole groups of 32 of a head
	if !floatPair(sk.Dst.Type, sv.Dst.Type) && hd%32 != 0 {
		return false
	}
	if p.qNorm.W.Valid() {
		qh, kh := q.Reshape(b*q.Cols/hd, hd), k.Reshape(b*k.Cols/hd, hd)
		if p.qNorm.X != qh || p.qNorm.Dst != qh || p.kNorm.X != kh || p.kNorm.Dst != kh {
			return false
		}
	}
	written := []kernels.Tensor{q, k, sk.Dst, sv.Dst}
	read := []kernels.Tensor{v, rq.Pos, sk.Idx, rq.Factors, p.qNorm.W, p.kNorm.W}
	for i, w := range written {
		for _, t := range written[i+1:] {
			if overlaps(w, t) {
				return false
			}
		}
		for _, t := range read {
			if t.Valid() && overlaps(w, t) {
				return false
			}
		}
	}
	return true
}

// attnPrep launches one warp per head of each row: Q heads, then K, then V.
func (c *compiler) attnPrep(p attnPrep) error {
	rq, sk, sv := p.ropeQ, p.setK, p.setV
	q, k, v := rq.X, p.ropeK.X, sv.Src
	var ptrs [10]devicePtr
	for i, t := range []kernels.Tensor{q, k, v, sk.Dst, sv.Dst, p.qNorm.W, p.kNorm.W, rq.Pos, sk.Idx, rq.Factors} {
		if !t.Valid() {
			continue
		}
		var err error
		if ptrs[i], err = c.be.addr(t); err != nil {
			return err
		}
	}
	hd := rq.HeadDim
	hq, hk, hv := q.Cols/hd, k.Cols/hd, v.Cols/hd
	neox := 0
	if rq.Neox {
		neox = 1
	}
	// attn_prep_<f32|f16> for F32 or F16 caches alike, strides in
	// elements; attn_prep_kv for the rest, strides in bytes
	kernel := "attn_prep_f32"
	kcs, vcs := sk.Dst.Stride, sv.Dst.Stride
	kv := !floatPair(sk.Dst.Type, sv.Dst.Type)
	switch {
	case kv:
		kernel = "attn_prep_kv"
	case sk.Dst.Type == quant.F16:
		kernel = "attn_prep_f16"
	}
	if !kv {
		kcs, vcs = stride(sk.Dst), stride(sv.Dst)
	}
	args := []uint64{argPtr(ptrs[0]), argI64(stride(q)), argPtr(ptrs[1]), argI64(stride(k)), argPtr(ptrs[2]), argI64(stride(v)),
		argPtr(ptrs[3]), argI64(kcs), argInt(sk.Dst.Rows), argPtr(ptrs[4]), argI64(vcs), argInt(sv.Dst.Rows),
		argPtr(ptrs[5]), argPtr(ptrs[6]), argF32(p.qNorm.Eps), argF32(p.kNorm.Eps),
		argPtr(ptrs[7]), argPtr(ptrs[8]), argPtr(ptrs[9]),
		argInt(hq), argInt(hk), argInt(hv), argInt(hd), argInt(rq.Dims), argF32(rq.Base), argF32(rq.Scale), argInt(neox)}
	if kv {
		khb, err := sk.Dst.Type.RowBytes(int64(hd))
		if err != nil {
			return err
		}
		vhb, err := sv.Dst.Type.RowBytes(int64(hd))
		if err != nil {
			return err
		}
		args = append(args, argInt(int(sk.Dst.Type)), argInt(int(sv.Dst.Type)), argI64(khb), argI64(vhb))
	}
	return c.add("attn_prep", kernel, [3]uint32{ceilDiv(hq+hk+hv, 4), uint32(q.Rows), 1}, [3]uint32{128, 1, 1}, 0, args...)
}
