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
