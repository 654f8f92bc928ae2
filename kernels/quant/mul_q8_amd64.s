//go:build !purego

#include "textflag.h"
#include "mul_amd64.h"

// Blocked kernels for Q8_0 and Q5_0 weights with Q8_0 activations. Both
// weight types pack into one panel form, so one tile serves both. The
// single-row kernel's lane k (k = 0..7) holds the sums of elements
// 4k..4k+3 of every block; here a 512-bit register holds lanes 2j and
// 2j+1 of eight weight rows (dword 2r+t: row r's lane 2j+t), so one
// broadcast of eight activation bytes meets eight rows at once, and one
// product dx·dy per row serves all four registers of a block. A panel
// block of eight rows (576 bytes):
//
//	0    four registers j = 0..3 of weights as signed bytes (Q5_0: q-16),
//	     qword r: row r's bytes 8j..8j+7
//	256  the same four for -128 times each four weights' sum (int32)
//	512  the rows' scales dx as float32, dword 2r+t: row r's
//
// and the activations go in as unsigned bytes, their quants plus 128
// (packQ8_0Act). VPDPBUSD's sum of four products is then the single-row
// kernel's lane sum plus 128 times the four weights' sum, which the
// accumulator's starting value takes off again: all exact integers. From
// there each lane takes the single-row kernel's float32 operations in its
// order: conversion, dx·dy, one fused multiply-add per block; at the end
// its HSUM8.

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

// q8PackIdx picks, from rows [r | r+1] and [r+2 | r+3] as qwords, each
// row's qwords 0, 1 (VPERMT2Q; +64: qwords 2, 3) in row order.
DATA q8PackIdx<>+0(SB)/8, $0
DATA q8PackIdx<>+8(SB)/8, $4
DATA q8PackIdx<>+16(SB)/8, $8
DATA q8PackIdx<>+24(SB)/8, $12
DATA q8PackIdx<>+32(SB)/8, $1
DATA q8PackIdx<>+40(SB)/8, $5
DATA q8PackIdx<>+48(SB)/8, $9
DATA q8PackIdx<>+56(SB)/8, $13
DATA q8PackIdx<>+64(SB)/8, $2
DATA q8PackIdx<>+72(SB)/8, $6
DATA q8PackIdx<>+80(SB)/8, $10
DATA q8PackIdx<>+88(SB)/8, $14
DATA q8PackIdx<>+96(SB)/8, $3
DATA q8PackIdx<>+104(SB)/8, $7
DATA q8PackIdx<>+112(SB)/8, $11
DATA q8PackIdx<>+120(SB)/8, $15
GLOBL q8PackIdx<>(SB), RODATA|NOPTR, $128

// PANELW stores weight register W as register j of the panel block at
// DI, and -128 times each four's sum (Z31 = 0x80 bytes, Z30 = 0) as its
// correction.
#define PANELW(W, j) \
	VMOVDQU64 W, 64*j(DI); \
	VPXORD    Z4, Z4, Z4; \
	VPDPBUSD  W, Z31, Z4; \
	VPSUBD    Z4, Z30, Z4; \
	VMOVDQU32 Z4, 256+64*j(DI)

// DXROW stores row r's scale (f16 at (P)) as dwords 2r and 2r+1 of the
// panel block's scales.
#define DXROW(P, r) \
	VPBROADCASTW (P), X5; \
	VCVTPH2PS    X5, X5; \
	VMOVQ        X5, 512+8*r(DI)

