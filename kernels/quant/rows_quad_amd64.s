//go:build !purego

#include "textflag.h"
#include "mul_amd64.h"

// Four weight rows times four activation rows: the weights of each block
// are unpacked once (two rows to a register, as above) and their scales
// converted once, then each activation row takes five operations per
// pair of weight rows. A speculative verification batch runs through
// this, not the blocked tiles, which pay only from a dozen rows.

// Q5_0W leaves rows P, P+R8's unsigned 5-bit quants in W (see Q5_0PAIR).
#define Q5_0W(P, W) \
	VBROADCASTI32X4 6(P), W; \
	VINSERTI32X4    $2, 6(P)(R8*1), W, W; \
	VINSERTI32X4    $3, 6(P)(R8*1), W, W; \
	VPSRLW          $4, W, K1, W; \
	VPANDD          Z23, W, W; \
	KMOVD           2(P), K2; \
	KMOVD           2(P)(R8*1), K3; \
	KUNPCKDQ        K2, K3, K4; \
	VPADDB          Z26, W, K4, W

// Q8_0W leaves rows P, P+R8's quants plus 128 in W (Z25 = 0x80 bytes).
#define Q8_0W(P, W, YW) \
	VMOVDQU      2(P), YW; \
	VINSERTI64X4 $1, 2(P)(R8*1), W, W; \
	VPXORD       Z25, W, W

// DXPAIR leaves rows P, P+R8's scales as [dx ×8 | dx ×8] float32 in ZT.
#define DXPAIR(P, YT, ZT, YU, XU) \
	VPBROADCASTW (P), YT; \
	VPBROADCASTW (P)(R8*1), YU; \
	VINSERTI128  $1, XU, YT, YT; \
	VCVTPH2PS    YT, ZT

// ACTROW runs the activation block at BLK(P) against both pairs of weight
// rows (W in Z0 and Z4, scales in Z2 and Z6), into A (rows 0, 1) and B
// (rows 2, 3); OFF is the weights' offset as bytes (ACTBLOCK).
#define ACTROW(P, OFF, A, B) \
	VBROADCASTI32X8 2(P)(BX*1), Z20; \
	VPXORD          Z21, Z21, Z21; \
	VPDPBUSD        Z20, OFF, Z21; \
	VPSUBD          Z21, Z31, Z21; \
	VPBROADCASTW    (P)(BX*1), Y22; \
	VCVTPH2PS       Y22, Z22; \
	VMOVDQA32       Z21, Z24; \
	VPDPBUSD        Z20, Z0, Z24; \
	VCVTDQ2PS       Z24, Z24; \
	VMULPS          Z22, Z2, Z27; \
	VFMADD231PS     Z27, Z24, A; \
	VMOVDQA32       Z21, Z28; \
	VPDPBUSD        Z20, Z4, Z28; \
	VCVTDQ2PS       Z28, Z28; \
	VMULPS          Z22, Z6, Z29; \
	VFMADD231PS     Z29, Z28, B

#define QUADSETUP \
	MOVQ   x+0(FP), SI; \
	MOVQ   stride+8(FP), R8; \
	MOVQ   ys+16(FP), R9; \
	MOVQ   (R9), R12; \
	MOVQ   8(R9), R13; \
	MOVQ   16(R9), R14; \
	MOVQ   24(R9), DX; \
	MOVQ   nb+24(FP), CX; \
	MOVQ   out+32(FP), R10; \
	MOVQ   ld+40(FP), DI; \
	LEAQ   (SI)(R8*2), R11; \
	XORQ   BX, BX; \
	VPXORD Z31, Z31, Z31; \
	VPXORD Z8, Z8, Z8; \
	VPXORD Z9, Z9, Z9; \
	VPXORD Z10, Z10, Z10; \
	VPXORD Z11, Z11, Z11; \
	VPXORD Z12, Z12, Z12; \
	VPXORD Z13, Z13, Z13; \
	VPXORD Z14, Z14, Z14; \
	VPXORD Z15, Z15, Z15; \
	MOVL   $0x1111, AX; \
	KMOVW  AX, K5

// QUADBLOCK runs one block of the four activation rows (at R12, R13, R14,
// DX, block offset BX) against the unpacked weights.
#define QUADBLOCK(OFF) \
	DXPAIR(SI, Y2, Z2, Y3, X3); \
	DXPAIR(R11, Y6, Z6, Y7, X7); \
	ACTROW(R12, OFF, Z8, Z9); \
	ACTROW(R13, OFF, Z10, Z11); \
	ACTROW(R14, OFF, Z12, Z13); \
	ACTROW(DX, OFF, Z14, Z15); \
	ADDQ $34, BX

// QUADDONE folds each activation row's lanes as HSUM8 does and stores its
// four sums at out + a*ld (ld in bytes).
#define QUADDONE \
	REDUCE4(Z8, Z9, Z24, Z25); \
	VCOMPRESSPS Z8, K5, (R10); \
	ADDQ        DI, R10; \
	REDUCE4(Z10, Z11, Z24, Z25); \
	VCOMPRESSPS Z10, K5, (R10); \
	ADDQ        DI, R10; \
	REDUCE4(Z12, Z13, Z24, Z25); \
	VCOMPRESSPS Z12, K5, (R10); \
	ADDQ        DI, R10; \
	REDUCE4(Z14, Z15, Z24, Z25); \
	VCOMPRESSPS Z14, K5, (R10); \
	VZEROUPPER; \
	RET

// func quadQ8_0(x *byte, stride int, ys *[4]*byte, nb int, out *float32, ld int)
TEXT ·quadQ8_0(SB), NOSPLIT, $0-48
	QUADSETUP
	MOVL         $0x80808080, AX
	VPBROADCASTD AX, Z25

q80quad:
	Q8_0W(SI, Z0, Y0)
	Q8_0W(R11, Z4, Y4)
	QUADBLOCK(Z25)
	ADDQ $34, SI
	ADDQ $34, R11
	DECQ CX
	JNZ  q80quad
	QUADDONE

// func quadQ5_0(x *byte, stride int, ys *[4]*byte, nb int, out *float32, ld int)
TEXT ·quadQ5_0(SB), NOSPLIT, $0-48
	QUADSETUP
	MOVL         $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z23
	MOVL         $0x10101010, AX
	VPBROADCASTD AX, Z26
	MOVL         $0xFF00FF00, AX
	KMOVD        AX, K1

q50quad:
	Q5_0W(SI, Z0)
	Q5_0W(R11, Z4)
	QUADBLOCK(Z26)
	ADDQ $22, SI
	ADDQ $22, R11
	DECQ CX
	JNZ  q50quad
	QUADDONE
