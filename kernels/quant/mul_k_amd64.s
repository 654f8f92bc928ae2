//go:build !purego

#include "textflag.h"
#include "simd_amd64.h"
#include "mul_amd64.h"

// Blocked kernels for the K-quants with Q8_K activations, on 16-bit
// integers: the panel holds each weight times its sub-block scale
// (Q6_K: (q-32)·scale, within ±4096), the activations are widened to
// int16, and VPDPWSSD adds two products to each int32 lane. Lane i of an
// accumulator then holds elements 2i and 2i+1 of every 32; adding lanes
// 2k and 2k+1 gives the single-row kernel's lane k (elements 4k..4k+3 of
// every 32) exactly, since the sums are integers.

// q6kScaleIdx picks, for the m-th 32 elements of a half block, the scale
// words 2m (elements 0-15) and 2m+1 (16-31) of the half's eight (VPERMW).
DATA q6kScaleIdx<>+0(SB)/8, $0x0000000000000000
DATA q6kScaleIdx<>+8(SB)/8, $0x0000000000000000
DATA q6kScaleIdx<>+16(SB)/8, $0x0000000000000000
DATA q6kScaleIdx<>+24(SB)/8, $0x0000000000000000
DATA q6kScaleIdx<>+32(SB)/8, $0x0001000100010001
DATA q6kScaleIdx<>+40(SB)/8, $0x0001000100010001
DATA q6kScaleIdx<>+48(SB)/8, $0x0001000100010001
DATA q6kScaleIdx<>+56(SB)/8, $0x0001000100010001
DATA q6kScaleIdx<>+64(SB)/8, $0x0002000200020002
DATA q6kScaleIdx<>+72(SB)/8, $0x0002000200020002
DATA q6kScaleIdx<>+80(SB)/8, $0x0002000200020002
DATA q6kScaleIdx<>+88(SB)/8, $0x0002000200020002
DATA q6kScaleIdx<>+96(SB)/8, $0x0003000300030003
DATA q6kScaleIdx<>+104(SB)/8, $0x0003000300030003
DATA q6kScaleIdx<>+112(SB)/8, $0x0003000300030003
DATA q6kScaleIdx<>+120(SB)/8, $0x0003000300030003
DATA q6kScaleIdx<>+128(SB)/8, $0x0004000400040004
DATA q6kScaleIdx<>+136(SB)/8, $0x0004000400040004
DATA q6kScaleIdx<>+144(SB)/8, $0x0004000400040004
DATA q6kScaleIdx<>+152(SB)/8, $0x0004000400040004
DATA q6kScaleIdx<>+160(SB)/8, $0x0005000500050005
DATA q6kScaleIdx<>+168(SB)/8, $0x0005000500050005
DATA q6kScaleIdx<>+176(SB)/8, $0x0005000500050005
DATA q6kScaleIdx<>+184(SB)/8, $0x0005000500050005
DATA q6kScaleIdx<>+192(SB)/8, $0x0006000600060006
DATA q6kScaleIdx<>+200(SB)/8, $0x0006000600060006
DATA q6kScaleIdx<>+208(SB)/8, $0x0006000600060006
DATA q6kScaleIdx<>+216(SB)/8, $0x0006000600060006
DATA q6kScaleIdx<>+224(SB)/8, $0x0007000700070007
DATA q6kScaleIdx<>+232(SB)/8, $0x0007000700070007
DATA q6kScaleIdx<>+240(SB)/8, $0x0007000700070007
DATA q6kScaleIdx<>+248(SB)/8, $0x0007000700070007
GLOBL q6kScaleIdx<>(SB), RODATA|NOPTR, $256

// func widenI8(src *byte, dst *byte, n int)
//
// n signed bytes (a multiple of 32) to int16.
TEXT ·widenI8(SB), NOSPLIT, $0-24
	MOVQ src+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ n+16(FP), CX
	SHRQ $5, CX

