//go:build !purego

#include "textflag.h"
#include "mul_amd64.h"

// Q6_K decode kernel: four weight rows times one Q8_K activation row, two
// rows to a 512-bit register (lanes 0-7 and 8-15). Each 32-element step
// gives, per row, the single-row kernel's int16 pair sums Σ q·q8 - 32·Σ q8
// (VPMADDUBSW, the same two per word) and its int32 lanes (times the
// sub-block scales, VPDPWSSD instead of VPMADDWD and VPADDD); per block the
// lanes take the single-row kernel's float32 conversion, d·dy and fused
// multiply-add.

// q6kPairIdx c picks the scale words of step c for two rows (VPERMW over
// [row 0's 16 scales | row 1's 16]): words 0-7 scale 2c and 8-15 scale
// 2c+1 of row 0, words 16-31 the same of row 1.
DATA q6kPairIdx<>+0(SB)/8, $0x0000000000000000
DATA q6kPairIdx<>+8(SB)/8, $0x0000000000000000
DATA q6kPairIdx<>+16(SB)/8, $0x0001000100010001
DATA q6kPairIdx<>+24(SB)/8, $0x0001000100010001
DATA q6kPairIdx<>+32(SB)/8, $0x0010001000100010
DATA q6kPairIdx<>+40(SB)/8, $0x0010001000100010
DATA q6kPairIdx<>+48(SB)/8, $0x0011001100110011
DATA q6kPairIdx<>+56(SB)/8, $0x0011001100110011
DATA q6kPairIdx<>+64(SB)/8, $0x0002000200020002
DATA q6kPairIdx<>+72(SB)/8, $0x0002000200020002
DATA q6kPairIdx<>+80(SB)/8, $0x0003000300030003
DATA q6kPairIdx<>+88(SB)/8, $0x0003000300030003
DATA q6kPairIdx<>+96(SB)/8, $0x0012001200120012
DATA q6kPairIdx<>+104(SB)/8, $0x0012001200120012
DATA q6kPairIdx<>+112(SB)/8, $0x0013001300130013
DATA q6kPairIdx<>+120(SB)/8, $0x0013001300130013
DATA q6kPairIdx<>+128(SB)/8, $0x0004000400040004
DATA q6kPairIdx<>+136(SB)/8, $0x0004000400040004
DATA q6kPairIdx<>+144(SB)/8, $0x0005000500050005
DATA q6kPairIdx<>+152(SB)/8, $0x0005000500050005
DATA q6kPairIdx<>+160(SB)/8, $0x0014001400140014
DATA q6kPairIdx<>+168(SB)/8, $0x0014001400140014
DATA q6kPairIdx<>+176(SB)/8, $0x0015001500150015
DATA q6kPairIdx<>+184(SB)/8, $0x0015001500150015
DATA q6kPairIdx<>+192(SB)/8, $0x0006000600060006
DATA q6kPairIdx<>+200(SB)/8, $0x0006000600060006
DATA q6kPairIdx<>+208(SB)/8, $0x0007000700070007
DATA q6kPairIdx<>+216(SB)/8, $0x0007000700070007
DATA q6kPairIdx<>+224(SB)/8, $0x0016001600160016
DATA q6kPairIdx<>+232(SB)/8, $0x0016001600160016
DATA q6kPairIdx<>+240(SB)/8, $0x0017001700170017
DATA q6kPairIdx<>+248(SB)/8, $0x0017001700170017
DATA q6kPairIdx<>+256(SB)/8, $0x0008000800080008
DATA q6kPairIdx<>+264(SB)/8, $0x0008000800080008
DATA q6kPairIdx<>+272(SB)/8, $0x0009000900090009
DATA q6kPairIdx<>+280(SB)/8, $0x0009000900090009
DATA q6kPairIdx<>+288(SB)/8, $0x0018001800180018
DATA q6kPairIdx<>+296(SB)/8, $0x0018001800180018
DATA q6kPairIdx<>+304(SB)/8, $0x0019001900190019
DATA q6kPairIdx<>+312(SB)/8, $0x0019001900190019
DATA q6kPairIdx<>+320(SB)/8, $0x000a000a000a000a
DATA q6kPairIdx<>+328(SB)/8, $0x000a000a000a000a
DATA q6kPairIdx<>+336(SB)/8, $0x000b000b000b000b
DATA q6kPairIdx<>+344(SB)/8, $0x000b000b000b000b
DATA q6kPairIdx<>+352(SB)/8, $0x001a001a001a001a
DATA q6kPairIdx<>+360(SB)/8, $0x001a001a001a001a
DATA q6kPairIdx<>+368(SB)/8, $0x001b001b001b001b
DATA q6kPairIdx<>+376(SB)/8, $0x001b001b001b001b
DATA q6kPairIdx<>+384(SB)/8, $0x000c000c000c000c
DATA q6kPairIdx<>+392(SB)/8, $0x000c000c000c000c
DATA q6kPairIdx<>+400(SB)/8, $0x000d000d000d000d
DATA q6kPairIdx<>+408(SB)/8, $0x000d000d000d000d
DATA q6kPairIdx<>+416(SB)/8, $0x001c001c001c001c
DATA q6kPairIdx<>+424(SB)/8, $0x001c001c001c001c
DATA q6kPairIdx<>+432(SB)/8, $0x001d001d001d001d
DATA q6kPairIdx<>+440(SB)/8, $0x001d001d001d001d
DATA q6kPairIdx<>+448(SB)/8, $0x000e000e000e000e
DATA q6kPairIdx<>+456(SB)/8, $0x000e000e000e000e
DATA q6kPairIdx<>+464(SB)/8, $0x000f000f000f000f
DATA q6kPairIdx<>+472(SB)/8, $0x000f000f000f000f
DATA q6kPairIdx<>+480(SB)/8, $0x001e001e001e001e
DATA q6kPairIdx<>+488(SB)/8, $0x001e001e001e001e
DATA q6kPairIdx<>+496(SB)/8, $0x001f001f001f001f
DATA q6kPairIdx<>+504(SB)/8, $0x001f001f001f001f
GLOBL q6kPairIdx<>(SB), RODATA|NOPTR, $512