// PANEL8 turns the four row pairs Z0-Z3 ([row 2i | row 2i+1]) into the
// panel block at DI: qword j of every row into register j (VPERMT2Q
// within four rows, then halves of two), the corrections, the scales.
// Needs Z26, Z27 = q8PackIdx.
#define PANEL8 \
	VMOVDQA64  Z0, Z8; \
	VPERMT2Q   Z1, Z26, Z8; \
	VMOVDQA64  Z0, Z9; \
	VPERMT2Q   Z1, Z27, Z9; \
	VMOVDQA64  Z2, Z10; \
	VPERMT2Q   Z3, Z26, Z10; \
	VMOVDQA64  Z2, Z11; \
	VPERMT2Q   Z3, Z27, Z11; \
	VSHUFI64X2 $0x44, Z10, Z8, Z12; \
	VSHUFI64X2 $0xEE, Z10, Z8, Z13; \
	VSHUFI64X2 $0x44, Z11, Z9, Z14; \
	VSHUFI64X2 $0xEE, Z11, Z9, Z15; \
	PANELW(Z12, 0); \
	PANELW(Z13, 1); \
	PANELW(Z14, 2); \
	PANELW(Z15, 3); \
	DXROW(AX, 0); \
	DXROW(BX, 1); \
	DXROW(DX, 2); \
	DXROW(SI, 3); \
	DXROW(R8, 4); \
	DXROW(R9, 5); \
	DXROW(R10, 6); \
	DXROW(R11, 7)

#define Q8PACKSETUP \
	MOVL         $0x80808080, AX; \
	VPBROADCASTD AX, Z31; \
	VPXORD       Z30, Z30, Z30; \
	MOVQ         rows+0(FP), R12; \
	MOVQ         (R12), AX; \
	MOVQ         8(R12), BX; \
	MOVQ         16(R12), DX; \
	MOVQ         24(R12), SI; \
	MOVQ         32(R12), R8; \
	MOVQ         40(R12), R9; \
	MOVQ         48(R12), R10; \
	MOVQ         56(R12), R11; \
	MOVQ         nb+8(FP), CX; \
	MOVQ         panel+16(FP), DI; \
	VMOVDQU64    q8PackIdx<>(SB), Z26; \
	VMOVDQU64    q8PackIdx<>+64(SB), Z27

// Q8NEXT moves the eight row pointers on by n bytes and the panel on by a
// block.
#define Q8NEXT(n) \
	ADDQ n, AX; \
	ADDQ n, BX; \
	ADDQ n, DX; \
	ADDQ n, SI; \
	ADDQ n, R8; \
	ADDQ n, R9; \
	ADDQ n, R10; \
	ADDQ n, R11; \
	ADDQ $576, DI

// func packQ8_0x8(rows *[8]*byte, nb int, panel *byte)
//
// Eight Q8_0 rows into a panel of 576 bytes a block (see above).
TEXT ·packQ8_0x8(SB), NOSPLIT, $0-24
	Q8PACKSETUP

q80pack:
	Q8PAIR0(AX, BX, Z0, Y0)
	Q8PAIR0(DX, SI, Z1, Y1)
	Q8PAIR0(R8, R9, Z2, Y2)
	Q8PAIR0(R10, R11, Z3, Y3)
	PANEL8
	Q8NEXT($34)
	DECQ CX
	JNZ  q80pack
	VZEROUPPER
	RET

// func packQ5_0x8(rows *[8]*byte, nb int, panel *byte)
//
// Eight Q5_0 rows into a panel of 576 bytes a block (see above).
TEXT ·packQ5_0x8(SB), NOSPLIT, $0-24
	Q8PACKSETUP
	MOVL         $0x0F0F0F0F, R13
	VPBROADCASTD R13, Z29
	MOVL         $0x10101010, R13
	VPBROADCASTD R13, Z28
	MOVL         $0xFF00FF00, R13
	KMOVD        R13, K1

q50pack:
	Q5PAIR0(AX, BX, Z0, Y0)
	Q5PAIR0(DX, SI, Z1, Y1)
	Q5PAIR0(R8, R9, Z2, Y2)
	Q5PAIR0(R10, R11, Z3, Y3)
	PANEL8
	Q8NEXT($22)
	DECQ CX
	JNZ  q50pack
	VZEROUPPER
	RET

