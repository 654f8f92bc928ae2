//go:build !purego

#include "textflag.h"

// func accumulateHalfAVX2(acc []float32, v []byte, vs float32, n int)
//
// accumulateHalfGo eight elements at a time, n a multiple of 8: each
// v·vs + acc one fused multiply-add rounded to float32 (fma32), then to
// binary16 (VCVTPS2PH, nearest even) and back.
TEXT ·accumulateHalfAVX2(SB), NOSPLIT, $0-64
	MOVQ         acc_base+0(FP), DI
	MOVQ         v_base+24(FP), SI
	VBROADCASTSS vs+48(FP), Y0
	MOVQ         n+56(FP), CX

acc8:
	VCVTPH2PS   (SI), Y1
	VFMADD213PS (DI), Y0, Y1
	VCVTPS2PH   $0, Y1, X1
	VCVTPH2PS   X1, Y1
	VMOVUPS     Y1, (DI)
	ADDQ        $16, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JNZ         acc8
	VZEROUPPER
	RET

// func scaleHalfAVX2(acc []float32, ms float32, n int)
//
// scaleHalfGo eight elements at a time, n a multiple of 8: acc·ms in
// float32, rounded to binary16 and back.
TEXT ·scaleHalfAVX2(SB), NOSPLIT, $0-40
	MOVQ         acc_base+0(FP), DI
	VBROADCASTSS ms+24(FP), Y0
	MOVQ         n+32(FP), CX

scale8:
	VMULPS    (DI), Y0, Y1
	VCVTPS2PH $0, Y1, X1
	VCVTPH2PS X1, Y1
	VMOVUPS   Y1, (DI)
	ADDQ      $32, DI
	SUBQ      $8, CX
	JNZ       scale8
	VZEROUPPER
	RET