// Q6LOAD loads two rows' 32 bytes at off(P), off(P+R8) into W.
#define Q6LOAD(P, off, W, YW) \
	VMOVDQU      off(P), YW; \
	VINSERTI64X4 $1, off(P)(R8*1), W, W

// Q6STEP adds one 32-element step of two rows (their quants in Q, as
// Q6KLO/Q6KHI make them) times the activations in Z20 (their 32·pair sums
// in Z21) to the int32 lanes ACC, the scales from SCW by step c.
#define Q6STEP(Q, SCW, c, ACC) \
	VPMADDUBSW Z20, Q, Q; \
	VPSUBW     Z21, Q, Q; \
	VMOVDQU16  q6kPairIdx<>+64*c(SB), Z26; \
	VPERMW     SCW, Z26, Z26; \
	VPDPWSSD   Z26, Q, ACC

// Q6QUANTS leaves the quants of step m of a half in Q (QL0, QL1: the two
// rows' ql bytes 0-31 and 32-63; QH their qh bytes).
#define Q6LO(QL, QH, shl, Q) \
	VPANDD  Z23, QL, Q; \
	VPSLLW  shl, QH, Z27; \
	VPANDD  Z24, Z27, Z27; \
	VPORD   Z27, Q, Q

#define Q6HI(QL, QH, shr, Q) \
	VPSRLW  $4, QL, Q; \
	VPANDD  Z23, Q, Q; \
	VPSRLW  shr, QH, Z27; \
	VPANDD  Z24, Z27, Z27; \
	VPORD   Z27, Q, Q

// Q6ACT loads the activations of step c (at 4+32c of the block at DI) in
// both halves of Z20 and their 32·pair sums in Z21 (Z25 = 32 in every byte).
#define Q6ACT(c) \
	VBROADCASTI32X8 4+32*c(DI), Z20; \
	VPMADDUBSW      Z20, Z25, Z21

