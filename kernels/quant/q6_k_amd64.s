//go:build !purego

#include "textflag.h"
#include "simd_amd64.h"

// q6kPair mask m puts byte 2m in the low 8 bytes and byte 2m+1 in the high
// 8: the scales of the two 16-element sub-blocks one 32-byte vector spans.
DATA q6kPair<>+0(SB)/8, $0x0000000000000000
DATA q6kPair<>+8(SB)/8, $0x0101010101010101
DATA q6kPair<>+16(SB)/8, $0x0202020202020202
DATA q6kPair<>+24(SB)/8, $0x0303030303030303
DATA q6kPair<>+32(SB)/8, $0x0404040404040404
DATA q6kPair<>+40(SB)/8, $0x0505050505050505
DATA q6kPair<>+48(SB)/8, $0x0606060606060606
DATA q6kPair<>+56(SB)/8, $0x0707070707070707
DATA q6kPair<>+64(SB)/8, $0x0808080808080808
DATA q6kPair<>+72(SB)/8, $0x0909090909090909
DATA q6kPair<>+80(SB)/8, $0x0a0a0a0a0a0a0a0a
DATA q6kPair<>+88(SB)/8, $0x0b0b0b0b0b0b0b0b
DATA q6kPair<>+96(SB)/8, $0x0c0c0c0c0c0c0c0c
DATA q6kPair<>+104(SB)/8, $0x0d0d0d0d0d0d0d0d
DATA q6kPair<>+112(SB)/8, $0x0e0e0e0e0e0e0e0e
DATA q6kPair<>+120(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL q6kPair<>(SB), RODATA|NOPTR, $128

// Q6KSTEP multiplies 32 unsigned 6-bit quants in Q (q+32, 0..63) with the
// 32 activations at q8: Σ q·q8 - 32·Σ q8 per pair of bytes (both fit in
// int16), times the two sub-block scales picked by mask, into Y10.
// Needs Y13 = 32 in every byte and X11 = the block's 16 scales.
#define Q6KSTEP(Q, q8, mask) \
	VMOVDQU    q8, Y6; \
	VPMADDUBSW Y6, Y13, Y7; \
	VPMADDUBSW Y6, Q, Q; \
	VPSUBW     Y7, Q, Q; \
	VPSHUFB    mask, X11, X9; \
	VPMOVSXBW  X9, Y9; \
	VPMADDWD   Y9, Q, Q; \
	VPADDD     Q, Y10, Y10

// Q6KHALF does one half block of 128 weights: low bits from the 64 bytes at
// ql, ql32 (low nibbles, then high nibbles), top bits from the 32 bytes at
// qh (two bits per element group), activations from q8 on.
#define Q6KHALF(ql, ql32, qh, q8a, q8b, q8c, q8d, m0, m1, m2, m3) \
	VMOVDQU ql, Y1; \
	VMOVDQU ql32, Y2; \
	VMOVDQU qh, Y3; \
	VPAND   Y15, Y1, Y4; \
	VPSLLW  $4, Y3, Y5; \
	VPAND   Y14, Y5, Y5; \
	VPOR    Y5, Y4, Y4; \
	Q6KSTEP(Y4, q8a, m0); \
	VPAND   Y15, Y2, Y4; \
	VPSLLW  $2, Y3, Y5; \
	VPAND   Y14, Y5, Y5; \
	VPOR    Y5, Y4, Y4; \
	Q6KSTEP(Y4, q8b, m1); \
	VPSRLW  $4, Y1, Y4; \
	VPAND   Y15, Y4, Y4; \
	VPAND   Y14, Y3, Y5; \
	VPOR    Y5, Y4, Y4; \
	Q6KSTEP(Y4, q8c, m2); \
	VPSRLW  $4, Y2, Y4; \
	VPAND   Y15, Y4, Y4; \
	VPSRLW  $2, Y3, Y5; \
	VPAND   Y14, Y5, Y5; \
	VPOR    Y5, Y4, Y4; \
	Q6KSTEP(Y4, q8d, m3)

// func dotQ6_KAVX2(x, y []byte, nb int) float32
//
// Q6_K weights x (210-byte blocks) with Q8_K activations y (292-byte
// blocks): d·dy·Σ_g scale_g·Σ (q-32)·q8 per block.
TEXT ·dotQ6_KAVX2(SB), NOSPLIT, $0-60
	MOVQ         x_base+0(FP), SI
	MOVQ         y_base+24(FP), DI
	MOVQ         nb+48(FP), CX
	VXORPS       Y0, Y0, Y0
	MOVL         $0x0F0F0F0F, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15
	MOVL         $0x30303030, AX
	VMOVD        AX, X14
	VPBROADCASTD X14, Y14
	MOVL         $0x20202020, AX
	VMOVD        AX, X13
	VPBROADCASTD X13, Y13
	LEAQ         q6kPair<>(SB), R8

block:
	VMOVDQU 192(SI), X11
	VPXOR   Y10, Y10, Y10
	Q6KHALF((SI), 32(SI), 128(SI), 4(DI), 36(DI), 68(DI), 100(DI), (R8), 16(R8), 32(R8), 48(R8))
	Q6KHALF(64(SI), 96(SI), 160(SI), 132(DI), 164(DI), 196(DI), 228(DI), 64(R8), 80(R8), 96(R8), 112(R8))

	VCVTDQ2PS    Y10, Y10
	VPBROADCASTW 208(SI), X5
	VCVTPH2PS    X5, Y5
	VBROADCASTSS (DI), Y6
	VMULPS       Y6, Y5, Y5
	VFMADD231PS  Y10, Y5, Y0

	ADDQ $210, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  block

	HSUM8
	VZEROUPPER
	MOVSS X0, ret+56(FP)
	RET

// The four-row kernel decodes one vector of 32 quants at a time and runs
// it against the four rows before the next (Y8-Y10 the decoded quants,
// Y4-Y7 the rows' integer lanes, Y0-Y3 their float lanes, Y11-Y12
// scratch). With the signs of q-32 moved onto the activations (as I8DOT),
// one VPMADDUBSW a row gives Q6KSTEP's int16 pair sums Σ q·q8 - 32·Σ q8
// exactly: no sum here nears saturation.

// Q6KLO leaves in Y11 the quants of a low-nibble step: ql & 0x0F with the
// top bits (qh << shl) & 0x30.
#define Q6KLO(ql, qh, shl) \
	VMOVDQU ql, Y11; \
	VPAND   Y15, Y11, Y11; \
	VMOVDQU qh, Y12; \
	VPSLLW  shl, Y12, Y12; \
	VPAND   Y14, Y12, Y12; \
	VPOR    Y12, Y11, Y11

// Q6KHI is Q6KLO for a high-nibble step: ql >> 4, (qh >> shr) & 0x30.
#define Q6KHI(ql, qh, shr) \
	VMOVDQU ql, Y11; \
	VPSRLW  $4, Y11, Y11; \
	VPAND   Y15, Y11, Y11; \
	VMOVDQU qh, Y12; \
	VPSRLW  shr, Y12, Y12; \
	VPAND   Y14, Y12, Y12; \
	VPOR    Y12, Y11, Y11

// Q6KROW adds one row's int32 lanes for the step to ACC.
#define Q6KROW(P, q8, ACC) \
	VMOVDQU    q8(P), Y12; \
	VPSIGNB    Y8, Y12, Y12; \
	VPMADDUBSW Y12, Y9, Y12; \
	VPMADDWD   Y10, Y12, Y12; \
	VPADDD     Y12, ACC, ACC

// Q6KROWS4 runs the quants in Y11 (q+32) against the 32 activations at q8
// of the four rows, with the scales of their sub-blocks (mask).
#define Q6KROWS4(mask, q8) \
	VPSUBB    Y13, Y11, Y8; \
	VPABSB    Y8, Y9; \
	VMOVDQU   192(SI), X11; \
	VPSHUFB   mask, X11, X10; \
	VPMOVSXBW X10, Y10; \
	Q6KROW(AX, q8, Y4); \
	Q6KROW(BX, q8, Y5); \
	Q6KROW(DX, q8, Y6); \
	Q6KROW(DI, q8, Y7)

// Q6KHALF4 is Q6KHALF for the four rows.
#define Q6KHALF4(ql, ql32, qh, q8a, q8b, q8c, q8d, m0, m1, m2, m3) \
	Q6KLO(ql, qh, $4); \
	Q6KROWS4(m0, q8a); \
	Q6KLO(ql32, qh, $2); \
	Q6KROWS4(m1, q8b); \
	Q6KHI(ql, qh, $0); \
	Q6KROWS4(m2, q8c); \
	Q6KHI(ql32, qh, $2); \
	Q6KROWS4(m3, q8d)

// Q6KSUM adds d·dy times the row at P's block lanes INT to ACC.
#define Q6KSUM(P, INT, ACC) \
	VCVTDQ2PS    INT, INT; \
	VPBROADCASTW 208(SI), X11; \
	VCVTPH2PS    X11, Y11; \
	VBROADCASTSS (P), Y12; \
	VMULPS       Y12, Y11, Y11; \
	VFMADD231PS  INT, Y11, ACC

// func dotQ6_Kx4AVX2(x []byte, ys *[4]*byte, nb int, acc *[4][8]float32)
//
// dotQ6_KAVX2 for four activation rows (see ROWS4 in simd_amd64.h); each
// row's eight lanes go to acc for the caller's HSUM8.
TEXT ·dotQ6_Kx4AVX2(SB), NOSPLIT, $0-48
	MOVQ         x_base+0(FP), SI
	MOVQ         nb+32(FP), CX
	MOVL         $0x0F0F0F0F, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15
	MOVL         $0x30303030, AX
	VMOVD        AX, X14
	VPBROADCASTD X14, Y14
	MOVL         $0x20202020, AX
	VMOVD        AX, X13
	VPBROADCASTD X13, Y13
	LEAQ         q6kPair<>(SB), R8
	ROWS4
	VXORPS       Y0, Y0, Y0
	VXORPS       Y1, Y1, Y1
	VXORPS       Y2, Y2, Y2
	VXORPS       Y3, Y3, Y3

block4:
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	Q6KHALF4((SI), 32(SI), 128(SI), 4, 36, 68, 100, (R8), 16(R8), 32(R8), 48(R8))
	Q6KHALF4(64(SI), 96(SI), 160(SI), 132, 164, 196, 228, 64(R8), 80(R8), 96(R8), 112(R8))
	Q6KSUM(AX, Y4, Y0)
	Q6KSUM(BX, Y5, Y1)
	Q6KSUM(DX, Y6, Y2)
	Q6KSUM(DI, Y7, Y3)
	ADDQ $210, SI
	NEXT4($292)
	DECQ CX
	JNZ  block4

	STORE4(Y0, Y1, Y2, Y3)
	VZEROUPPER
	RET

// q6kShift is the word shift counts of the top bits on 512-bit registers:
// left 4 and 2 for a half's two low-nibble steps (Z20), right 0 and 2 for
// its two high-nibble steps (Z21), one step a 256-bit half.
DATA q6kShift<>+0(SB)/8, $0x0004000400040004
DATA q6kShift<>+8(SB)/8, $0x0004000400040004
DATA q6kShift<>+16(SB)/8, $0x0004000400040004
DATA q6kShift<>+24(SB)/8, $0x0004000400040004
DATA q6kShift<>+32(SB)/8, $0x0002000200020002
DATA q6kShift<>+40(SB)/8, $0x0002000200020002
DATA q6kShift<>+48(SB)/8, $0x0002000200020002
DATA q6kShift<>+56(SB)/8, $0x0002000200020002
DATA q6kShift<>+64(SB)/8, $0
DATA q6kShift<>+72(SB)/8, $0
DATA q6kShift<>+80(SB)/8, $0
DATA q6kShift<>+88(SB)/8, $0
DATA q6kShift<>+96(SB)/8, $0x0002000200020002
DATA q6kShift<>+104(SB)/8, $0x0002000200020002
DATA q6kShift<>+112(SB)/8, $0x0002000200020002
DATA q6kShift<>+120(SB)/8, $0x0002000200020002
GLOBL q6kShift<>(SB), RODATA|NOPTR, $128

// Q6KROWZ adds one row's int32 lanes for two steps (Z18: the quants q+32
// of the first two, activations at a(P); Z19 the next two at a+64(P);
// Z16, Z17 their scale words) to ACC: Q6KSTEP's int16 pair sums
// Σ (q+32)·q8 - 32·Σ q8, exact, then VPDPWSSD by the scales. Each 256-bit
// half is one step as the single-row kernel lays it out, so once the
// halves are added (FOLD512) each int32 lane holds the products it holds
// there.
#define Q6KROWZ(P, a, ACC) \
	VPMADDUBSW a(P), Z18, Z22; \
	VPMADDUBSW a(P), Z13, Z23; \
	VPSUBW     Z23, Z22, Z22; \
	VPDPWSSD   Z16, Z22, ACC; \
	VPMADDUBSW a+64(P), Z19, Z24; \
	VPMADDUBSW a+64(P), Z13, Z25; \
	VPSUBW     Z25, Z24, Z24; \
	VPDPWSSD   Z17, Z24, ACC

// Q6KDECZ decodes a half block for Q6KROWZ on 512-bit registers: the
// quants (the 64 low-bit bytes at ql, the 32 top-bit bytes at qh) two
// steps a register (Z18, Z19), their scale words (Z16, Z17).
#define Q6KDECZ(ql, qh, mask) \
	VMOVDQU64       ql, Z16; \
	VBROADCASTI64X4 qh, Z17; \
	VPANDD          Z15, Z16, Z18; \
	VPSLLVW         Z20, Z17, Z19; \
	VPANDD          Z14, Z19, Z19; \
	VPORD           Z19, Z18, Z18; \
	VPSRLW          $4, Z16, Z16; \
	VPANDD          Z15, Z16, Z16; \
	VPSRLVW         Z21, Z17, Z19; \
	VPANDD          Z14, Z19, Z19; \
	VPORD           Z16, Z19, Z19; \
	VBROADCASTI128  192(SI), Y12; \
	VPSHUFB         mask(R8), Y12, Y16; \
	VPMOVSXBW       Y16, Z16; \
	VPSHUFB         mask+32(R8), Y12, Y17; \
	VPMOVSXBW       Y17, Z17

// Q6KHALFZ is Q6KHALF4 on 512-bit registers: a half block decoded, then
// the four rows.
#define Q6KHALFZ(ql, qh, a, mask) \
	Q6KDECZ(ql, qh, mask); \
	Q6KROWZ(AX, a, Z4); \
	Q6KROWZ(BX, a, Z5); \
	Q6KROWZ(DX, a, Z6); \
	Q6KROWZ(DI, a, Z7)

// Q6KHALFZ5 is Q6KHALFZ with a fifth row at R10 (int32 lanes Z9).
#define Q6KHALFZ5(ql, qh, a, mask) \
	Q6KHALFZ(ql, qh, a, mask); \
	Q6KROWZ(R10, a, Z9)

// Q6KZINIT loads the constants of the 512-bit kernels below.
#define Q6KZINIT \
	MOVQ         x_base+0(FP), SI; \
	MOVQ         nb+32(FP), CX; \
	MOVL         $0x0F0F0F0F, AX; \
	VPBROADCASTD AX, Z15; \
	MOVL         $0x30303030, AX; \
	VPBROADCASTD AX, Z14; \
	MOVL         $0x20202020, AX; \
	VPBROADCASTD AX, Z13; \
	LEAQ         q6kShift<>(SB), R8; \
	VMOVDQU64    (R8), Z20; \
	VMOVDQU64    64(R8), Z21; \
	LEAQ         q6kPair<>(SB), R8

// func dotQ6_Kx4VNNI(x []byte, ys *[4]*byte, nb int, acc *[4][8]float32)
//
// dotQ6_Kx4AVX2 on AVX-512 (BW, VNNI): the same int32 lanes a block from
// fewer instructions (no VPSIGNB there: the single-row kernel's
// subtraction instead), then the same float steps (Q6KSUM).
TEXT ·dotQ6_Kx4VNNI(SB), NOSPLIT, $0-48
	Q6KZINIT
	ROWS4
	VXORPS       Y0, Y0, Y0
	VXORPS       Y1, Y1, Y1
	VXORPS       Y2, Y2, Y2
	VXORPS       Y3, Y3, Y3

block4z:
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	Q6KHALFZ((SI), 128(SI), 4, 0)
	Q6KHALFZ(64(SI), 160(SI), 132, 64)
	FOLD512(Z4, Y4, Y16)
	FOLD512(Z5, Y5, Y16)
	FOLD512(Z6, Y6, Y16)
	FOLD512(Z7, Y7, Y16)
	Q6KSUM(AX, Y4, Y0)
	Q6KSUM(BX, Y5, Y1)
	Q6KSUM(DX, Y6, Y2)
	Q6KSUM(DI, Y7, Y3)
	ADDQ $210, SI
	NEXT4($292)
	DECQ CX
	JNZ  block4z

	STORE4(Y0, Y1, Y2, Y3)
	VZEROUPPER
	RET

// func dotQ6_Kx5VNNI(x []byte, ys *[5]*byte, nb int, acc *[5][8]float32)
//
// dotQ6_Kx4VNNI with a fifth row (R10; its int32 lanes in Z9, its float
// lanes in Y8): a verification of a four-token draft reads and decodes
// each weight block once.
TEXT ·dotQ6_Kx5VNNI(SB), NOSPLIT, $0-48
	Q6KZINIT
	ROWS5
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y8, Y8, Y8

block5z:
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z9, Z9, Z9
	Q6KHALFZ5((SI), 128(SI), 4, 0)
	Q6KHALFZ5(64(SI), 160(SI), 132, 64)
	FOLD512(Z4, Y4, Y16)
	FOLD512(Z5, Y5, Y16)
	FOLD512(Z6, Y6, Y16)
	FOLD512(Z7, Y7, Y16)
	FOLD512(Z9, Y9, Y16)
	Q6KSUM(AX, Y4, Y0)
	Q6KSUM(BX, Y5, Y1)
	Q6KSUM(DX, Y6, Y2)
	Q6KSUM(DI, Y7, Y3)
	Q6KSUM(R10, Y9, Y8)
	ADDQ $210, SI
	NEXT4($292)
	ADDQ $292, R10
	DECQ CX
	JNZ  block5z

	STORE4(Y0, Y1, Y2, Y3)
	VMOVUPS Y8, 128(R9)
	VZEROUPPER
	RET

// func dotQ6_Kx1VNNI(x []byte, ys *[4]*byte, nb int, acc *[4][8]float32)
//
// dotQ6_Kx4VNNI for one row (acc[0]; the other three are left as they
// are): a decode step's Q6_K product (the head of a Q4_K_M model) with
// the single-row kernel's lanes. On a 1.7B Q4_K_M target on one core,
// rowsQ6_Kx4 took 29% of a decode step's time where the four-row kernel
// took 18% of a two-row pass'.
TEXT ·dotQ6_Kx1VNNI(SB), NOSPLIT, $0-48
	Q6KZINIT
	ROWS4
	VXORPS Y0, Y0, Y0

block1z:
	VPXORD Z4, Z4, Z4
	Q6KDECZ((SI), 128(SI), 0)
	Q6KROWZ(AX, 4, Z4)
	Q6KDECZ(64(SI), 160(SI), 64)
	Q6KROWZ(AX, 132, Z4)
	FOLD512(Z4, Y4, Y16)
	Q6KSUM(AX, Y4, Y0)
	ADDQ $210, SI
	ADDQ $292, AX
	DECQ CX
	JNZ  block1z

	MOVQ    acc+40(FP), R9
	VMOVUPS Y0, (R9)
	VZEROUPPER
	RET
