//go:build !purego

#include "textflag.h"

// Written by hand because Go has no vector intrinsics: this is expApprox
// (expf.go) sixteen lanes at a time, as ggml's AVX-512 build evaluates it,
// with SiLU and the product with up around it.

#define CONST(c, Z) \
	MOVL         c, AX; \
	VPBROADCASTD AX, Z

// func swigluAVX512(dst, gate, up []float32, n int)
TEXT ·swigluAVX512(SB), NOSPLIT, $0-80
	MOVQ dst_base+0(FP), DI
	MOVQ gate_base+24(FP), SI
	MOVQ up_base+48(FP), DX
	MOVQ n+72(FP), CX
	SHRQ $4, CX
	CONST($0x4b400000, Z16) // expShift 0x1.8p23
	CONST($0x3fb8aa3b, Z17) // expLog2e
	CONST($0x3f317200, Z18) // expLn2Hi
	CONST($0x35bfbe8e, Z19) // expLn2Lo
	CONST($0x3f7ffff6, Z20) // expC1
	CONST($0x3efffedb, Z21) // expC2
	CONST($0x3e2aaf33, Z22) // expC3
	CONST($0x3d2b9f17, Z23) // expC4
	CONST($0x3c072010, Z24) // expC5
	CONST($0x3f800000, Z25) // 1
	CONST($0x43400000, Z26) // 192
	CONST($0x7f800000, Z27) // +Inf
	CONST($0x7fffffff, Z28) // |x| mask
	VPXORD Z29, Z29, Z29    // 0

loop:
	VMOVUPS      (SI), Z0
	VSUBPS       Z0, Z29, Z1     // x = 0 - g
	VMOVAPS      Z16, Z2
	VFMADD231PS  Z17, Z1, Z2     // z = x·log2e + shift
	VSUBPS       Z16, Z2, Z3     // n = z - shift
	VMOVAPS      Z1, Z4
	VFNMADD231PS Z18, Z3, Z4     // b = x - n·ln2hi
	VFNMADD231PS Z19, Z3, Z4     // b = b - n·ln2lo
	VMULPS       Z4, Z4, Z5      // u = b·b
	VMOVAPS      Z23, Z6
	VFMADD231PS  Z24, Z4, Z6     // c5·b + c4
	VMOVAPS      Z21, Z7
	VFMADD231PS  Z22, Z4, Z7     // c3·b + c2
	VFMADD213PS  Z7, Z5, Z6      // (c5·b + c4)·u + (c3·b + c2)
	VMOVAPS      Z25, Z8
	VFMADD231PS  Z20, Z4, Z8     // c1·b + 1
	VFMADD213PS  Z8, Z5, Z6      // p
	VSCALEFPS    Z3, Z6, Z6      // p·2^n, one rounding
	VPANDD       Z28, Z3, Z9
	VCMPPS       $0x1e, Z26, Z9, K1 // |n| > 192
	VCMPPS       $0x12, Z29, Z3, K2 // n <= 0
	VMOVAPS      Z27, K1, Z6
	KANDW        K1, K2, K3
	VMOVAPS      Z29, K3, Z6
	VADDPS       Z25, Z6, Z6     // 1 + e
	VDIVPS       Z6, Z0, Z0      // g / (1 + e)
	VMULPS       (DX), Z0, Z0
	VMOVUPS      Z0, (DI)
	ADDQ         $64, SI
	ADDQ         $64, DX
	ADDQ         $64, DI
	DECQ         CX
	JNZ          loop
	VZEROUPPER
	RET