widen:
	VPMOVSXBW (SI), Z0
	VMOVDQU16 Z0, (DI)
	ADDQ      $32, SI
	ADDQ      $64, DI
	DECQ      CX
	JNZ       widen
	VZEROUPPER
	RET

// Q6KQ leaves the 32 quants q of one step in Y11 (as the single-row
// kernel's Q6KLO and Q6KHI: low or high nibbles of ql, two bits of qh).
#define Q6KLOQ(ql, qh, shl) \
	VMOVDQU ql, Y11; \
	VPAND   Y15, Y11, Y11; \
	VMOVDQU qh, Y12; \
	VPSLLW  shl, Y12, Y12; \
	VPAND   Y14, Y12, Y12; \
	VPOR    Y12, Y11, Y11

#define Q6KHIQ(ql, qh, shr) \
	VMOVDQU ql, Y11; \
	VPSRLW  $4, Y11, Y11; \
	VPAND   Y15, Y11, Y11; \
	VMOVDQU qh, Y12; \
	VPSRLW  shr, Y12, Y12; \
	VPAND   Y14, Y12, Y12; \
	VPOR    Y12, Y11, Y11

// Q6KW stores the step's 32 weights (q-32)·scale as int16 at dst(DI),
// the scales from the half's eight words in Z10 picked by index idx.
#define Q6KW(idx, dst) \
	VPSUBB    Y13, Y11, Y11; \
	VPMOVSXBW Y11, Z11; \
	VMOVDQU16 idx(R9), Z12; \
	VPERMW    Z10, Z12, Z12; \
	VPMULLW   Z12, Z11, Z11; \
	VMOVDQU16 Z11, dst(DI)

// Q6KHALFW decodes half h of the block at P (ql at P+64h, qh at
// P+128+32h, scales at P+192+8h) into 128 weights at dst(DI).
#define Q6KHALFW(P, ql, ql32, qh, sc, dst0, dst1, dst2, dst3) \
	VPMOVSXBW sc(P), X10; \
	Q6KLOQ(ql(P), qh(P), $4); \
	Q6KW(0, dst0); \
	Q6KLOQ(ql32(P), qh(P), $2); \
	Q6KW(64, dst1); \
	Q6KHIQ(ql(P), qh(P), $0); \
	Q6KW(128, dst2); \
	Q6KHIQ(ql32(P), qh(P), $2); \
	Q6KW(192, dst3)

// Q6KROWW decodes one row's block at P into the panel's row r (256 int16
// at off(DI)) and its scale d as float32 at doff(DI).
#define Q6KROWW(P, off, doff) \
	Q6KHALFW(P, 0, 32, 128, 192, off, off+64, off+128, off+192); \
	Q6KHALFW(P, 64, 96, 160, 200, off+256, off+320, off+384, off+448); \
	VPBROADCASTW 208(P), X4; \
	VCVTPH2PS    X4, X4; \
	VMOVSS       X4, doff(DI)

// func packQ6_Kx4(rows *[4]*byte, nb int, panel *byte)
//
// Four Q6_K rows into a panel of 2064 bytes a block: the rows' 256 weights
// as int16 (512 bytes each), then their scales d as float32.
TEXT ·packQ6_Kx4(SB), NOSPLIT, $0-24
	MOVL         $0x0F0F0F0F, AX
	VPBROADCASTD AX, Y15
	MOVL         $0x30303030, AX
	VPBROADCASTD AX, Y14
	MOVL         $0x20202020, AX
	VPBROADCASTD AX, Y13
	LEAQ         q6kScaleIdx<>(SB), R9
	MOVQ         rows+0(FP), R8
	MOVQ         (R8), AX
	MOVQ         8(R8), BX
	MOVQ         16(R8), DX
	MOVQ         24(R8), SI
	MOVQ         nb+8(FP), CX
	MOVQ         panel+16(FP), DI

