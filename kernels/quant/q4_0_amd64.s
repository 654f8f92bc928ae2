//go:build !purego

#include "textflag.h"
#include "simd_amd64.h"

// Q4_0 and IQ4_NL weights (18-byte blocks: f16 d, 16 nibble bytes) with
// Q8_0 activations (34-byte blocks).

// Q4W unpacks the block at off(SI) into 32 signed bytes q-8 (Y10 = 8s).
#define Q4W(off, W, XW, XT) \
	NIB32(off+2(SI), W, XW, XT); \
	VPSUBB Y10, W, W

// IQ4W unpacks the block at off(SI) into 32 codebook values (Y10 = table).
#define IQ4W(off, W, XW, XT) \
	NIB32(off+2(SI), W, XW, XT); \
	VPSHUFB W, Y10, W

// NIBLOOP is the loop both kernels share; UNPACK is Q4W or IQ4W. Each
// block's 32 products are summed exactly as integers and the sum takes one
// fused multiply-add into the scalar X0: ggml's x86 products for these
// types (their weights repacked eight rows at a time) keep one float per
// output row, and matching that rounding is what reproduces its tokens.
#define NIBLOOP(UNPACK) \
block: \
	UNPACK(0, Y2, X2, X3); \
	VMOVDQU      2(DI), Y3; \
	VPSIGNB      Y2, Y3, Y3; \
	VPSIGNB      Y2, Y2, Y2; \
	VPMADDUBSW   Y3, Y2, Y2; \
	VPMADDWD     Y15, Y2, Y2; \
	VEXTRACTI128 $1, Y2, X3; \
	VPADDD       X3, X2, X2; \
	VPHADDD      X2, X2, X2; \
	VPHADDD      X2, X2, X2; \
	VCVTDQ2PS    X2, X2; \
	VPBROADCASTW (SI), X4; \
	VCVTPH2PS    X4, X4; \
	VPBROADCASTW (DI), X5; \
	VCVTPH2PS    X5, X5; \
	VMULSS       X5, X4, X4; \
	VFMADD231SS  X2, X4, X0; \
	ADDQ         $18, SI; \
	ADDQ         $34, DI; \
	DECQ         CX; \
	JNZ          block; \
	VZEROUPPER; \
	MOVSS        X0, ret+56(FP); \
	RET

// func dotQ4_0AVX2(x, y []byte, nb int) float32
TEXT ·dotQ4_0AVX2(SB), NOSPLIT, $0-60
	MOVQ   x_base+0(FP), SI
	MOVQ   y_base+24(FP), DI
	MOVQ   nb+48(FP), CX
	VXORPS Y0, Y0, Y0
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
	ONES16
	BYTES8($0x0F0F0F0F, X14, Y14)
	VMOVDQU ·iq4nlTable(SB), Y10
	NIBLOOP(IQ4W)