// Q8J runs weight register j (W, its correction at off(SI)) against the
// activation row's bytes 8j..8j+7 (at qoff(R14)) into ACC, dd in Z5.
#define Q8J(W, qoff, off, A, T, ACC) \
	VPBROADCASTQ qoff(R14), A; \
	VMOVDQU32    off(SI), T; \
	VPDPBUSD     W, A, T; \
	VCVTDQ2PS    T, T; \
	VFMADD231PS  Z5, T, ACC

// Q8ACT runs activation row a of the tile (quants plus 128 at qoff(R14),
// dy at dyoff(R14)) against the block's eight rows (weights Z0-Z3,
// scales Z4) into A0-A3.
#define Q8ACT(qoff, dyoff, A0, A1, A2, A3) \
	VMULPS.BCST dyoff(R14), Z4, Z5; \
	Q8J(Z0, qoff, 256, Z6, Z7, A0); \
	Q8J(Z1, qoff+8, 320, Z8, Z9, A1); \
	Q8J(Z2, qoff+16, 384, Z10, Z11, A2); \
	Q8J(Z3, qoff+24, 448, Z12, Z13, A3)

// Q8OUT folds act a's four registers as HSUM8 does each row's lanes
// (lanes k and k+4, then 2j and 2j+1's sums, then the last two, for all
// eight rows at once) and stores the rows' sums at DST.
#define Q8OUT(A0, A1, A2, A3, DST) \
	VADDPS      A2, A0, A0; \
	VADDPS      A3, A1, A1; \
	VADDPS      A1, A0, A0; \
	VPERMILPS   $0xb1, A0, A1; \
	VADDPS      A1, A0, A0; \
	VCOMPRESSPS A0, K1, DST

// func mulQ8_0x8x4(panel *byte, np int, act *byte, nb int, out *float32, ld int)
//
// np panels of eight Q8_0 or Q5_0 rows (packQ8_0x8, packQ5_0x8; nb
// blocks, panels nb*576 bytes apart) times four activation rows
// (packQ8_0Act: nb blocks of 160 bytes). Act a with row r of panel p is
// stored at out[a*ld+8p+r] (ld in bytes).
TEXT ·mulQ8_0x8x4(SB), NOSPLIT, $0-48
	MOVQ  panel+0(FP), AX
	MOVQ  np+8(FP), BX
	MOVQ  act+16(FP), DI
	MOVQ  nb+24(FP), R9
	MOVQ  out+32(FP), R10
	MOVQ  ld+40(FP), R13
	MOVL  $0x5555, DX
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
	VPXORD Z24, Z24, Z24
	VPXORD Z25, Z25, Z25
	VPXORD Z26, Z26, Z26
	VPXORD Z27, Z27, Z27
	VPXORD Z28, Z28, Z28
	VPXORD Z29, Z29, Z29
	VPXORD Z30, Z30, Z30
	VPXORD Z31, Z31, Z31

q8block:
	VMOVDQU64 (SI), Z0
	VMOVDQU64 64(SI), Z1
	VMOVDQU64 128(SI), Z2
	VMOVDQU64 192(SI), Z3
	VMOVUPS   512(SI), Z4
	Q8ACT(0, 128, Z16, Z17, Z18, Z19)
	Q8ACT(32, 132, Z20, Z21, Z22, Z23)
	Q8ACT(64, 136, Z24, Z25, Z26, Z27)
	Q8ACT(96, 140, Z28, Z29, Z30, Z31)
	ADDQ $576, SI
	ADDQ $160, R14
	DECQ CX
	JNZ  q8block

	Q8OUT(Z16, Z17, Z18, Z19, (R10))
	Q8OUT(Z20, Z21, Z22, Z23, (R10)(R13*1))
	Q8OUT(Z24, Z25, Z26, Z27, (R10)(R13*2))
	LEAQ (R10)(R13*2), R11
	Q8OUT(Z28, Z29, Z30, Z31, (R11)(R13*1))

	MOVQ SI, AX // SI ends where the next panel begins
	ADDQ $32, R10
	DECQ BX
	JNZ  q8panel
	VZEROUPPER
	RET