q6kpack:
	Q6KROWW(AX, 0, 2048)
	Q6KROWW(BX, 512, 2052)
	Q6KROWW(DX, 1024, 2056)
	Q6KROWW(SI, 1536, 2060)
	ADDQ $210, AX
	ADDQ $210, BX
	ADDQ $210, DX
	ADDQ $210, SI
	ADDQ $2064, DI
	DECQ CX
	JNZ  q6kpack
	VZEROUPPER
	RET

// KSTEP runs one 32-element step (c: its byte offset in a row of 512)
// of the four panel rows against the four activation rows, into the
// int32 lanes Z0-Z15 (row r, act a: Z(4r+a)); OP is VPMADDWD for the
// block's first step (which starts the lanes) and VPDPWSSD after.
#define KACT(OP, yoff, A0, A1, A2, A3) \
	VMOVDQU16 yoff(R14), Z28; \
	OP        Z28, Z24, A0; \
	OP        Z28, Z25, A1; \
	OP        Z28, Z26, A2; \
	OP        Z28, Z27, A3

#define KSTEP(OP, c) \
	VMOVDQU16 c(SI), Z24; \
	VMOVDQU16 512+c(SI), Z25; \
	VMOVDQU16 1024+c(SI), Z26; \
	VMOVDQU16 1536+c(SI), Z27; \
	KACT(OP, c, Z0, Z4, Z8, Z12); \
	KACT(OP, 512+c, Z1, Z5, Z9, Z13); \
	KACT(OP, 1024+c, Z2, Z6, Z10, Z14); \
	KACT(OP, 1536+c, Z3, Z7, Z11, Z15)

// Q6KFOLD turns the int32 lanes of row r with acts 2p, 2p+1 (A, B) into
// the single-row kernel's eight lanes each (lanes 2k and 2k+1 added),
// [act 2p | act 2p+1], as float32, and adds them times d·dy (d the row's
// scale at doff(SI), dy the acts' at dyoff(R14)) to ACC.
#define Q6KFOLD(A, B, doff, dyoff, ACC) \
	VPSRLQ       $32, A, Z29; \
	VPADDD       Z29, A, A; \
	VPSRLQ       $32, B, Z29; \
	VPADDD       Z29, B, B; \
	VPMOVQD      A, Y29; \
	VPMOVQD      B, Y30; \
	VINSERTI64X4 $1, Y30, Z29, Z29; \
	VCVTDQ2PS    Z29, Z29; \
	VMOVUPS      dyoff(R14), Z30; \
	VMULPS.BCST  doff(SI), Z30, Z30; \
	VFMADD231PS  Z30, Z29, ACC

// func mulQ6_Kx4x4(panel *byte, np int, act *byte, nb int, out *float32, ld int)
//
// np panels of four Q6_K rows (packQ6_Kx4; nb blocks, panels nb*2064
// bytes apart) times four activation rows (packQ8KAct: nb blocks of 2496
// bytes). Row r with acts 2p, 2p+1 keeps the single-row kernel's float
// lanes in Z(16+2r+p) = [act 2p | act 2p+1]; folded as its HSUM8, act a's
// sum with row r of panel p is stored at out[a*ld+4p+r] (ld in bytes).
TEXT ·mulQ6_Kx4x4(SB), NOSPLIT, $0-48
	MOVQ  panel+0(FP), AX
	MOVQ  np+8(FP), BX
	MOVQ  act+16(FP), DI
	MOVQ  nb+24(FP), R9
	MOVQ  out+32(FP), R10
	MOVQ  ld+40(FP), R13
	MOVL  $0x1111, DX
	KMOVW DX, K1

q6kpanel:
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

