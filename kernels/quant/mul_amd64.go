//go:build !purego

package quant

import (
	"encoding/binary"
	"math"

	"golang.org/x/sys/cpu"
)

// The blocked kernels (mul_*_amd64.s) keep a whole tile's accumulators in
// AVX-512's 32 vector registers and take 16 float lanes, or 32 int16
// products (AVX-512 VNNI's VPDPWSSD), per instruction. They are
// hand-written, as the single-row kernels are, because Go has no vector
// intrinsics and no library offers products on these block layouts that
// round as ggml's do. Q8_0 and Q5_0 batches shorter than q8MinRows take
// the four-by-four kernel (rows_quad_amd64.s), which unpacks the weights
// in registers and needs no panel.

// hasAVX512 is set once at start: 512-bit registers with byte, word and
// doubleword ops (BW, DQ) and their 256-bit forms (VL).
var hasAVX512 = hasAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW &&
	cpu.X86.HasAVX512DQ && cpu.X86.HasAVX512VL

// hasVNNI512 adds VPDPBUSD and VPDPWSSD on 512-bit registers.
var hasVNNI512 = hasAVX512 && cpu.X86.HasAVX512VNNI

func blockedKernel(w Type) (*blocked, bool) {
	switch {
	case w == F16 && hasAVX512:
		return &f16Blocked, true
	case w == Q6_K && hasVNNI512:
		return &q6_KBlocked, true
	case w == Q4_K && hasVNNI512:
		return &q4_KBlocked, true
	case w == Q8_0 && hasVNNI512:
		return &q8_0Blocked, true
	case w == Q5_0 && hasVNNI512:
		return &q5_0Blocked, true
	}
	return nil, false
}

// f16Blocked is F16 weights (rows converted to float32 in the panel) with
// float32 activations: tiles of 2 weight rows x 6 activation rows, each
// output two 16-lane accumulators (see permute32).
var f16Blocked = blocked{
	layout: layoutF32,
	rows:   2, acts: 6, minRows: 3,
	panelBytes: func(n int) int { return 2 * 4 * n },
	pack: func(ptrs []*byte, n int, panel []byte) {
		for i, p := range ptrs[:2] {
			packF16AVX2(p, n, &f32Slice(panel[i*4*n:], n)[0])
		}
	},
	packAct:  packF32Act,
	actBytes: func(n int) int { return 4 * n },
	tile: func(panel []byte, np int, act []byte, n int, out []float32, ld int) {
		_, _, _ = panel[np*2*4*n-1], act[6*4*n-1], out[5*ld+2*np-1]
		mulF32x2x6(&panel[0], np, &act[0], n, &out[0], 4*ld)
	},
}

// The activation layouts.
const (
	layoutF32   = iota + 1 // packF32Act
	layoutQ8K16            // packQ8KAct
	layoutQ8_0             // packQ8_0Act
)

// kBlocked is a K-quant's tile with Q8_K activations, both sides as int16
// (see mul_k_amd64.s): 4 weight rows x 4 activation rows.
func kBlocked(minRows, panelBytes int, pack func(ptrs *[4]*byte, nb int, panel *byte),
	tile func(panel *byte, np int, act *byte, nb int, out *float32, ld int)) blocked {
	return blocked{
		layout: layoutQ8K16,
		rows:   4, acts: 4, minRows: minRows,
		panelBytes: func(nb int) int { return nb * panelBytes },
		pack: func(ptrs []*byte, nb int, panel []byte) {
			_ = panel[nb*panelBytes-1]
			pack((*[4]*byte)(ptrs), nb, &panel[0])
		},
		packAct:  packQ8KAct,
		actBytes: func(nb int) int { return q8KTileBytes / 4 * nb },
		tile: func(panel []byte, np int, act []byte, nb int, out []float32, ld int) {
			_, _, _ = panel[np*nb*panelBytes-1], act[nb*q8KTileBytes-1], out[3*ld+4*np-1]
			tile(&panel[0], np, &act[0], nb, &out[0], 4*ld)
		},
	}
}

