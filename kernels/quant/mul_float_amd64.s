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

// func mulF32x2x6(panel, act *byte, n int, out *tileOut)
//
// Two weight rows of n float32 (the panel, rows n apart) times six
// activation rows of n float32 (n apart), both in permute32's order, n a
// multiple of 32. Row r with act a accumulates in Z(12r+2a) = [acc0 acc2]
// and Z(12r+2a+1) = [acc1 acc3] of the single-row kernel; the sums are
// folded as it folds them (ADD4, then HSUM8) and stored as tileOut's
// vectors 0-2 (f16Blocked says which lane is which).
TEXT ·mulF32x2x6(SB), NOSPLIT, $0-32
	MOVQ panel+0(FP), SI
	MOVQ act+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ out+24(FP), R10
	MOVQ CX, R8
	SHLQ $2, R8            // row stride in bytes
	LEAQ (SI)(R8*1), R11   // weight row 1
	LEAQ (R8)(R8*2), R9
	LEAQ (DI)(R9*1), R12   // activation row 3
	SHRQ $5, CX
	ZERO24

f32step:
	VMOVUPS (SI), Z26
	VMOVUPS 64(SI), Z27
	VMOVUPS (R11), Z28
	VMOVUPS 64(R11), Z29
	F32ACT((DI), 64(DI), Z0, Z1, Z12, Z13)
	F32ACT((DI)(R8*1), 64(DI)(R8*1), Z2, Z3, Z14, Z15)
	F32ACT((DI)(R8*2), 64(DI)(R8*2), Z4, Z5, Z16, Z17)
	F32ACT((R12), 64(R12), Z6, Z7, Z18, Z19)
	F32ACT((R12)(R8*1), 64(R12)(R8*1), Z8, Z9, Z20, Z21)
	F32ACT((R12)(R8*2), 64(R12)(R8*2), Z10, Z11, Z22, Z23)
	ADDQ    $128, SI
	ADDQ    $128, R11
	ADDQ    $128, DI
	ADDQ    $128, R12
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
	VMOVUPS Z0, (R10)
	VMOVUPS Z4, 64(R10)
	VMOVUPS Z8, 128(R10)
	VZEROUPPER
	RET
