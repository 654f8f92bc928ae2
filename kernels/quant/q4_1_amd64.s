//go:build !purego

#include "textflag.h"
#include "simd_amd64.h"

// Q4_1 (20-byte blocks: f16 d, f16 m, 16 nibble bytes) and Q5_1 (24-byte
// blocks: d, m, 32 high bits, 16 nibble bytes) weights with Q8_1
// activations (36-byte blocks: f16 d, f16 s = d·Σq, 32 quants). The quants
// are unsigned, so VPMADDUBSW takes them as they are; the offset adds
// m·s per block in lane 0 of X9.

// MS adds f16(m)·f16(s) to lane 0 of X9.
#define MS(m, s) \
	VPBROADCASTW m, X4; \
	VCVTPH2PS    X4, X4; \
	VPBROADCASTW s, X5; \
	VCVTPH2PS    X5, X5; \
	VFMADD231SS  X5, X4, X9

// U8DOT multiplies the 32 unsigned bytes in W with the 32 signed ones at
// mem, scales by the f16 product at a, b and adds into ACC.
#define U8DOT(mem, W, a, b, ACC) \
	VPMADDUBSW  mem, W, W; \
	VPMADDWD    Y15, W, W; \
	VCVTDQ2PS   W, W; \
	F16PROD(a, b, X4, Y4, X5, Y5); \
	VFMADD231PS W, Y4, ACC

// Q4_1 quants of the block at SI.
#define Q41W(W, XW, XT) \
	NIB32(4(SI), W, XW, XT)

// Q5_1 quants of the block at SI: nibble | 0x10·bit (Y10 = 0x10 bytes).
#define Q51W(W, XW, XT) \
	NIB32(8(SI), W, XW, XT); \
	QHBITS(4(SI), Y3); \
	VPAND Y10, Y3, Y3; \
	VPOR  Y3, W, W

#define RESULT \
	HSUM8; \
	VADDSS     X9, X0, X0; \
	VZEROUPPER; \
	MOVSS      X0, ret+56(FP); \
	RET

// func dotQ4_1AVX2(x, y []byte, nb int) float32
TEXT ·dotQ4_1AVX2(SB), NOSPLIT, $0-60
	MOVQ   x_base+0(FP), SI
	MOVQ   y_base+24(FP), DI
	MOVQ   nb+48(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y9, Y9, Y9
	ONES16
	BYTES8($0x0F0F0F0F, X14, Y14)

loop41:
	Q41W(Y2, X2, X3)
	U8DOT(4(DI), Y2, (SI), (DI), Y0)
	MS(2(SI), 2(DI))
	ADDQ $20, SI
	ADDQ $36, DI
	DECQ CX
	JNZ  loop41
	RESULT

// func dotQ5_1AVX2(x, y []byte, nb int) float32
TEXT ·dotQ5_1AVX2(SB), NOSPLIT, $0-60
	MOVQ   x_base+0(FP), SI
	MOVQ   y_base+24(FP), DI
	MOVQ   nb+48(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y9, Y9, Y9
	ONES16
	BYTES8($0x0F0F0F0F, X14, Y14)
	BYTES8($0x10101010, X10, Y10)
	QHSETUP

loop51:
	Q51W(Y2, X2, X6)
	U8DOT(4(DI), Y2, (SI), (DI), Y0)
	MS(2(SI), 2(DI))
	ADDQ $24, SI
	ADDQ $36, DI
	DECQ CX
	JNZ  loop51
	RESULT