var (
	// Q6_K: each row's 256 weights (q-32)·scale as int16, then the four
	// rows' d as float32.
	q6_KBlocked = kBlocked(q6KMinRows, 4*512+4*4, packQ6_Kx4, mulQ6_Kx4x4)
	// Q4_K: each row's 256 weights q·scale as int16, the mins for
	// VPDPWSSD in the tile's lane order (four vectors), d and dmin by lane.
	q4_KBlocked = kBlocked(q4KMinRows, 4*512+4*64+2*64, packQ4_Kx4, mulQ4_Kx4x4)
)

// q4KMinRows and q6KMinRows are the shortest Q4_K and Q6_K batches the
// tiles take; shorter ones (speculative verification) go through
// DotsFunc's four-row kernels (dotQ4_Kx4VNNI, dotQ6_Kx4VNNI), which
// decode the weights in registers as they stream in. The tiles' packing
// (weights widened to int16 in a panel) does not overlap the weights'
// reads: on a model whose weights stream from memory (64 MB matrices of
// 2048 columns, one core, BenchmarkMatMulVerify, process CPU time) a
// product of 2-4 rows cost 2.7-2.8x (Q4_K) and 2.1x (Q6_K) one row
// through the tiles, 1.6x and 1.05x through the four-row kernels; the
// tiles won again from about 12 rows (16 rows: Q4_K 24-29 ms against
// 33, Q6_K 20 against 29). Within the caches (the demo models) the tiles
// were faster from 2 rows.
const (
	q4KMinRows = 12
	q6KMinRows = 12
)

// q8KTileBytes is one block of four Q8_K activation rows as packQ8KAct
// lays them out: the rows' 256 quants as int16 (512 bytes each); the
// scales dy of rows 0, 1 (eight float32 copies each) and of rows 2, 3
// (Q6_K's lanes); for Q4_K's mins, four vectors whose dword lane 4a+r
// holds row a's sums of sub-blocks 2t and 2t+1 (each the sum of two of
// Q8_K's bsums); dy of row a in lanes 4a..4a+3.
const q8KTileBytes = 4*512 + 2*64 + 4*64 + 64

// packQ8KAct lays out a Q8_K activation row for the K-quant kernels, in
// tiles of four rows (q8KTileBytes a block).
func packQ8KAct(b *Batch, i int, v *Vec) {
	tile := b.data[i/4*q8KTileBytes*b.nb:]
	for blk := range b.nb {
		src := v.Q[blk*q8_KBytes : (blk+1)*q8_KBytes]
		dst := tile[blk*q8KTileBytes : (blk+1)*q8KTileBytes]
		widenI8(&src[4], &dst[i%4*512], 256)
		a := i % 4
		d := binary.LittleEndian.Uint32(src)
		s := dst[2048+a/2*64+a%2*32:][:32]
		for j := 0; j < 32; j += 4 {
			binary.LittleEndian.PutUint32(s[j:], d)
		}
		for j := range 4 {
			binary.LittleEndian.PutUint32(dst[2432+16*a+4*j:], d)
		}
		for t := range 4 {
			lo := uint16(q8KBlockSum(src, 4*t) + q8KBlockSum(src, 4*t+1))
			hi := uint16(q8KBlockSum(src, 4*t+2) + q8KBlockSum(src, 4*t+3))
			for j := range 4 {
				o := 2176 + 64*t + 16*a + 4*j
				binary.LittleEndian.PutUint16(dst[o:], lo)
				binary.LittleEndian.PutUint16(dst[o+2:], hi)
			}
		}
	}
}

// q8_0Blocked and q5_0Blocked are Q8_0 and Q5_0 weights with Q8_0
// activations (mul_q8_amd64.s): both decode into one panel form (the
// weights as signed bytes, their sums for VPDPBUSD's offset, dx by lane),
// so one tile of 8 weight rows x 4 activation rows serves both.
var (
	q8_0Blocked = q8Blocked(packQ8_0x8)
	q5_0Blocked = q8Blocked(packQ5_0x8)
)

