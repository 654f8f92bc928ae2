//go:build !purego

#include "textflag.h"
#include "simd_amd64.h"

// IQ4XSSUB adds (scale-32)·Σ iq4nl(q)·q8 of one 32-element sub-block to the
// int32 lanes of Y3: the 6-bit scale is nibble lsh/4 of R10 (scales_l) with
// bits hsh..hsh+1 of R9 (scales_h) on top; the codebook values are signed,
// so their signs move onto the activations for VPMADDUBSW (|v| <= 127).
// Needs Y14 = 0x0F bytes, Y12 = iq4nlTable.
#define IQ4XSSUB(lsh, hsh, qs, q8) \
	MOVL         R10, AX; \
	SHRL         lsh, AX; \
	ANDL         $15, AX; \
	MOVL         R9, BX; \
	SHRL         hsh, BX; \
	ANDL         $3, BX; \
	SHLL         $4, BX; \
	ORL          BX, AX; \
	SUBL         $32, AX; \
	VMOVD        AX, X6; \
	VPBROADCASTW X6, Y6; \
	NIB32(qs, Y4, X4, X5); \
	VPSHUFB      Y4, Y12, Y4; \
	VMOVDQU      q8, Y5; \
	VPSIGNB      Y4, Y5, Y5; \
	VPSIGNB      Y4, Y4, Y4; \
	VPMADDUBSW   Y5, Y4, Y4; \
	VPMADDWD     Y6, Y4, Y4; \
	VPADDD       Y4, Y3, Y3

// func dotIQ4_XSAVX2(x, y []byte, nb int) float32
//
// IQ4_XS weights x (136-byte blocks: f16 d, uint16 scales_h, 4 bytes
// scales_l, 128 nibble bytes) with Q8_K activations y (292-byte blocks).
TEXT ·dotIQ4_XSAVX2(SB), NOSPLIT, $0-60
	MOVQ    x_base+0(FP), SI
	MOVQ    y_base+24(FP), DI
	MOVQ    nb+48(FP), CX
	VXORPS  Y0, Y0, Y0
	BYTES8($0x0F0F0F0F, X14, Y14)
	VMOVDQU ·iq4nlTable(SB), Y12

block:
	MOVWLZX 2(SI), R9
	MOVL    4(SI), R10
	VPXOR   Y3, Y3, Y3
	IQ4XSSUB($0, $0, 8(SI), 4(DI))
	IQ4XSSUB($4, $2, 24(SI), 36(DI))
	IQ4XSSUB($8, $4, 40(SI), 68(DI))
	IQ4XSSUB($12, $6, 56(SI), 100(DI))
	IQ4XSSUB($16, $8, 72(SI), 132(DI))
	IQ4XSSUB($20, $10, 88(SI), 164(DI))
	IQ4XSSUB($24, $12, 104(SI), 196(DI))
	IQ4XSSUB($28, $14, 120(SI), 228(DI))
	Q4KSUM

	ADDQ $136, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  block

	HSUM8
	VZEROUPPER
	MOVSS X0, ret+56(FP)
	RET