// Q6HALF runs half h of the block for both pairs of rows (at SI and
// R11): ql at ql0 and ql0+32, qh at qh, steps c0-c3 (macro arguments are
// literals: the assembler's macros substitute text).
#define Q6HALF(ql0, ql1, qh, c0, c1, c2, c3) \
	Q6LOAD(SI, ql0, Z0, Y0); \
	Q6LOAD(SI, ql1, Z1, Y1); \
	Q6LOAD(SI, qh, Z2, Y2); \
	Q6LOAD(R11, ql0, Z4, Y4); \
	Q6LOAD(R11, ql1, Z5, Y5); \
	Q6LOAD(R11, qh, Z6, Y6); \
	Q6ACT(c0); \
	Q6LO(Z0, Z2, $4, Z28); \
	Q6STEP(Z28, Z3, c0, Z16); \
	Q6LO(Z4, Z6, $4, Z28); \
	Q6STEP(Z28, Z7, c0, Z17); \
	Q6ACT(c1); \
	Q6LO(Z1, Z2, $2, Z28); \
	Q6STEP(Z28, Z3, c1, Z16); \
	Q6LO(Z5, Z6, $2, Z28); \
	Q6STEP(Z28, Z7, c1, Z17); \
	Q6ACT(c2); \
	Q6HI(Z0, Z2, $0, Z28); \
	Q6STEP(Z28, Z3, c2, Z16); \
	Q6HI(Z4, Z6, $0, Z28); \
	Q6STEP(Z28, Z7, c2, Z17); \
	Q6ACT(c3); \
	Q6HI(Z1, Z2, $2, Z28); \
	Q6STEP(Z28, Z3, c3, Z16); \
	Q6HI(Z5, Z6, $2, Z28); \
	Q6STEP(Z28, Z7, c3, Z17)

// Q6SCALES leaves two rows' 16 scales each as words in SCW.
#define Q6SCALES(P, SCW, YT, YU) \
	VPMOVSXBW    192(P), YT; \
	VPMOVSXBW    192(P)(R8*1), YU; \
	VINSERTI64X4 $1, YU, SCW, SCW

// Q6FINISH adds the block's lanes ACC of the rows at P, P+R8, as float32,
// times d·dy (dy: Z22), to FACC (Z8, Z9 scratch).
#define Q6FINISH(P, ACC, FACC) \
	VCVTDQ2PS    ACC, ACC; \
	VPBROADCASTW 208(P), Y8; \
	VPBROADCASTW 208(P)(R8*1), Y9; \
	VINSERTI128  $1, X9, Y8, Y8; \
	VCVTPH2PS    Y8, Z8; \
	VMULPS       Z22, Z8, Z8; \
	VFMADD231PS  Z8, ACC, FACC

// func rowsQ6_Kx4(x *byte, stride int, y *byte, nb int, out *float32)
TEXT ·rowsQ6_Kx4(SB), NOSPLIT, $0-40
	MOVQ         x+0(FP), SI
	MOVQ         stride+8(FP), R8
	MOVQ         y+16(FP), DI
	MOVQ         nb+24(FP), CX
	MOVQ         out+32(FP), R10
	LEAQ         (SI)(R8*2), R11
	MOVL         $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z23
	MOVL         $0x30303030, AX
	VPBROADCASTD AX, Z24
	MOVL         $0x20202020, AX
	VPBROADCASTD AX, Z25
	VPXORD       Z18, Z18, Z18
	VPXORD       Z19, Z19, Z19

q6rows:
	VPXORD       Z16, Z16, Z16
	VPXORD       Z17, Z17, Z17
	Q6SCALES(SI, Z3, Y3, Y10)
	Q6SCALES(R11, Z7, Y7, Y11)
	Q6HALF(0, 32, 128, 0, 1, 2, 3)
	Q6HALF(64, 96, 160, 4, 5, 6, 7)
	VBROADCASTSS (DI), Z22
	Q6FINISH(SI, Z16, Z18)
	Q6FINISH(R11, Z17, Z19)
	ADDQ         $210, SI
	ADDQ         $210, R11
	ADDQ         $292, DI
	DECQ         CX
	JNZ          q6rows

	REDUCE4(Z18, Z19, Z0, Z1)
	MOVL        $0x1111, AX
	KMOVW       AX, K1
	VCOMPRESSPS Z18, K1, (R10)
	VZEROUPPER
	RET