func q8Blocked(pack func(ptrs *[8]*byte, nb int, panel *byte)) blocked {
	return blocked{
		layout: layoutQ8_0,
		rows:   8, acts: 4, minRows: q8MinRows,
		panelBytes: func(nb int) int { return nb * q8PanelBytes },
		pack: func(ptrs []*byte, nb int, panel []byte) {
			_ = panel[nb*q8PanelBytes-1]
			pack((*[8]*byte)(ptrs), nb, &panel[0])
		},
		packAct:  packQ8_0Act,
		actBytes: func(nb int) int { return q8TileBytes / 4 * nb },
		tile: func(panel []byte, np int, act []byte, nb int, out []float32, ld int) {
			_, _, _ = panel[np*nb*q8PanelBytes-1], act[nb*q8TileBytes-1], out[3*ld+8*np-1]
			mulQ8_0x8x4(&panel[0], np, &act[0], nb, &out[0], 4*ld)
		},
	}
}

const (
	// q8PanelBytes is one block of eight weight rows in the panel.
	q8PanelBytes = 576
	// q8TileBytes is one block of four Q8_0 activation rows as
	// packQ8_0Act lays them out: each row's 32 quants plus 128 (unsigned
	// bytes for VPDPBUSD), the four scales dy as float32, 16 bytes of
	// padding (every row's quants stay 32-byte aligned).
	q8TileBytes = 4*32 + 4*4 + 16
	// q8MinRows is the shortest batch the Q8_0 and Q5_0 tiles take:
	// with 8 rows the four-by-four kernel, which needs no panel, was
	// faster (0.84x), with 12 the tiles (1.07x Q8_0, 1.1x Q5_0; 1.5-1.7x
	// and 1.8-2x with 128 rows), 256 x 1024 weights on one core.
	q8MinRows = 12
)

// packQ8_0Act lays out a Q8_0 activation row for the Q8_0 and Q5_0 tiles,
// in tiles of four rows (q8TileBytes a block).
func packQ8_0Act(b *Batch, i int, v *Vec) {
	tile := b.data[i/4*q8TileBytes*b.nb:][:q8TileBytes*b.nb]
	a := i % 4
	for blk := range b.nb {
		src := v.Q[blk*q8_0Bytes : (blk+1)*q8_0Bytes]
		dst := tile[blk*q8TileBytes : (blk+1)*q8TileBytes]
		for j := 0; j < 32; j += 8 {
			q := binary.LittleEndian.Uint64(src[2+j:])
			binary.LittleEndian.PutUint64(dst[32*a+j:], q^0x8080808080808080)
		}
		binary.LittleEndian.PutUint32(dst[128+4*a:], f16Bits(binary.LittleEndian.Uint16(src)))
	}
}

// f16Bits is the float32 bits of the binary16 h as VCVTPH2PS gives them,
// which the single-row kernels use: halfToFloat's, with a signalling NaN
// made quiet.
func f16Bits(h uint16) uint32 {
	f := math.Float32bits(halfToFloat(h))
	if f&0x7fffffff > 0x7f800000 {
		f |= 0x400000
	}
	return f
}

//go:noescape
func packQ8_0x8(rows *[8]*byte, nb int, panel *byte)

//go:noescape
func packQ5_0x8(rows *[8]*byte, nb int, panel *byte)

//go:noescape
func mulQ8_0x8x4(panel *byte, np int, act *byte, nb int, out *float32, ld int)

//go:noescape
func packF16AVX2(src *byte, n int, dst *float32)

//go:noescape
func mulF32x2x6(panel *byte, np int, act *byte, n int, out *float32, ld int)

//go:noescape
func widenI8(src, dst *byte, n int)

//go:noescape
func packQ6_Kx4(rows *[4]*byte, nb int, panel *byte)

//go:noescape
func mulQ6_Kx4x4(panel *byte, np int, act *byte, nb int, out *float32, ld int)

//go:noescape
func packQ4_Kx4(rows *[4]*byte, nb int, panel *byte)

//go:noescape
func mulQ4_Kx4x4(panel *byte, np int, act *byte, nb int, out *float32, ld int)