q6kblock:
	KSTEP(VPMADDWD, 0)
	KSTEP(VPDPWSSD, 64)
	KSTEP(VPDPWSSD, 128)
	KSTEP(VPDPWSSD, 192)
	KSTEP(VPDPWSSD, 256)
	KSTEP(VPDPWSSD, 320)
	KSTEP(VPDPWSSD, 384)
	KSTEP(VPDPWSSD, 448)
	Q6KFOLD(Z0, Z1, 2048, 2048, Z16)
	Q6KFOLD(Z2, Z3, 2048, 2112, Z17)
	Q6KFOLD(Z4, Z5, 2052, 2048, Z18)
	Q6KFOLD(Z6, Z7, 2052, 2112, Z19)
	Q6KFOLD(Z8, Z9, 2056, 2048, Z20)
	Q6KFOLD(Z10, Z11, 2056, 2112, Z21)
	Q6KFOLD(Z12, Z13, 2060, 2048, Z22)
	Q6KFOLD(Z14, Z15, 2060, 2112, Z23)
	ADDQ $2064, SI
	ADDQ $2496, R14
	DECQ CX
	JNZ  q6kblock

	REDUCE4(Z16, Z17, Z24, Z25)
	REDUCE4(Z18, Z19, Z24, Z25)
	REDUCE4(Z20, Z21, Z24, Z25)
	REDUCE4(Z22, Z23, Z24, Z25)
	MOVQ R10, R14
	Q8STORE(Z16, Z18, Z20, Z22)

	MOVQ SI, AX // SI ends where the next panel begins
	ADDQ $16, R10
	DECQ BX
	JNZ  q6kpanel
	VZEROUPPER
	RET

// q4kScaleIdx k is 32 words of k: VPERMW broadcasts scale word k.
DATA q4kScaleIdx<>+0(SB)/8, $0x0000000000000000
DATA q4kScaleIdx<>+8(SB)/8, $0x0000000000000000
DATA q4kScaleIdx<>+16(SB)/8, $0x0000000000000000
DATA q4kScaleIdx<>+24(SB)/8, $0x0000000000000000
DATA q4kScaleIdx<>+32(SB)/8, $0x0000000000000000
DATA q4kScaleIdx<>+40(SB)/8, $0x0000000000000000
DATA q4kScaleIdx<>+48(SB)/8, $0x0000000000000000
DATA q4kScaleIdx<>+56(SB)/8, $0x0000000000000000
DATA q4kScaleIdx<>+64(SB)/8, $0x0001000100010001
DATA q4kScaleIdx<>+72(SB)/8, $0x0001000100010001
DATA q4kScaleIdx<>+80(SB)/8, $0x0001000100010001
DATA q4kScaleIdx<>+88(SB)/8, $0x0001000100010001
DATA q4kScaleIdx<>+96(SB)/8, $0x0001000100010001
DATA q4kScaleIdx<>+104(SB)/8, $0x0001000100010001
DATA q4kScaleIdx<>+112(SB)/8, $0x0001000100010001
DATA q4kScaleIdx<>+120(SB)/8, $0x0001000100010001
DATA q4kScaleIdx<>+128(SB)/8, $0x0002000200020002
DATA q4kScaleIdx<>+136(SB)/8, $0x0002000200020002
DATA q4kScaleIdx<>+144(SB)/8, $0x0002000200020002
DATA q4kScaleIdx<>+152(SB)/8, $0x0002000200020002
DATA q4kScaleIdx<>+160(SB)/8, $0x0002000200020002
DATA q4kScaleIdx<>+168(SB)/8, $0x0002000200020002
DATA q4kScaleIdx<>+176(SB)/8, $0x0002000200020002
DATA q4kScaleIdx<>+184(SB)/8, $0x0002000200020002
DATA q4kScaleIdx<>+192(SB)/8, $0x0003000300030003
DATA q4kScaleIdx<>+200(SB)/8, $0x0003000300030003
DATA q4kScaleIdx<>+208(SB)/8, $0x0003000300030003
DATA q4kScaleIdx<>+216(SB)/8, $0x0003000300030003
DATA q4kScaleIdx<>+224(SB)/8, $0x0003000300030003
DATA q4kScaleIdx<>+232(SB)/8, $0x0003000300030003
DATA q4kScaleIdx<>+240(SB)/8, $0x0003000300030003
DATA q4kScaleIdx<>+248(SB)/8, $0x0003000300030003
DATA q4kScaleIdx<>+256(SB)/8, $0x0004000400040004
DATA q4kScaleIdx<>+264(SB)/8, $0x0004000400040004
DATA q4kScaleIdx<>+272(SB)/8, $0x0004000400040004
DATA q4kScaleIdx<>+280(SB)/8, $0x0004000400040004
DATA q4kScaleIdx<>+288(SB)/8, $0x0004000400040004
DATA q4kScaleIdx<>+296(SB)/8, $0x0004000400040004
DATA q4kScaleIdx<>+304(SB)/8, $0x0004000400040004
DATA q4kScaleIdx<>+312(SB)/8, $0x0004000400040004
DATA q4kScaleIdx<>+320(SB)/8, $0x0005000500050005
DATA q4kScaleIdx<>+328(SB)/8, $0x0005000500050005
DATA q4kScaleIdx<>+336(SB)/8, $0x0005000500050005
DATA q4kScaleIdx<>+344(SB)/8, $0x0005000500050005
DATA q4kScaleIdx<>+352(SB)/8, $0x0005000500050005
DATA q4kScaleIdx<>+360(SB)/8, $0x0005000500050005
DATA q4kScaleIdx<>+368(SB)/8, $0x0005000500050005
DATA q4kScaleIdx<>+376(SB)/8, $0x0005000500050005
DATA q4kScaleIdx<>+384(SB)/8, $0x0006000600060006
DATA q4kScaleIdx<>+392(SB)/8, $0x0006000600060006
DATA q4kScaleIdx<>+400(SB)/8, $0x0006000600060006
DATA q4kScaleIdx<>+408(SB)/8, $0x0006000600060006
DATA q4kScaleIdx<>+416(SB)/8, $0x0006000600060006
DATA q4kScaleIdx<>+424(SB)/8, $0x0006000600060006
DATA q4kScaleIdx<>+432(SB)/8, $0x0006000600060006
DATA q4kScaleIdx<>+440(SB)/8, $0x0006000600060006
DATA q4kScaleIdx<>+448(SB)/8, $0x0007000700070007
DATA q4kScaleIdx<>+456(SB)/8, $0x0007000700070007
DATA q4kScaleIdx<>+464(SB)/8, $0x0007000700070007
DATA q4kScaleIdx<>+472(SB)/8, $0x0007000700070007
DATA q4kScaleIdx<>+480(SB)/8, $0x0007000700070007
DATA q4kScaleIdx<>+488(SB)/8, $0x0007000700070007
DATA q4kScaleIdx<>+496(SB)/8, $0x0007000700070007
DATA q4kScaleIdx<>+504(SB)/8, $0x0007000700070007
GLOBL q4kScaleIdx<>(SB), RODATA|NOPTR, $512

