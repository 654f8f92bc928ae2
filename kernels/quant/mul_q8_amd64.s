//go:build !purego

#include "textflag.h"
#include "simd_amd64.h"
#include "mul_amd64.h"

// Panels of four weight rows for the Q8_0-family tile (q8Blocked): per
// block 528 bytes, the rows' signed weights twice over (64 bytes a row),
// -128 times their sums of four as int32 (64 bytes a row) and their
// scales as float32.

// Q8OFFSET stores row r's weights W (32 signed bytes in both halves) at
// w(DI) and -128·Σ of each four at corr(DI): VPDPBUSD of the unsigned
// activations q+128 then leaves Σ q·w. Needs Z30 = 0x80 bytes, Z31 = 0.
#define Q8OFFSET(W, w, corr) \
	VMOVDQU32 W, w(DI); \
	VPXORD    Z1, Z1, Z1; \
	VPDPBUSD  W, Z30, Z1; \
	VPSUBD    Z1, Z31, Z1; \
	VMOVDQU32 Z1, corr(DI)

// Q8SCALE stores the f16 scale at P as float32 at dx(DI).
#define Q8SCALE(P, dx) \
	VPBROADCASTW (P), X4; \
	VCVTPH2PS    X4, X4; \
	VMOVSS       X4, dx(DI)

#define Q8_0ROW(P, w, corr, dx) \
	VBROADCASTI32X8 2(P), Z0; \
	Q8OFFSET(Z0, w, corr); \
	Q8SCALE(P, dx)

#define OFFSETSETUP \
	MOVL         $0x80808080, R8; \
	VPBROADCASTD R8, Z30; \
	VPXORD       Z31, Z31, Z31

#define PANELROWS \
	MOVQ rows+0(FP), R9; \
	MOVQ (R9), AX; \
	MOVQ 8(R9), BX; \
	MOVQ 16(R9), DX; \
	MOVQ 24(R9), SI; \
	MOVQ nb+8(FP), CX; \
	MOVQ panel+16(FP), DI

// func packQ8_0x4(rows *[4]*byte, nb int, panel *byte)
TEXT ·packQ8_0x4(SB), NOSPLIT, $0-24
	PANELROWS
	OFFSETSETUP

q80block:
	Q8_0ROW(AX, 0, 256, 512)
	Q8_0ROW(BX, 64, 320, 516)
	Q8_0ROW(DX, 128, 384, 520)
	Q8_0ROW(SI, 192, 448, 524)
	ADDQ $34, AX
	ADDQ $34, BX
	ADDQ $34, DX
	ADDQ $34, SI
	ADDQ $528, DI
	DECQ CX
	JNZ  q80block
	VZEROUPPER
	RET

// Q5_0ROW unpacks the Q5_0 block at P into signed bytes (Q5W) for the
// panel.
#define Q5_0ROW(P, w, corr, dx) \
	Q5W(6(P), 2(P), Y2, X2, Y3, X3); \
	VINSERTI64X4 $1, Y2, Z2, Z2; \
	Q8OFFSET(Z2, w, corr); \
	Q8SCALE(P, dx)

// func packQ5_0x4(rows *[4]*byte, nb int, panel *byte)
TEXT ·packQ5_0x4(SB), NOSPLIT, $0-24
	BYTES8($0x0F0F0F0F, X14, Y14) // these three use AX
	BYTES8($0xF0F0F0F0, X10, Y10)
	QHSETUP
	PANELROWS
	OFFSETSETUP

q50block:
	Q5_0ROW(AX, 0, 256, 512)
	Q5_0ROW(BX, 64, 320, 516)
	Q5_0ROW(DX, 128, 384, 520)
	Q5_0ROW(SI, 192, 448, 524)
	ADDQ $22, AX
	ADDQ $22, BX
	ADDQ $22, DX
	ADDQ $22, SI
	ADDQ $528, DI
	DECQ CX
	JNZ  q50block
	VZEROUPPER
	RET

