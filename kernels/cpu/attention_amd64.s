//go:build !purego

#include "textflag.h"

// func dotHalfWideAVX2(k []byte, q []float32, steps int) float32
//
// Σ k·q over steps of 64 binary16 keys and float32 queries, in the order
// of dotHalfWideGo: accumulator j, lanes 0-7 in Y(2j) and 8-15 in Y(2j+1).
TEXT ·dotHalfWideAVX2(SB), NOSPLIT, $0-60
	MOVQ   k_base+0(FP), SI
	MOVQ   q_base+24(FP), DI
	MOVQ   steps+48(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

step:
	VCVTPH2PS   (SI), Y8
	VCVTPH2PS   16(SI), Y9
	VCVTPH2PS   32(SI), Y10
	VCVTPH2PS   48(SI), Y11
	VFMADD231PS (DI), Y8, Y0
	VFMADD231PS 32(DI), Y9, Y1
	VFMADD231PS 64(DI), Y10, Y2
	VFMADD231PS 96(DI), Y11, Y3
	VCVTPH2PS   64(SI), Y8
	VCVTPH2PS   80(SI), Y9
	VCVTPH2PS   96(SI), Y10
	VCVTPH2PS   112(SI), Y11
	VFMADD231PS 128(DI), Y8, Y4
	VFMADD231PS 160(DI), Y9, Y5
	VFMADD231PS 192(DI), Y10, Y6
	VFMADD231PS 224(DI), Y11, Y7
	ADDQ        $128, SI
	ADDQ        $256, DI
	DECQ        CX
	JNZ         step

	// Accumulators 0+2 and 1+3, then 0+1; lanes i+8 onto i.
	VADDPS Y4, Y0, Y0
	VADDPS Y5, Y1, Y1
	VADDPS Y6, Y2, Y2
	VADDPS Y7, Y3, Y3
	VADDPS Y2, Y0, Y0
	VADDPS Y3, Y1, Y1
	VADDPS Y1, Y0, Y0

	// Halves down to one lane: 4+4, then 2+2, then 1+1.
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VPERMILPS    $0x4e, X0, X1
	VADDPS       X1, X0, X0
	VPERMILPS    $0xb1, X0, X1
	VADDSS       X1, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+56(FP)
	RET