// q4kMinIdx t puts, in dword lane L, mins 2t and 2t+1 of row L%4 (VPERMW
// over the four rows' eight mins each).
DATA q4kMinIdx<>+0(SB)/8, $0x0009000800010000
DATA q4kMinIdx<>+8(SB)/8, $0x0019001800110010
DATA q4kMinIdx<>+16(SB)/8, $0x0009000800010000
DATA q4kMinIdx<>+24(SB)/8, $0x0019001800110010
DATA q4kMinIdx<>+32(SB)/8, $0x0009000800010000
DATA q4kMinIdx<>+40(SB)/8, $0x0019001800110010
DATA q4kMinIdx<>+48(SB)/8, $0x0009000800010000
DATA q4kMinIdx<>+56(SB)/8, $0x0019001800110010
DATA q4kMinIdx<>+64(SB)/8, $0x000b000a00030002
DATA q4kMinIdx<>+72(SB)/8, $0x001b001a00130012
DATA q4kMinIdx<>+80(SB)/8, $0x000b000a00030002
DATA q4kMinIdx<>+88(SB)/8, $0x001b001a00130012
DATA q4kMinIdx<>+96(SB)/8, $0x000b000a00030002
DATA q4kMinIdx<>+104(SB)/8, $0x001b001a00130012
DATA q4kMinIdx<>+112(SB)/8, $0x000b000a00030002
DATA q4kMinIdx<>+120(SB)/8, $0x001b001a00130012
DATA q4kMinIdx<>+128(SB)/8, $0x000d000c00050004
DATA q4kMinIdx<>+136(SB)/8, $0x001d001c00150014
DATA q4kMinIdx<>+144(SB)/8, $0x000d000c00050004
DATA q4kMinIdx<>+152(SB)/8, $0x001d001c00150014
DATA q4kMinIdx<>+160(SB)/8, $0x000d000c00050004
DATA q4kMinIdx<>+168(SB)/8, $0x001d001c00150014
DATA q4kMinIdx<>+176(SB)/8, $0x000d000c00050004
DATA q4kMinIdx<>+184(SB)/8, $0x001d001c00150014
DATA q4kMinIdx<>+192(SB)/8, $0x000f000e00070006
DATA q4kMinIdx<>+200(SB)/8, $0x001f001e00170016
DATA q4kMinIdx<>+208(SB)/8, $0x000f000e00070006
DATA q4kMinIdx<>+216(SB)/8, $0x001f001e00170016
DATA q4kMinIdx<>+224(SB)/8, $0x000f000e00070006
DATA q4kMinIdx<>+232(SB)/8, $0x001f001e00170016
DATA q4kMinIdx<>+240(SB)/8, $0x000f000e00070006
DATA q4kMinIdx<>+248(SB)/8, $0x001f001e00170016
GLOBL q4kMinIdx<>(SB), RODATA|NOPTR, $256

