//go:build !purego

#include "textflag.h"
#include "mul_amd64.h"

// Decode kernels: four Q8_0 or Q5_0 weight rows (stride bytes apart) times
// one Q8_0 activation row, two rows to a 512-bit register (lanes 0-7 and
// 8-15), each lane doing what the single-row kernel's lane does.

// ACTBLOCK prepares the activation block at DI for every row: its quants
// in both halves of Z20 (signed, for VPDPBUSD), -OFF·(the sum of each four)
// in Z21 (the weights go in as unsigned bytes, OFF above their value) and
// its scale as sixteen float32 in Z22. Needs Z31 = 0.
#define ACTBLOCK(OFF) \
	VBROADCASTI32X8 2(DI), Z20; \
	VPXORD          Z21, Z21, Z21; \
	VPDPBUSD        Z20, OFF, Z21; \
	VPSUBD          Z21, Z31, Z21; \
	VPBROADCASTW    (DI), Y22; \
	VCVTPH2PS       Y22, Z22

// ROWPAIR finishes a pair of rows whose unsigned weights are in W: the
// exact sums of four products (offset corrected), as float32, times
// dx·dy, added to ACC with one fused multiply-add per lane. The rows'
// f16 scales are at (P) and (P)(R8*1); S, YT, XT, YU, XU are scratch.
#define ROWPAIR(P, W, ACC, S, YT, XT, ZT, YU, XU) \
	VMOVDQA32    Z21, S; \
	VPDPBUSD     Z20, W, S; \
	VCVTDQ2PS    S, S; \
	VPBROADCASTW (P), YT; \
	VPBROADCASTW (P)(R8*1), YU; \
	VINSERTI128  $1, XU, YT, YT; \
	VCVTPH2PS    YT, ZT; \
	VMULPS       Z22, ZT, ZT; \
	VFMADD231PS  ZT, S, ACC

// Q8_0PAIR: rows at P and P+R8, their quants plus 128 (Z25 = 0x80 bytes).
#define Q8_0PAIR(P, ACC, W, YW, S, YT, XT, ZT, YU, XU) \
	VMOVDQU      2(P), YW; \
	VINSERTI64X4 $1, 2(P)(R8*1), W, W; \
	VPXORD       Z25, W, W; \
	ROWPAIR(P, W, ACC, S, YT, XT, ZT, YU, XU)

// Q5_0PAIR: rows at P and P+R8, their 5-bit quants q (x = d·(q-16)):
// the nibbles of each row's 16 bytes (low ones, then high ones, by a
// shift of lanes 1 and 3 under K1), plus 16 where its qh bit is set
// (K4, from the two rows' qh words). Needs Z23 = 0x0F bytes, Z26 = 0x10.
#define Q5_0PAIR(P, ACC, W, S, YT, XT, ZT, YU, XU) \
	VBROADCASTI32X4 6(P), W; \
	VINSERTI32X4    $2, 6(P)(R8*1), W, W; \
	VINSERTI32X4    $3, 6(P)(R8*1), W, W; \
	VPSRLW          $4, W, K1, W; \
	VPANDD          Z23, W, W; \
	KMOVD           2(P), K2; \
	KMOVD           2(P)(R8*1), K3; \
	KUNPCKDQ        K2, K3, K4; \
	VPADDB          Z26, W, K4, W; \
	ROWPAIR(P, W, ACC, S, YT, XT, ZT, YU, XU)

#define ROWSSETUP \
	MOVQ   x+0(FP), SI; \
	MOVQ   stride+8(FP), R8; \
	MOVQ   y+16(FP), DI; \
	MOVQ   nb+24(FP), CX; \
	MOVQ   out+32(FP), R10; \
	LEAQ   (SI)(R8*2), R11; \
	VPXORD Z31, Z31, Z31; \
	VPXORD Z16, Z16, Z16; \
	VPXORD Z17, Z17, Z17; \
	MOVL   $0x1111, AX; \
	KMOVW  AX, K5

// ROWSDONE folds the rows' lanes as HSUM8 does and stores the four sums.
#define ROWSDONE \
	REDUCE4(Z16, Z17, Z0, Z1); \
	VCOMPRESSPS Z16, K5, (R10); \
	VZEROUPPER; \
	RET

// func rowsQ8_0x4(x *byte, stride int, y *byte, nb int, out *float32)
TEXT ·rowsQ8_0x4(SB), NOSPLIT, $0-40
	ROWSSETUP
	MOVL         $0x80808080, AX
	VPBROADCASTD AX, Z25

q80rows:
	ACTBLOCK(Z25)
	Q8_0PAIR(SI, Z16, Z0, Y0, Z1, Y2, X2, Z2, Y3, X3)
	Q8_0PAIR(R11, Z17, Z4, Y4, Z5, Y6, X6, Z6, Y7, X7)
	ADDQ $34, SI
	ADDQ $34, R11
	ADDQ $34, DI
	DECQ CX
	JNZ  q80rows
	ROWSDONE

// func rowsQ5_0x4(x *byte, stride int, y *byte, nb int, out *float32)
TEXT ·rowsQ5_0x4(SB), NOSPLIT, $0-40
	ROWSSETUP
	MOVL         $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z23
	MOVL         $0x10101010, AX
	VPBROADCASTD AX, Z26
	MOVL         $0xFF00FF00, AX
	KMOVD        AX, K1

q50rows:
	ACTBLOCK(Z26)
	Q5_0PAIR(SI, Z16, Z0, Z1, Y2, X2, Z2, Y3, X3)
	Q5_0PAIR(R11, Z17, Z4, Z5, Y6, X6, Z6, Y7, X7)
	ADDQ $22, SI
	ADDQ $22, R11
	ADDQ $34, DI
	DECQ CX
	JNZ  q50rows
	ROWSDONE

