//go:build !purego

package quant

import "golang.org/x/sys/cpu"

// The blocked kernels (mul_*_amd64.s) keep a whole tile's accumulators in
// AVX-512's 32 vector registers and take 16 float lanes, or 64 bytes, per
// instruction; the Q8_0 family multiplies bytes with AVX-512 VNNI's
// VPDPBUSD, which adds four byte products to each int32 lane: the very
// lanes the single-row kernels sum with VPMADDUBSW and VPMADDWD, in one
// instruction instead of four. They are hand-written, as the single-row
// kernels are, because Go has no vector intrinsics and no library offers
// products on these block layouts that round as ggml's do.

// hasAVX512 is set once at start: 512-bit registers with byte, word and
// doubleword ops (BW, DQ) and their 256-bit forms (VL).
var hasAVX512 = hasAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW &&
	cpu.X86.HasAVX512DQ && cpu.X86.HasAVX512VL

// hasVNNI512 adds VPDPBUSD on 512-bit registers.
var hasVNNI512 = hasAVX512 && cpu.X86.HasAVX512VNNI

func blockedKernel(w Type) (*blocked, bool) {
	switch {
	case w == F16 && hasAVX512:
		return &f16Blocked, true
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
	rows:   2, acts: 6,
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

// q8Blocked is the Q8_0 family's tile: 4 weight rows x 12 activation rows
// (6 pairs, see packQ8Act), the panel holding per block and row the
// weights as signed bytes, -128 times their sums of four (the activations
// are offset by 128 to be unsigned for VPDPBUSD) and the scale.
func q8Blocked(pack func(ptrs *[4]*byte, nb int, panel *byte)) blocked {
	return blocked{
		layout: layoutQ8Pairs,
		rows:   4, acts: 12,
		panelBytes: func(nb int) int { return nb * q8PanelBytes },
		pack: func(ptrs []*byte, nb int, panel []byte) {
			_ = panel[nb*q8PanelBytes-1]
			pack((*[4]*byte)(ptrs), nb, &panel[0])
		},
		packAct:  packQ8Act,
		actBytes: func(nb int) int { return q8PairBytes / 2 * nb },
		tile: func(panel []byte, np int, act []byte, nb int, out []float32, ld int) {
			_, _, _ = panel[np*nb*q8PanelBytes-1], act[6*q8PairBytes*nb-1], out[11*ld+4*np-1]
			mulQ8x4x12(&panel[0], np, &act[0], nb, q8PairBytes*nb, &out[0], 4*ld)
		},
	}
}

// The activation layouts.
const (
	layoutF32     = iota + 1 // packF32Act
	layoutQ8Pairs            // packQ8Act
)

// q8PanelBytes is one block of a Q8_0-family panel: four rows' weights
// (64 bytes each: the block's 32 twice, one copy per activation row of a
// pair), their offset sums (64 bytes each) and scales (float32 each).
const q8PanelBytes = 4*64 + 4*64 + 4*4

var (
	q8_0Blocked = q8Blocked(packQ8_0x4)
	q5_0Blocked = q8Blocked(packQ5_0x4)
)

//go:noescape
func packF16AVX2(src *byte, n int, dst *float32)

//go:noescape
func mulF32x2x6(panel *byte, np int, act *byte, n int, out *float32, ld int)

//go:noescape
func packQ8_0x4(rows *[4]*byte, nb int, panel *byte)

//go:noescape
func packQ5_0x4(rows *[4]*byte, nb int, panel *byte)

//go:noescape
func mulQ8x4x12(panel *byte, np int, act *byte, nb, pairStride int, out *float32, ld int)