// q4kRowIdx puts row L%4's value in dword lane L (VPERMD).
DATA q4kRowIdx<>+0(SB)/8, $0x0000000100000000
DATA q4kRowIdx<>+8(SB)/8, $0x0000000300000002
DATA q4kRowIdx<>+16(SB)/8, $0x0000000100000000
DATA q4kRowIdx<>+24(SB)/8, $0x0000000300000002
DATA q4kRowIdx<>+32(SB)/8, $0x0000000100000000
DATA q4kRowIdx<>+40(SB)/8, $0x0000000300000002
DATA q4kRowIdx<>+48(SB)/8, $0x0000000100000000
DATA q4kRowIdx<>+56(SB)/8, $0x0000000300000002
GLOBL q4kRowIdx<>(SB), RODATA|NOPTR, $64

// Q4KSTEPW stores the 64 weights of step j (32 quant bytes at qs(SI): low
// nibbles are sub-block 2j, high ones 2j+1) times their scales (words of
// Z2) as int16 at dst(DI) and dst+64(DI). Needs Y15 = 0x0F bytes.
#define Q4KSTEPW(qs, lo, hi, dst) \
	VMOVDQU   qs(SI), Y4; \
	VPAND     Y15, Y4, Y5; \
	VPSRLW    $4, Y4, Y6; \
	VPAND     Y15, Y6, Y6; \
	VPMOVZXBW Y5, Z5; \
	VMOVDQU16 q4kScaleIdx<>+lo(SB), Z7; \
	VPERMW    Z2, Z7, Z7; \
	VPMULLW   Z7, Z5, Z5; \
	VMOVDQU16 Z5, dst(DI); \
	VPMOVZXBW Y6, Z6; \
	VMOVDQU16 q4kScaleIdx<>+hi(SB), Z7; \
	VPERMW    Z2, Z7, Z7; \
	VPMULLW   Z7, Z6, Z6; \
	VMOVDQU16 Z6, dst+64(DI)