// Q8ROW adds one block of a pair of activation rows (Y: their quants+128,
// DY: their scales) times panel row r (weights at w, offset sums at corr,
// scale at dx) to the pair's lanes in ACC, each lane as the single-row
// kernel's: float32 of the exact sum of four products, times dx·dy, one
// fused multiply-add.
#define Q8ROW(w, corr, dx, Y, DY, ACC, T1, T2) \
	VMOVDQU32   corr(SI), T1; \
	VPDPBUSD    w(SI), Y, T1; \
	VCVTDQ2PS   T1, T1; \
	VMULPS.BCST dx(SI), DY, T2; \
	VFMADD231PS T2, T1, ACC

// Q8PAIR runs one block of a pair (quants at q, scales at dy) against the
// four panel rows, into A0-A3.
#define Q8PAIR(q, dy, A0, A1, A2, A3) \
	VMOVDQU32 q, Z24; \
	VMOVUPS   dy, Z25; \
	Q8ROW(0, 256, 512, Z24, Z25, A0, Z26, Z27); \
	Q8ROW(64, 320, 516, Z24, Z25, A1, Z28, Z29); \
	Q8ROW(128, 384, 520, Z24, Z25, A2, Z30, Z31); \
	Q8ROW(192, 448, 524, Z24, Z25, A3, Z26, Z27)

// func mulQ8x4x12(panel *byte, np int, act *byte, nb, pairStride int, out *float32, ld int)
//
// np panels of four weight rows (nb blocks each, panels nb*528 bytes
// apart) times six pairs of packed Q8_0 activation rows (packQ8Act; pairs
// pairStride bytes apart). For panel p, row r with pair q accumulates in
// Z(6r+q), the pair's two rows in lanes 0-7 and 8-15, each the eight lanes
// of the single-row kernel; folded as its HSUM8, act a's sum with row r is
// stored at out[a*ld+4p+r] (ld in bytes).
TEXT ·mulQ8x4x12(SB), NOSPLIT, $0-56
	MOVQ  panel+0(FP), AX
	MOVQ  np+8(FP), BX
	MOVQ  act+16(FP), DI
	MOVQ  nb+24(FP), R9
	MOVQ  pairStride+32(FP), R8
	MOVQ  out+40(FP), R10
	MOVQ  ld+48(FP), R13
	LEAQ  (R8)(R8*2), R12
	ADDQ  DI, R12 // pair 3
	MOVL  $0x1111, DX
	KMOVW DX, K1

q8panel:
	MOVQ AX, SI
	MOVQ DI, R14
	MOVQ R12, DX
	MOVQ R9, CX
	ZERO24

q8block:
	Q8PAIR((R14), 64(R14), Z0, Z6, Z12, Z18)
	Q8PAIR((R14)(R8*1), 64(R14)(R8*1), Z1, Z7, Z13, Z19)
	Q8PAIR((R14)(R8*2), 64(R14)(R8*2), Z2, Z8, Z14, Z20)
	Q8PAIR((DX), 64(DX), Z3, Z9, Z15, Z21)
	Q8PAIR((DX)(R8*1), 64(DX)(R8*1), Z4, Z10, Z16, Z22)
	Q8PAIR((DX)(R8*2), 64(DX)(R8*2), Z5, Z11, Z17, Z23)
	ADDQ $528, SI
	ADDQ $128, R14
	ADDQ $128, DX
	DECQ CX
	JNZ  q8block

	REDUCE4(Z0, Z1, Z24, Z25)
	REDUCE4(Z2, Z3, Z24, Z25)
	REDUCE4(Z4, Z5, Z24, Z25)
	REDUCE4(Z6, Z7, Z24, Z25)
	REDUCE4(Z8, Z9, Z24, Z25)
	REDUCE4(Z10, Z11, Z24, Z25)
	REDUCE4(Z12, Z13, Z24, Z25)
	REDUCE4(Z14, Z15, Z24, Z25)
	REDUCE4(Z16, Z17, Z24, Z25)
	REDUCE4(Z18, Z19, Z24, Z25)
	REDUCE4(Z20, Z21, Z24, Z25)
	REDUCE4(Z22, Z23, Z24, Z25)
	MOVQ R10, R14
	Q8STORE(Z0, Z6, Z12, Z18)
	Q8STORE(Z2, Z8, Z14, Z20)
	Q8STORE(Z4, Z10, Z16, Z22)

	MOVQ SI, AX // SI ends where the next panel begins
	ADDQ $16, R10
	DECQ BX
	JNZ  q8panel
	VZEROUPPER
	RET
