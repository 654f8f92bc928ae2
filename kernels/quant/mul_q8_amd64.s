//go:build !purego

#include "textflag.h"
#include "mul_amd64.h"

// Blocked kernels for Q8_0 and Q5_0 weights with Q8_0 activations. Both
// weight types pack into one panel form, so one tile serves both:
//
//	0    rows 0, 1: the 32 weights of the block as signed bytes each
//	     (Q5_0: q-16)
//	64   rows 2, 3
//	128  rows 0, 1: -128 times the sum of each four neighbouring weights
//	     (eight int32 each)
//	192  rows 2, 3
//	256  rows 0, 1: the scale dx, eight float32 copies each
//	320  rows 2, 3
//
// and the activations go in as unsigned bytes, their quants plus 128
// (packQ8_0Act). VPDPBUSD's sum of four products is then the single-row
// kernel's lane sum plus 128 times the four weights' sum, which the
// panel's third part, the accumulator's starting value, takes off again:
// all exact integers. From there each lane takes the single-row kernel's
// float32 operations in its order: conversion, dx·dy, one fused
// multiply-add per block; at the end its HSUM8.

// Q8PAIR0 loads rows P and Q's 32 quants (at 2(P), 2(Q)) into W as
// [row P | row Q].
#define Q8PAIR0(P, Q, W, YW) \
	VMOVDQU      2(P), YW; \
	VINSERTI64X4 $1, 2(Q), W, W

// Q5PAIR0 leaves rows P and Q's Q5_0 weights q-16 as signed bytes in W:
// the nibbles of each row's 16 bytes (low ones, then high ones, by a
// shift of 128-bit lanes 1 and 3 under K1), plus 16 where its qh bit is
// set (K4, from the two rows' qh words), less 16. Needs Z29 = 0x0F bytes,
// Z28 = 0x10 bytes.
#define Q5PAIR0(P, Q, W, YW) \
	VBROADCASTI32X4 6(P), W; \
	VINSERTI32X4    $2, 6(Q), W, W; \
	VINSERTI32X4    $3, 6(Q), W, W; \
	VPSRLW          $4, W, K1, W; \
	VPANDD          Z29, W, W; \
	KMOVD           2(P), K2; \
	KMOVD           2(Q), K3; \
	KUNPCKDQ        K2, K3, K4; \
	VPADDB          Z28, W, K4, W; \
	VPSUBB          Z28, W, W

// PAIRREST stores the weights of a pair (W) at off(DI), -128 times each
// four's sum at off+128(DI) and the rows' scales (f16 at (P), (Q)) as
// [dx_P ×8 | dx_Q ×8] at off+256(DI). Needs Z31 = 0x80 bytes, Z30 = 0.
#define PAIRREST(P, Q, W, off) \
	VMOVDQU64    W, off(DI); \
	VPXORD       Z4, Z4, Z4; \
	VPDPBUSD     W, Z31, Z4; \
	VPSUBD       Z4, Z30, Z4; \
	VMOVDQU32    Z4, off+128(DI); \
	VPBROADCASTW (P), Y5; \
	VPBROADCASTW (Q), Y6; \
	VINSERTI128  $1, X6, Y5, Y5; \
	VCVTPH2PS    Y5, Z5; \
	VMOVUPS      Z5, off+256(DI)

#define Q8PACKSETUP \
	MOVL         $0x80808080, AX; \
	VPBROADCASTD AX, Z31; \
	VPXORD       Z30, Z30, Z30; \
	MOVQ         rows+0(FP), R8; \
	MOVQ         (R8), AX; \
	MOVQ         8(R8), BX; \
	MOVQ         16(R8), DX; \
	MOVQ         24(R8), SI; \
	MOVQ         nb+8(FP), CX; \
	MOVQ         panel+16(FP), DI

// func packQ8_0x4(rows *[4]*byte, nb int, panel *byte)
//
// Four Q8_0 rows into a panel of 384 bytes a block (see above).
TEXT ·packQ8_0x4(SB), NOSPLIT, $0-24
	Q8PACKSETUP

q80pack:
	Q8PAIR0(AX, BX, Z0, Y0)
	PAIRREST(AX, BX, Z0, 0)
	Q8PAIR0(DX, SI, Z1, Y1)
	PAIRREST(DX, SI, Z1, 64)
	ADDQ $34, AX
	ADDQ $34, BX
	ADDQ $34, DX
	ADDQ $34, SI
	ADDQ $384, DI
	DECQ CX
	JNZ  q80pack
	VZEROUPPER
	RET

