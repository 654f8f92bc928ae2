//go:build !purego

#include "textflag.h"
#include "simd_amd64.h"

// q4kWord mask k copies int16 word k across each 128-bit lane (VPSHUFB).
DATA ·q4kWord+0(SB)/8, $0x0100010001000100
DATA ·q4kWord+8(SB)/8, $0x0100010001000100
DATA ·q4kWord+16(SB)/8, $0x0100010001000100
DATA ·q4kWord+24(SB)/8, $0x0100010001000100
DATA ·q4kWord+32(SB)/8, $0x0302030203020302
DATA ·q4kWord+40(SB)/8, $0x0302030203020302
DATA ·q4kWord+48(SB)/8, $0x0302030203020302
DATA ·q4kWord+56(SB)/8, $0x0302030203020302
DATA ·q4kWord+64(SB)/8, $0x0504050405040504
DATA ·q4kWord+72(SB)/8, $0x0504050405040504
DATA ·q4kWord+80(SB)/8, $0x0504050405040504
DATA ·q4kWord+88(SB)/8, $0x0504050405040504
DATA ·q4kWord+96(SB)/8, $0x0706070607060706
DATA ·q4kWord+104(SB)/8, $0x0706070607060706
DATA ·q4kWord+112(SB)/8, $0x0706070607060706
DATA ·q4kWord+120(SB)/8, $0x0706070607060706
DATA ·q4kWord+128(SB)/8, $0x0908090809080908
DATA ·q4kWord+136(SB)/8, $0x0908090809080908
DATA ·q4kWord+144(SB)/8, $0x0908090809080908
DATA ·q4kWord+152(SB)/8, $0x0908090809080908
DATA ·q4kWord+160(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA ·q4kWord+168(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA ·q4kWord+176(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA ·q4kWord+184(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA ·q4kWord+192(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA ·q4kWord+200(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA ·q4kWord+208(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA ·q4kWord+216(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA ·q4kWord+224(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA ·q4kWord+232(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA ·q4kWord+240(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA ·q4kWord+248(SB)/8, $0x0f0e0f0e0f0e0f0e
GLOBL ·q4kWord(SB), RODATA|NOPTR, $256

// Q4KSTEP multiplies 64 weights (32 quant bytes at qs: low nibbles are
// sub-block 2j, high nibbles 2j+1) with the 64 activations at q8 and adds
// scale·Σ for both sub-blocks to the int32 lanes of Y3. Nibbles are
// unsigned, so VPMADDUBSW takes them directly (15·127·2 fits int16).
// Needs Y15 = 0x0F bytes and Y2 = the eight scales as int16 in both lanes.
#define Q4KSTEP(qs, q8lo, q8hi, sclo, schi) \
	VMOVDQU    qs, Y4; \
	VPSRLW     $4, Y4, Y5; \
	VPAND      Y15, Y4, Y4; \
	VPAND      Y15, Y5, Y5; \
	VPMADDUBSW q8lo, Y4, Y4; \
	VPMADDUBSW q8hi, Y5, Y5; \
	VPSHUFB    sclo, Y2, Y6; \
	VPSHUFB    schi, Y2, Y7; \
	VPMADDWD   Y6, Y4, Y4; \
	VPMADDWD   Y7, Y5, Y5; \
	VPADDD     Y4, Y3, Y3; \
	VPADDD     Y5, Y3, Y3

// func dotQ4_KAVX2(x, y []byte, nb int) float32
//
// Q4_K weights x (144-byte blocks) with Q8_K activations y (292-byte
// blocks). Per block: Σ_j sc_j·Σ q·q8 in int32, times d·dy; minus
// dmin·dy·Σ_j m_j·(sum of the activation quants of sub-block j), which the
// Q8_K bsums give without touching the quants again. Both sums are single
// floats that take one fused multiply-add per block, the rounding of
// ggml's x86 product for Q4_K (its weights repacked eight rows at a time).
TEXT ·dotQ4_KAVX2(SB), NOSPLIT, $0-60
	MOVQ         x_base+0(FP), SI
	MOVQ         y_base+24(FP), DI
	MOVQ         nb+48(FP), CX
	VXORPS       X0, X0, X0            // Σ d·dy·Σ sc·q·q8
	VXORPS       X1, X1, X1            // Σ dmin·dy·Σ m·bsum
	MOVL         $0x0F0F0F0F, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15
	LEAQ         ·q4kWord(SB), R8

block:
	Q4KSCALES
	KMINS

	// Scales: copy the low lane up, then four steps of 64 weights.
	VPERMQ $0x44, Y2, Y2
	VPXOR  Y3, Y3, Y3
	Q4KSTEP(16(SI), 4(DI), 36(DI), (R8), 32(R8))
	Q4KSTEP(48(SI), 68(DI), 100(DI), 64(R8), 96(R8))
	Q4KSTEP(80(SI), 132(DI), 164(DI), 128(R8), 160(R8))
	Q4KSTEP(112(SI), 196(DI), 228(DI), 192(R8), 224(R8))

	KSUMSCALAR

	ADDQ $144, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  block

	VSUBSS X1, X0, X0
	VZEROUPPER
	MOVSS  X0, ret+56(FP)
	RET

// Q4KROW is Q4KSTEP's activation half for the row at P: the nibbles in
// Y4, Y5 times the 64 activations at lo(P), hi(P), times the scale words
// in Y6, Y7, into the int32 lanes of ACC (integer sums: exact in any
// order).
#define Q4KROW(P, lo, hi, ACC) \
	VPMADDUBSW lo(P), Y4, Y0; \
	VPMADDWD   Y6, Y0, Y0; \
	VPADDD     Y0, ACC, ACC; \
	VPMADDUBSW hi(P), Y5, Y1; \
	VPMADDWD   Y7, Y1, Y1; \
	VPADDD     Y1, ACC, ACC

// Q4KSTEP4 is Q4KSTEP for the four rows, into Y8-Y11.
#define Q4KSTEP4(qs, lo, hi, sclo, schi) \
	VMOVDQU qs, Y4; \
	VPSRLW  $4, Y4, Y5; \
	VPAND   Y15, Y4, Y4; \
	VPAND   Y15, Y5, Y5; \
	VPSHUFB sclo, Y2, Y6; \
	VPSHUFB schi, Y2, Y7; \
	Q4KROW(AX, lo, hi, Y8); \
	Q4KROW(BX, lo, hi, Y9); \
	Q4KROW(DX, lo, hi, Y10); \
	Q4KROW(DI, lo, hi, Y11)

// Q4KMIN leaves Σ_j m_j·bsum_j of the row at P in four int32 lanes of D,
// as Q4KMINSUM (mins in X14).
#define Q4KMIN(P, D) \
	VMOVDQU      260(P), Y3; \
	VEXTRACTI128 $1, Y3, X1; \
	VPHADDW      X1, X3, X3; \
	VPMADDWD     X14, X3, D

// SUM4 adds up the int32 lanes of A, B, C, D (exactly) into the four
// lanes of XA, converted to float32.
#define SUM4(A, B, C, D, XA) \
	VPHADDD   B, A, A; \
	VPHADDD   D, C, C; \
	VPHADDD   C, A, A; \
	VCVTDQ2PS XA, XA

// func dotQ4_Kx4AVX2(x []byte, ys *[4]*byte, nb int, out *[4]float32)
//
// dotQ4_KAVX2 for four activation rows (see ROWS4 in simd_amd64.h). The
// rows' scaled sums and mins sit in the lanes of X12 and X13, one row a
// lane, so each row takes, lane-wise, the single-row kernel's scalar
// operations: float32 of the block's integer sum, d·dy, one fused
// multiply-add per block, sum minus mins at the end.
TEXT ·dotQ4_Kx4AVX2(SB), NOSPLIT, $0-48
	MOVQ         x_base+0(FP), SI
	MOVQ         nb+32(FP), CX
	MOVL         $0x0F0F0F0F, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15
	LEAQ         ·q4kWord(SB), R8
	ROWS4
	VXORPS       X12, X12, X12
	VXORPS       X13, X13, X13

block4:
	Q4KUNPACK
	VEXTRACTI128 $1, Y2, X14 // mins
	VPERMQ       $0x44, Y2, Y2 // scales in both lanes
	VPXOR        Y8, Y8, Y8
	VPXOR        Y9, Y9, Y9
	VPXOR        Y10, Y10, Y10
	VPXOR        Y11, Y11, Y11
	Q4KSTEP4(16(SI), 4, 36, (R8), 32(R8))
	Q4KSTEP4(48(SI), 68, 100, 64(R8), 96(R8))
	Q4KSTEP4(80(SI), 132, 164, 128(R8), 160(R8))
	Q4KSTEP4(112(SI), 196, 228, 192(R8), 224(R8))

	// Scaled sums: lane r of X8 is row r's block sum.
	VPHADDD      Y9, Y8, Y8
	VPHADDD      Y11, Y10, Y10
	VPHADDD      Y10, Y8, Y8
	VEXTRACTI128 $1, Y8, X9
	VPADDD       X9, X8, X8
	VCVTDQ2PS    X8, X8
	VMOVSS       (AX), X0
	VPINSRD      $1, (BX), X0, X0
	VPINSRD      $2, (DX), X0, X0
	VPINSRD      $3, (DI), X0, X0 // dy of each row
	VPBROADCASTW (SI), X1
	VCVTPH2PS    X1, X1
	VMULPS       X0, X1, X1
	VFMADD231PS  X8, X1, X12

	// Mins.
	Q4KMIN(AX, X8)
	Q4KMIN(BX, X9)
	Q4KMIN(DX, X10)
	Q4KMIN(DI, X11)
	SUM4(X8, X9, X10, X11, X8)
	VPBROADCASTW 2(SI), X1
	VCVTPH2PS    X1, X1
	VMULPS       X0, X1, X1
	VFMADD231PS  X8, X1, X13

	ADDQ $144, SI
	NEXT4($292)
	DECQ CX
	JNZ  block4

	VSUBPS  X13, X12, X12
	MOVQ    out+40(FP), R9
	VMOVUPS X12, (R9)
	VZEROUPPER
	RET

// Q4KDEC decodes half a block (four sub-blocks, 128 weights: the 64 quant
// bytes at qs) for the rows on 512-bit registers: Z18 holds the nibbles of
// sub-blocks 4h and 4h+1, Z19 those of 4h+2 and 4h+3, so that each row's
// 64 activations for either come in one load (Q4KROWZ); Z16 and Z17 are
// the matching scale words (q4kWord's masks for the four sub-blocks lie
// in that order at mask).
#define Q4KDEC(qs, mask) \
	VMOVDQU64  qs, Z4; \
	VPSRLW     $4, Z4, Z5; \
	VPANDD     Z15, Z4, Z4; \
	VPANDD     Z15, Z5, Z5; \
	VSHUFI64X2 $0x44, Z5, Z4, Z18; \
	VSHUFI64X2 $0xEE, Z5, Z4, Z19; \
	VPSHUFB    mask(R8), Z2, Z16; \
	VPSHUFB    mask+64(R8), Z2, Z17

// Q4KROWZ adds the half block's products for the row at P (activations
// at lo(P) and lo+64(P)) to the int32 lanes of ACC: VPDPWSSD adds the
// scaled pairs straight in, the same exact integer sums as Q4KSTEP4's in
// fewer instructions.
#define Q4KROWZ(P, lo, ACC) \
	VPMADDUBSW lo(P), Z18, Z0; \
	VPMADDUBSW lo+64(P), Z19, Z1; \
	VPDPWSSD   Z16, Z0, ACC; \
	VPDPWSSD   Z17, Z1, ACC

// Q4KVSTART starts a block: scales and mins (Q4KUNPACK), the rows' int32
// lanes Z8-Z11 cleared.
#define Q4KVSTART \
	Q4KUNPACK; \
	VEXTRACTI128 $1, Y2, X14; \
	VSHUFI64X2   $0, Z2, Z2, Z2; \
	VPXORD       Z8, Z8, Z8; \
	VPXORD       Z9, Z9, Z9; \
	VPXORD       Z10, Z10, Z10; \
	VPXORD       Z11, Z11, Z11

// Q4KVEND ends a block from the rows' int32 lanes in Z8-Z11 on with the
// very instructions of dotQ4_Kx4AVX2, so each row's float32 operations
// are the single-row kernel's (lane r of X12, X13 is row r's).
#define Q4KVEND \
	FOLD512(Z8, Y8, Y0); \
	FOLD512(Z9, Y9, Y0); \
	FOLD512(Z10, Y10, Y0); \
	FOLD512(Z11, Y11, Y0); \
	VPHADDD      Y9, Y8, Y8; \
	VPHADDD      Y11, Y10, Y10; \
	VPHADDD      Y10, Y8, Y8; \
	VEXTRACTI128 $1, Y8, X9; \
	VPADDD       X9, X8, X8; \
	VCVTDQ2PS    X8, X8; \
	VMOVSS       (AX), X0; \
	VPINSRD      $1, (BX), X0, X0; \
	VPINSRD      $2, (DX), X0, X0; \
	VPINSRD      $3, (DI), X0, X0; \
	VPBROADCASTW (SI), X1; \
	VCVTPH2PS    X1, X1; \
	VMULPS       X0, X1, X1; \
	VFMADD231PS  X8, X1, X12; \
	Q4KMIN(AX, X8); \
	Q4KMIN(BX, X9); \
	Q4KMIN(DX, X10); \
	Q4KMIN(DI, X11); \
	SUM4(X8, X9, X10, X11, X8); \
	VPBROADCASTW 2(SI), X1; \
	VCVTPH2PS    X1, X1; \
	VMULPS       X0, X1, X1; \
	VFMADD231PS  X8, X1, X13; \
	ADDQ         $144, SI; \
	NEXT4($292)

// Q4KVINIT and Q4KVRET open and close the kernels below.
#define Q4KVINIT \
	MOVQ         x_base+0(FP), SI; \
	MOVQ         nb+32(FP), CX; \
	MOVL         $0x0F0F0F0F, AX; \
	VPBROADCASTD AX, Z15; \
	LEAQ         ·q4kWord(SB), R8; \
	ROWS4; \
	VXORPS       X12, X12, X12; \
	VXORPS       X13, X13, X13

#define Q4KVRET \
	VSUBPS  X13, X12, X12; \
	MOVQ    out+40(FP), R9; \
	VMOVUPS X12, (R9); \
	VZEROUPPER; \
	RET

// func dotQ4_Kx4VNNI(x []byte, ys *[4]*byte, nb int, out *[4]float32)
//
// dotQ4_Kx4AVX2 on AVX-512 VNNI: the integer sums of a block on 512-bit
// registers, then, from the block's int32 sums on, the very instructions
// of dotQ4_Kx4AVX2. A speculative verification of a few rows on a model
// whose weights stream from memory spends most of its time here.
TEXT ·dotQ4_Kx4VNNI(SB), NOSPLIT, $0-48
	Q4KVINIT

block4v:
	Q4KVSTART
	Q4KDEC(16(SI), 0)
	Q4KROWZ(AX, 4, Z8)
	Q4KROWZ(BX, 4, Z9)
	Q4KROWZ(DX, 4, Z10)
	Q4KROWZ(DI, 4, Z11)
	Q4KDEC(80(SI), 128)
	Q4KROWZ(AX, 132, Z8)
	Q4KROWZ(BX, 132, Z9)
	Q4KROWZ(DX, 132, Z10)
	Q4KROWZ(DI, 132, Z11)
	Q4KVEND
	DECQ CX
	JNZ  block4v
	Q4KVRET

// func dotQ4_Kx3VNNI(x []byte, ys *[4]*byte, nb int, out *[4]float32)
//
// dotQ4_Kx4VNNI for three rows (ys[3] a copy of ys[2]): row 3's integer
// products are left out, its lane (zero sums) thrown away.
TEXT ·dotQ4_Kx3VNNI(SB), NOSPLIT, $0-48
	Q4KVINIT

block3v:
	Q4KVSTART
	Q4KDEC(16(SI), 0)
	Q4KROWZ(AX, 4, Z8)
	Q4KROWZ(BX, 4, Z9)
	Q4KROWZ(DX, 4, Z10)
	Q4KDEC(80(SI), 128)
	Q4KROWZ(AX, 132, Z8)
	Q4KROWZ(BX, 132, Z9)
	Q4KROWZ(DX, 132, Z10)
	Q4KVEND
	DECQ CX
	JNZ  block3v
	Q4KVRET

// func dotQ4_Kx2VNNI(x []byte, ys *[4]*byte, nb int, out *[4]float32)
//
// dotQ4_Kx4VNNI for two rows (ys[2], ys[3] copies of ys[1]).
TEXT ·dotQ4_Kx2VNNI(SB), NOSPLIT, $0-48
	Q4KVINIT

block2v:
	Q4KVSTART
	Q4KDEC(16(SI), 0)
	Q4KROWZ(AX, 4, Z8)
	Q4KROWZ(BX, 4, Z9)
	Q4KDEC(80(SI), 128)
	Q4KROWZ(AX, 132, Z8)
	Q4KROWZ(BX, 132, Z9)
	Q4KVEND
	DECQ CX
	JNZ  block2v
	Q4KVRET

// func dotQ4_Kx5VNNI(x []byte, ys *[5]*byte, nb int, out *[5]float32)
//
// dotQ4_Kx4VNNI with a fifth row, whose pointer lives in the frame
// (Q4KUNPACK takes R9-R13): its int32 lanes in Z20, then the single-row
// kernel's scalar float steps (KSUMSCALAR, Q4KMINSUM, KMINS) on X6 (sums)
// and X7 (mins). A verification of a four-token draft reads and decodes
// each weight block once.
TEXT ·dotQ4_Kx5VNNI(SB), NOSPLIT, $8-48
	Q4KVINIT
	MOVQ   32(R9), R10
	MOVQ   R10, row4-8(SP)
	VXORPS X6, X6, X6
	VXORPS X7, X7, X7

block5v:
	Q4KVSTART
	VPXORD Z20, Z20, Z20
	MOVQ   row4-8(SP), R10
	Q4KDEC(16(SI), 0)
	Q4KROWZ(AX, 4, Z8)
	Q4KROWZ(BX, 4, Z9)
	Q4KROWZ(DX, 4, Z10)
	Q4KROWZ(DI, 4, Z11)
	Q4KROWZ(R10, 4, Z20)
	Q4KDEC(80(SI), 128)
	Q4KROWZ(AX, 132, Z8)
	Q4KROWZ(BX, 132, Z9)
	Q4KROWZ(DX, 132, Z10)
	Q4KROWZ(DI, 132, Z11)
	Q4KROWZ(R10, 132, Z20)

	// The fifth row, as dotQ4_KAVX2 rounds it.
	VEXTRACTI64X4 $1, Z20, Y3
	VPADDD        Y20, Y3, Y3
	VEXTRACTI128  $1, Y3, X4
	VPADDD        X4, X3, X3
	VPHADDD       X3, X3, X3
	VPHADDD       X3, X3, X3
	VCVTDQ2PS     X3, X3
	VPBROADCASTW  (SI), X5
	VCVTPH2PS     X5, X5
	VMULSS        (R10), X5, X5
	VFMADD231SS   X3, X5, X6
	Q4KMIN(R10, X4)
	VPHADDD       X4, X4, X4
	VPHADDD       X4, X4, X4
	VCVTDQ2PS     X4, X4
	VPBROADCASTW  2(SI), X5
	VCVTPH2PS     X5, X5
	VMULSS        (R10), X5, X5
	VFMADD231SS   X4, X5, X7
	ADDQ          $292, R10
	MOVQ          R10, row4-8(SP)

	Q4KVEND
	DECQ CX
	JNZ  block5v

	VSUBSS X7, X6, X6
	MOVQ   out+40(FP), R9
	VMOVSS X6, 16(R9)
	Q4KVRET
