//go:build !purego

#include "textflag.h"

// Elementwise float32 loops, sixteen lanes at a time: Go does not vectorise
// them, and at the demo models' widths they cost as much as the products
// around them. Each lane does the Go loop's operations in its order.

// func scaleMulAVX512(dst, x, w []float32, s float32, n int)
//
// dst = x·s·w (the product with s first), n a multiple of 16.
TEXT ·scaleMulAVX512(SB), NOSPLIT, $0-88
	MOVQ         dst_base+0(FP), DI
	MOVQ         x_base+24(FP), SI
	MOVQ         w_base+48(FP), DX
	VBROADCASTSS s+72(FP), Z0
	MOVQ         n+80(FP), CX
	SHRQ         $4, CX

scalemul:
	VMULPS  (SI), Z0, Z1
	VMULPS  (DX), Z1, Z1
	VMOVUPS Z1, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DX
	ADDQ    $64, DI
	DECQ    CX
	JNZ     scalemul
	VZEROUPPER
	RET

// func addAVX512(dst, a, b []float32, n int)
//
// dst = a + b, n a multiple of 16.
TEXT ·addAVX512(SB), NOSPLIT, $0-80
	MOVQ dst_base+0(FP), DI
	MOVQ a_base+24(FP), SI
	MOVQ b_base+48(FP), DX
	MOVQ n+72(FP), CX
	SHRQ $4, CX

add:
	VMOVUPS (SI), Z1
	VADDPS  (DX), Z1, Z1
	VMOVUPS Z1, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DX
	ADDQ    $64, DI
	DECQ    CX
	JNZ     add
	VZEROUPPER
	RET

// func rotateAVX512(dst0, dst1, x0, x1, cos, sin []float32, n int)
//
// dst0 = x0·cos - x1·sin and dst1 = x0·sin + x1·cos, each product rounded
// (no fused multiply-add), n a multiple of 16: NeoX RoPE's halves.
TEXT ·rotateAVX512(SB), NOSPLIT, $0-152
	MOVQ dst0_base+0(FP), DI
	MOVQ dst1_base+24(FP), R8
	MOVQ x0_base+48(FP), SI
	MOVQ x1_base+72(FP), R9
	MOVQ cos_base+96(FP), R10
	MOVQ sin_base+120(FP), R11
	MOVQ n+144(FP), CX
	SHRQ $4, CX
	XORQ AX, AX

rotate:
	VMOVUPS (SI)(AX*1), Z0
	VMOVUPS (R9)(AX*1), Z1
	VMOVUPS (R10)(AX*1), Z2
	VMOVUPS (R11)(AX*1), Z3
	VMULPS  Z2, Z0, Z4
	VMULPS  Z3, Z1, Z5
	VSUBPS  Z5, Z4, Z4
	VMULPS  Z3, Z0, Z6
	VMULPS  Z2, Z1, Z7
	VADDPS  Z7, Z6, Z6
	VMOVUPS Z4, (DI)(AX*1)
	VMOVUPS Z6, (R8)(AX*1)
	ADDQ    $64, AX
	DECQ    CX
	JNZ     rotate
	VZEROUPPER
	RET