// Q4KROWW decodes the Q4_K block at P into panel row r: 256 weights q·sc
// as int16 at off(DI); its mins go to lane r of Z8 (words), its d and
// dmin as float32 to lane r of X9 and X10.
#define Q4KROWW(P, r, off) \
	MOVQ         P, SI; \
	Q4KUNPACK; \
	Q4KSTEPW(16, 0, 64, off); \
	Q4KSTEPW(48, 128, 192, off+128); \
	Q4KSTEPW(80, 256, 320, off+256); \
	Q4KSTEPW(112, 384, 448, off+384); \
	VEXTRACTI128 $1, Y2, X3; \
	VINSERTI32X4 $r, X3, Z8, Z8; \
	VPBROADCASTW (SI), X4; \
	VCVTPH2PS    X4, X4; \
	VINSERTPS    $(r<<4), X4, X9, X9; \
	VPBROADCASTW 2(SI), X4; \
	VCVTPH2PS    X4, X4; \
	VINSERTPS    $(r<<4), X4, X10, X10

// func packQ4_Kx4(rows *[4]*byte, nb int, panel *byte)
//
// Four Q4_K rows into a panel of 2432 bytes a block: the rows' 256 weights
// times their scales as int16 (512 bytes each); the mins in the tile's
// lane order (q4kMinIdx: four vectors of 64 bytes); d and dmin by lane
// (q4kRowIdx: 64 bytes each).
TEXT ·packQ4_Kx4(SB), NOSPLIT, $0-24
	MOVL         $0x0F0F0F0F, AX
	VPBROADCASTD AX, Y15
	MOVQ         rows+0(FP), R8
	MOVQ         (R8), AX
	MOVQ         8(R8), BX
	MOVQ         16(R8), DX
	MOVQ         24(R8), R8
	MOVQ         nb+8(FP), CX
	MOVQ         panel+16(FP), DI

q4kpack:
	Q4KROWW(AX, 0, 0)
	Q4KROWW(BX, 1, 512)
	Q4KROWW(DX, 2, 1024)
	Q4KROWW(R8, 3, 1536)
	VMOVDQU16 q4kMinIdx<>(SB), Z7
	VPERMW    Z8, Z7, Z7
	VMOVDQU16 Z7, 2048(DI)
	VMOVDQU16 q4kMinIdx<>+64(SB), Z7
	VPERMW    Z8, Z7, Z7
	VMOVDQU16 Z7, 2112(DI)
	VMOVDQU16 q4kMinIdx<>+128(SB), Z7
	VPERMW    Z8, Z7, Z7
	VMOVDQU16 Z7, 2176(DI)
	VMOVDQU16 q4kMinIdx<>+192(SB), Z7
	VPERMW    Z8, Z7, Z7
	VMOVDQU16 Z7, 2240(DI)
	VMOVDQU32 q4kRowIdx<>(SB), Z7
	VPERMD    Z9, Z7, Z11
	VMOVUPS   Z11, 2304(DI)
	VPERMD    Z10, Z7, Z11
	VMOVUPS   Z11, 2368(DI)
	ADDQ      $144, AX
	ADDQ      $144, BX
	ADDQ      $144, DX
	ADDQ      $144, R8
	ADDQ      $2432, DI
	DECQ      CX
	JNZ       q4kpack
	VZEROUPPER
	RET

// KSUM4 adds, for each of the 16 (row, act) pairs, the 16 int32 lanes of
// its accumulator Z(4r+a) up (exactly), leaving pair (r, a)'s block sum in
// lane 4a+r of Z0 (Z16, Z17 scratch): halves, then quarters of two
// accumulators at a time, then within 128-bit lanes.
#define KHALF(A, B) \
	VSHUFI64X2 $0x44, B, A, Z16; \
	VSHUFI64X2 $0xEE, B, A, Z17; \
	VPADDD     Z17, Z16, A

#define KQUARTER(A, B) \
	VSHUFI64X2 $0x88, B, A, Z16; \
	VSHUFI64X2 $0xDD, B, A, Z17; \
	VPADDD     Z17, Z16, A

