//go:build !purego

#include "textflag.h"
#include "mul_amd64.h"

// func packF16AVX2(src *byte, n int, dst *float32)
//
// One F16 weight row of n elements (n a multiple of 32) as float32, each
// 32 in permute32's order.
TEXT ·packF16AVX2(SB), NOSPLIT, $0-24
	MOVQ src+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ dst+16(FP), DI
	SHRQ $5, CX

f16step:
	VCVTPH2PS (SI), Y0
	VCVTPH2PS 16(SI), Y1
	VCVTPH2PS 32(SI), Y2
	VCVTPH2PS 48(SI), Y3
	VMOVUPS   Y0, (DI)
	VMOVUPS   Y2, 32(DI)
	VMOVUPS   Y1, 64(DI)
	VMOVUPS   Y3, 96(DI)
	ADDQ      $64, SI
	ADDQ      $128, DI
	DECQ      CX
	JNZ       f16step
	VZEROUPPER
	RET

// F32ACT multiplies 32 elements of one activation row (lo, hi: its two
// 16-float halves) with the two weight rows in Z26-Z29 into the
// accumulators A0, A1 (row 0) and B0, B1 (row 1): each lane does what the
// single-row kernel's lane does with the same elements.
#define F32ACT(lo, hi, A0, A1, B0, B1) \
	VMOVUPS     lo, Z24; \
	VMOVUPS     hi, Z25; \
	VFMADD231PS Z24, Z26, A0; \
	VFMADD231PS Z25, Z27, A1; \
	VFMADD231PS Z24, Z28, B0; \
	VFMADD231PS Z25, Z29, B1

// F32STORE adds the empty tail's 0 to the four sums in lanes 0, 4, 8 and
// 12 of Z (rows 0 and 1 of two acts) and stores them to the two acts' rows
// at R14, R14+R13, moving R14 on two rows (Z1 scratch, K1 = 0x1111, Z30 = 0).
#define F32STORE(Z) \
	VADDPS      Z30, Z, Z; \
	VCOMPRESSPS Z, K1, Z1; \
	VMOVQ       X1, (R14); \
	VMOVHPS     X1, (R14)(R13*1); \
	LEAQ        (R14)(R13*2), R14

// func mulF32x2x6(panel *byte, np int, act *byte, n int, out *float32, ld int)
//
// np panels of two weight rows of n float32 (rows n apart, panels 2n
// apart) times six activation rows of n float32 (n apart), both in
// permute32's order, n a multiple of 32. For panel p, row r with act a
// accumulates in Z(12r+2a) = [acc0 acc2] and Z(12r+2a+1) = [acc1 acc3] of
// the single-row kernel; the sums are folded as it folds them (ADD4, plus
// the empty tail's 0, then HSUM8) and stored at out[a*ld+2p+r] (ld in
// bytes).
TEXT ·mulF32x2x6(SB), NOSPLIT, $0-48
	MOVQ   panel+0(FP), AX
	MOVQ   np+8(FP), BX
	MOVQ   act+16(FP), DI
	MOVQ   n+24(FP), R8
	MOVQ   out+32(FP), R10
	MOVQ   ld+40(FP), R13
	SHLQ   $2, R8            // row stride in bytes
	LEAQ   (R8)(R8*2), R9
	LEAQ   (DI)(R9*1), R12   // activation row 3
	VPXORD Z30, Z30, Z30
	MOVL   $0x1111, DX
	KMOVW  DX, K1

f32panel:
	MOVQ AX, SI
	LEAQ (SI)(R8*1), R11 // weight row 1
	MOVQ R8, CX
	SHRQ $7, CX          // steps of 32 elements
	MOVQ DI, R14
	MOVQ R12, DX
	ZERO24

f32step:
	VMOVUPS (SI), Z26
	VMOVUPS 64(SI), Z27
	VMOVUPS (R11), Z28
	VMOVUPS 64(R11), Z29
	F32ACT((R14), 64(R14), Z0, Z1, Z12, Z13)
	F32ACT((R14)(R8*1), 64(R14)(R8*1), Z2, Z3, Z14, Z15)
	F32ACT((R14)(R8*2), 64(R14)(R8*2), Z4, Z5, Z16, Z17)
	F32ACT((DX), 64(DX), Z6, Z7, Z18, Z19)
	F32ACT((DX)(R8*1), 64(DX)(R8*1), Z8, Z9, Z20, Z21)
	F32ACT((DX)(R8*2), 64(DX)(R8*2), Z10, Z11, Z22, Z23)
	ADDQ    $128, SI
	ADDQ    $128, R11
	ADDQ    $128, R14
	ADDQ    $128, DX
	DECQ    CX
	JNZ     f32step

	// [acc0+acc1 acc2+acc3] per pair, then [row 0 | row 1] per act.
	VADDPS Z1, Z0, Z0
	VADDPS Z13, Z12, Z12
	PAIRSUM(Z0, Z12, Z24, Z25)
	VADDPS Z3, Z2, Z2
	VADDPS Z15, Z14, Z14
	PAIRSUM(Z2, Z14, Z24, Z25)
	VADDPS Z5, Z4, Z4
	VADDPS Z17, Z16, Z16
	PAIRSUM(Z4, Z16, Z24, Z25)
	VADDPS Z7, Z6, Z6
	VADDPS Z19, Z18, Z18
	PAIRSUM(Z6, Z18, Z24, Z25)
	VADDPS Z9, Z8, Z8
	VADDPS Z21, Z20, Z20
	PAIRSUM(Z8, Z20, Z24, Z25)
	VADDPS Z11, Z10, Z10
	VADDPS Z23, Z22, Z22
	PAIRSUM(Z10, Z22, Z24, Z25)
	REDUCE4(Z0, Z2, Z24, Z25)
	REDUCE4(Z4, Z6, Z24, Z25)
	REDUCE4(Z8, Z10, Z24, Z25)

	// Lanes 0, 4, 8, 12: (row 0, act 2k), (row 1, act 2k), (row 0, act
	// 2k+1), (row 1, act 2k+1); two rows are neighbours in out.
	MOVQ R10, R14
	F32STORE(Z0)
	F32STORE(Z4)
	F32STORE(Z8)

	LEAQ (AX)(R8*2), AX // next panel: 2n floats on
	ADDQ $8, R10
	DECQ BX
	JNZ  f32panel
	VZEROUPPER
	RET
