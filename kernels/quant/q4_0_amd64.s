//go:build !purego

#include "textflag.h"
#include "simd_amd64.h"

// Q4_0 and IQ4_NL weights (18-byte blocks: f16 d, 16 nibble bytes) with
// Q8_0 activations (34-byte blocks), two blocks per turn.

// Q4W unpacks the block at off(SI) into 32 signed bytes q-8 (Y10 = 8s).
#define Q4W(off, W, XW, XT) \
	NIB32(off+2(SI), W, XW, XT); \
	VPSUBB Y10, W, W

// IQ4W unpacks the block at off(SI) into 32 codebook values (Y10 = table).
#define IQ4W(off, W, XW, XT) \
	NIB32(off+2(SI), W, XW, XT); \
	VPSHUFB W, Y10, W

// NIBLOOP is the loop both kernels share; UNPACK is Q4W or IQ4W.
#define NIBLOOP(UNPACK) \
pair: \
	CMPQ        CX, $2; \
	JL          tail; \
	UNPACK(0, Y2, X2, X3); \
	I8DOT(2(DI), Y2, Y3); \
	F16PROD((SI), (DI), X4, Y4, X5, Y5); \
	VFMADD231PS Y2, Y4, Y0; \
	UNPACK(18, Y6, X6, X7); \
	I8DOT(36(DI), Y6, Y7); \
	F16PROD(18(SI), 34(DI), X4, Y4, X5, Y5); \
	VFMADD231PS Y6, Y4, Y8; \
	ADDQ        $36, SI; \
	ADDQ        $68, DI; \
	SUBQ        $2, CX; \
	JMP         pair; \
tail: \
	TESTQ       CX, CX; \
	JZ          done; \
	UNPACK(0, Y2, X2, X3); \
	I8DOT(2(DI), Y2, Y3); \
	F16PROD((SI), (DI), X4, Y4, X5, Y5); \
	VFMADD231PS Y2, Y4, Y0; \
done: \
	VADDPS      Y8, Y0, Y0; \
	HSUM8; \
	VZEROUPPER; \
	MOVSS       X0, ret+56(FP); \
	RET

// func dotQ4_0AVX2(x, y []byte, nb int) float32
TEXT ·dotQ4_0AVX2(SB), NOSPLIT, $0-60
	MOVQ   x_base+0(FP), SI
	MOVQ   y_base+24(FP), DI
	MOVQ   nb+48(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y8, Y8, Y8
	ONES16
	BYTES8($0x0F0F0F0F, X14, Y14)
	BYTES8($0x08080808, X10, Y10)
	NIBLOOP(Q4W)

// func dotIQ4_NLAVX2(x, y []byte, nb int) float32
TEXT ·dotIQ4_NLAVX2(SB), NOSPLIT, $0-60
	MOVQ    x_base+0(FP), SI
	MOVQ    y_base+24(FP), DI
	MOVQ    nb+48(FP), CX
	VXORPS  Y0, Y0, Y0
	VXORPS  Y8, Y8, Y8
	ONES16
	BYTES8($0x0F0F0F0F, X14, Y14)
	VMOVDQU ·iq4nlTable(SB), Y10
	NIBLOOP(IQ4W)
