//go:build !purego

#include "textflag.h"
#include "simd_amd64.h"

// q5Spread moves byte k of a broadcast uint32 to bytes 8k..8k+7 (VPSHUFB
// indexes within each 128-bit lane, and every lane holds the whole dword).
DATA q5Spread<>+0(SB)/8, $0x0000000000000000
DATA q5Spread<>+8(SB)/8, $0x0101010101010101
DATA q5Spread<>+16(SB)/8, $0x0202020202020202
DATA q5Spread<>+24(SB)/8, $0x0303030303030303
GLOBL q5Spread<>(SB), RODATA|NOPTR, $32

// Q5W unpacks one Q5_0 block (quants at qs, high bits at qh) into 32 signed
// bytes q-16 in W. The nibbles go to the low lane (elements 0-15) and high
// lane (16-31); bit j of qh becomes byte j = 0xFF (by setting every other
// bit of its byte and comparing with all ones); then (bit ? 0 : 0xF0) | q
// is q+16·bit-16 as a signed byte.
// Needs Y14 = 0x0F bytes, Y13 = q5Spread, Y12 = 0x7fbfdfeff7fbfdfe
// quadwords, Y11 = all ones, Y10 = 0xF0 bytes.
#define Q5W(qs, qh, W, XW, T, XT) \
	VMOVDQU      qs, XW; \
	VPSRLW       $4, XW, XT; \
	VINSERTI128  $1, XT, W, W; \
	VPAND        Y14, W, W; \
	VPBROADCASTD qh, T; \
	VPSHUFB      Y13, T, T; \
	VPOR         Y12, T, T; \
	VPCMPEQB     Y11, T, T; \
	VPANDN       Y10, T, T; \
	VPOR         T, W, W

// func dotQ5_0AVX2(x, y []byte, nb int) float32
//
// Q5_0 weights x (22-byte blocks) with Q8_0 activations y (34-byte blocks).
TEXT ·dotQ5_0AVX2(SB), NOSPLIT, $0-60
	MOVQ         x_base+0(FP), SI
	MOVQ         y_base+24(FP), DI
	MOVQ         nb+48(FP), CX
	VXORPS       Y0, Y0, Y0
	VXORPS       Y8, Y8, Y8
	ONES16
	MOVL         $0x0F0F0F0F, AX
	VMOVD        AX, X14
	VPBROADCASTD X14, Y14
	MOVL         $0xF0F0F0F0, AX
	VMOVD        AX, X10
	VPBROADCASTD X10, Y10
	MOVQ         $0x7fbfdfeff7fbfdfe, AX
	VMOVQ        AX, X12
	VPBROADCASTQ X12, Y12
	VPCMPEQB     Y11, Y11, Y11
	VMOVDQU      q5Spread<>(SB), Y13

pair:
	CMPQ        CX, $2
	JL          tail
	Q5W(6(SI), 2(SI), Y2, X2, Y3, X3)
	I8DOT(2(DI), Y2, Y3)
	F16PROD((SI), (DI), X4, Y4, X5, Y5)
	VFMADD231PS Y2, Y4, Y0
	Q5W(28(SI), 24(SI), Y6, X6, Y7, X7)
	I8DOT(36(DI), Y6, Y7)
	F16PROD(22(SI), 34(DI), X4, Y4, X5, Y5)
	VFMADD231PS Y6, Y4, Y8
	ADDQ        $44, SI
	ADDQ        $68, DI
	SUBQ        $2, CX
	JMP         pair

tail:
	TESTQ       CX, CX
	JZ          done
	Q5W(6(SI), 2(SI), Y2, X2, Y3, X3)
	I8DOT(2(DI), Y2, Y3)
	F16PROD((SI), (DI), X4, Y4, X5, Y5)
	VFMADD231PS Y2, Y4, Y0

done:
	VADDPS Y8, Y0, Y0
	HSUM8
	VZEROUPPER
	MOVSS  X0, ret+56(FP)
	RET