// func packQ5_0x4(rows *[4]*byte, nb int, panel *byte)
//
// Four Q5_0 rows into a panel of 384 bytes a block (see above).
TEXT ·packQ5_0x4(SB), NOSPLIT, $0-24
	Q8PACKSETUP
	MOVL         $0x0F0F0F0F, R9
	VPBROADCASTD R9, Z29
	MOVL         $0x10101010, R9
	VPBROADCASTD R9, Z28
	MOVL         $0xFF00FF00, R9
	KMOVD        R9, K1

q50pack:
	Q5PAIR0(AX, BX, Z0, Y0)
	PAIRREST(AX, BX, Z0, 0)
	Q5PAIR0(DX, SI, Z1, Y1)
	PAIRREST(DX, SI, Z1, 64)
	ADDQ $22, AX
	ADDQ $22, BX
	ADDQ $22, DX
	ADDQ $22, SI
	ADDQ $384, DI
	DECQ CX
	JNZ  q50pack
	VZEROUPPER
	RET

// Q8ACT runs activation row a of the tile (quants plus 128 at qoff(R14),
// dy at dyoff(R14)) against the block's two row pairs (weights Z0, Z1,
// scales Z2, Z3) into A0 (rows 0, 1) and A1 (rows 2, 3).
#define Q8ACT(qoff, dyoff, A0, A1) \
	VBROADCASTI32X8 qoff(R14), Z4; \
	VMOVDQU32       128(SI), Z5; \
	VPDPBUSD        Z0, Z4, Z5; \
	VCVTDQ2PS       Z5, Z5; \
	VMULPS.BCST     dyoff(R14), Z2, Z6; \
	VFMADD231PS     Z6, Z5, A0; \
	VMOVDQU32       192(SI), Z7; \
	VPDPBUSD        Z1, Z4, Z7; \
	VCVTDQ2PS       Z7, Z7; \
	VMULPS.BCST     dyoff(R14), Z3, Z8; \
	VFMADD231PS     Z8, Z7, A1

// func mulQ8_0x4x4(panel *byte, np int, act *byte, nb int, out *float32, ld int)
//
// np panels of four Q8_0 or Q5_0 rows (packQ8_0x4, packQ5_0x4; nb blocks,
// panels nb*384 bytes apart) times four activation rows (packQ8_0Act: nb
// blocks of 160 bytes). Act a with rows 2p, 2p+1 keeps the single-row
// kernel's lanes in Z(16+2a+p) = [row 2p | row 2p+1]; folded as HSUM8
// does, act a's sum with row r of panel p is stored at out[a*ld+4p+r]
// (ld in bytes).
TEXT ·mulQ8_0x4x4(SB), NOSPLIT, $0-48
	MOVQ  panel+0(FP), AX
	MOVQ  np+8(FP), BX
	MOVQ  act+16(FP), DI
	MOVQ  nb+24(FP), R9
	MOVQ  out+32(FP), R10
	MOVQ  ld+40(FP), R13
	MOVL  $0x1111, DX
	KMOVW DX, K1

q8panel:
	MOVQ   AX, SI
	MOVQ   DI, R14
	MOVQ   R9, CX
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23

q8block:
	VMOVDQU64 (SI), Z0
	VMOVDQU64 64(SI), Z1
	VMOVUPS   256(SI), Z2
	VMOVUPS   320(SI), Z3
	Q8ACT(0, 128, Z16, Z17)
	Q8ACT(32, 132, Z18, Z19)
	Q8ACT(64, 136, Z20, Z21)
	Q8ACT(96, 140, Z22, Z23)
	ADDQ $384, SI
	ADDQ $160, R14
	DECQ CX
	JNZ  q8block

	REDUCE4(Z16, Z17, Z24, Z25)
	VCOMPRESSPS Z16, K1, (R10)
	REDUCE4(Z18, Z19, Z24, Z25)
	VCOMPRESSPS Z18, K1, (R10)(R13*1)
	REDUCE4(Z20, Z21, Z24, Z25)
	VCOMPRESSPS Z20, K1, (R10)(R13*2)
	LEAQ        (R10)(R13*2), R11
	REDUCE4(Z22, Z23, Z24, Z25)
	VCOMPRESSPS Z22, K1, (R11)(R13*1)

	MOVQ SI, AX // SI ends where the next panel begins
	ADDQ $16, R10
	DECQ BX
	JNZ  q8panel
	VZEROUPPER
	RET
