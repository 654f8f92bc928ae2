//go:build !purego

#include "textflag.h"
#include "mul_amd64.h"

// func rowsF16x4(x *byte, stride int, y *float32, n int, out *float32)
//
// Four F16 weight rows (stride bytes apart) times the float32 row y, n a
// multiple of 32, each as dotF16Fast: 32 elements a step into four 8-lane
// accumulators, (acc0+acc1)+(acc2+acc3), HSUM8, plus the empty tail's 0.
TEXT ·rowsF16x4(SB), NOSPLIT, $0-40
	MOVQ   x+0(FP), SI
	MOVQ   stride+8(FP), R8
	MOVQ   y+16(FP), DI
	MOVQ   n+24(FP), CX
	MOVQ   out+32(FP), R10
	LEAQ   (SI)(R8*1), R12
	LEAQ   (SI)(R8*2), R11
	LEAQ   (R12)(R8*2), R13
	SHRQ   $5, CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7

f16rows:
	// The next four rows, a cache line each per step: four rows read
	// side by side are four short streams the hardware prefetcher
	// barely learns before they end.
	PREFETCHT0  (SI)(R8*4)
	PREFETCHT0  (R12)(R8*4)
	PREFETCHT0  (R11)(R8*4)
	PREFETCHT0  (R13)(R8*4)
	VMOVUPS     (DI), Z16
	VMOVUPS     64(DI), Z17
	VCVTPH2PS   (SI), Z8
	VCVTPH2PS   32(SI), Z9
	VCVTPH2PS   (R12), Z10
	VCVTPH2PS   32(R12), Z11
	VCVTPH2PS   (R11), Z12
	VCVTPH2PS   32(R11), Z13
	VCVTPH2PS   (R13), Z14
	VCVTPH2PS   32(R13), Z15
	VFMADD231PS Z16, Z8, Z0
	VFMADD231PS Z17, Z9, Z1
	VFMADD231PS Z16, Z10, Z2
	VFMADD231PS Z17, Z11, Z3
	VFMADD231PS Z16, Z12, Z4
	VFMADD231PS Z17, Z13, Z5
	VFMADD231PS Z16, Z14, Z6
	VFMADD231PS Z17, Z15, Z7
	ADDQ        $64, SI
	ADDQ        $64, R12
	ADDQ        $64, R11
	ADDQ        $64, R13
	ADDQ        $128, DI
	DECQ        CX
	JNZ         f16rows

	PAIRSUM(Z0, Z1, Z8, Z9) // [acc0+acc1 acc2+acc3] of row 0
	PAIRSUM(Z2, Z3, Z8, Z9)
	PAIRSUM(Z4, Z5, Z8, Z9)
	PAIRSUM(Z6, Z7, Z8, Z9)
	PAIRSUM(Z0, Z2, Z8, Z9) // [row 0 | row 1], each ADD4's eight lanes
	PAIRSUM(Z4, Z6, Z8, Z9)
	REDUCE4(Z0, Z4, Z8, Z9) // lanes 0, 4, 8, 12: rows 0-3
	VPXORD      Z8, Z8, Z8
	VADDPS      Z8, Z0, Z0
	MOVL        $0x1111, AX
	KMOVW       AX, K1
	VCOMPRESSPS Z0, K1, (R10)
	VZEROUPPER
	RET