#define KSUM4 \
	KHALF(Z0, Z1); \
	KHALF(Z2, Z3); \
	KHALF(Z4, Z5); \
	KHALF(Z6, Z7); \
	KHALF(Z8, Z9); \
	KHALF(Z10, Z11); \
	KHALF(Z12, Z13); \
	KHALF(Z14, Z15); \
	KQUARTER(Z0, Z2); \
	KQUARTER(Z4, Z6); \
	KQUARTER(Z8, Z10); \
	KQUARTER(Z12, Z14); \
	VPUNPCKLQDQ Z4, Z0, Z16; \
	VPUNPCKHQDQ Z4, Z0, Z17; \
	VPADDD      Z17, Z16, Z0; \
	VPUNPCKLQDQ Z12, Z8, Z16; \
	VPUNPCKHQDQ Z12, Z8, Z17; \
	VPADDD      Z17, Z16, Z8; \
	VSHUFPS     $0x88, Z8, Z0, Z16; \
	VSHUFPS     $0xDD, Z8, Z0, Z17; \
	VPADDD      Z17, Z16, Z0

// func mulQ4_Kx4x4(panel *byte, np int, act *byte, nb int, out *float32, ld int)
//
// np panels of four Q4_K rows (packQ4_Kx4; nb blocks, panels nb*2432
// bytes apart) times four activation rows (packQ8KAct). Per block each
// (row, act) pair's integer sums (Σ sc·q·q8 and Σ m·bsum) take, in lane
// 4a+r, the single-row kernel's float32 operations: one fused
// multiply-add into the scaled sums (Z29), one into the mins (Z30); their
// difference is stored at out[a*ld+4p+r] (ld in bytes).
TEXT ·mulQ4_Kx4x4(SB), NOSPLIT, $0-48
	MOVQ panel+0(FP), AX
	MOVQ np+8(FP), BX
	MOVQ act+16(FP), DI
	MOVQ nb+24(FP), R9
	MOVQ out+32(FP), R10
	MOVQ ld+40(FP), R13

q4kpanel:
	MOVQ   AX, SI
	MOVQ   DI, R14
	MOVQ   R9, CX
	VPXORD Z29, Z29, Z29
	VPXORD Z30, Z30, Z30

q4kblock:
	KSTEP(VPMADDWD, 0)
	KSTEP(VPDPWSSD, 64)
	KSTEP(VPDPWSSD, 128)
	KSTEP(VPDPWSSD, 192)
	KSTEP(VPDPWSSD, 256)
	KSTEP(VPDPWSSD, 320)
	KSTEP(VPDPWSSD, 384)
	KSTEP(VPDPWSSD, 448)
	KSUM4
	VMOVDQU16   2048(SI), Z19
	VPMADDWD    2176(R14), Z19, Z18
	VMOVDQU16   2112(SI), Z19
	VPDPWSSD    2240(R14), Z19, Z18
	VMOVDQU16   2176(SI), Z19
	VPDPWSSD    2304(R14), Z19, Z18
	VMOVDQU16   2240(SI), Z19
	VPDPWSSD    2368(R14), Z19, Z18
	VCVTDQ2PS   Z0, Z0
	VMOVUPS     2304(SI), Z19
	VMULPS      2432(R14), Z19, Z19
	VFMADD231PS Z19, Z0, Z29
	VCVTDQ2PS   Z18, Z18
	VMOVUPS     2368(SI), Z19
	VMULPS      2432(R14), Z19, Z19
	VFMADD231PS Z19, Z18, Z30
	ADDQ        $2432, SI
	ADDQ        $2496, R14
	DECQ        CX
	JNZ         q4kblock

	VSUBPS        Z30, Z29, Z29
	VMOVUPS       X29, (R10)
	VEXTRACTF32X4 $1, Z29, X16
	VMOVUPS       X16, (R10)(R13*1)
	VEXTRACTF32X4 $2, Z29, X16
	VMOVUPS       X16, (R10)(R13*2)
	LEAQ          (R10)(R13*2), R11
	VEXTRACTF32X4 $3, Z29, X16
	VMOVUPS       X16, (R11)(R13*1)

	MOVQ SI, AX // SI ends where the next panel begins
	ADDQ $16, R10
	DECQ BX
	JNZ  q4kpanel
	VZEROUPPER
	RET
