//go:build !purego

#include "textflag.h"
#include "simd_amd64.h"

// Products of float weight rows (F32, F16, BF16) with float32 activations,
// n a multiple of 8. Four 8-lane accumulators hide the FMA latency; each
// loop turn takes 32 elements, then 8 at a time.

// ADD4 folds the accumulators Y5..Y7 into Y0.
#define ADD4 \
	VADDPS Y5, Y0, Y0; \
	VADDPS Y7, Y6, Y6; \
	VADDPS Y6, Y0, Y0

// func dotF32AVX2(x []byte, y []float32, n int) float32
TEXT ·dotF32AVX2(SB), NOSPLIT, $0-60
	MOVQ   x_base+0(FP), SI
	MOVQ   y_base+24(FP), DI
	MOVQ   n+48(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

f32loop32:
	CMPQ        CX, $32
	JL          f32loop8
	VMOVUPS     (SI), Y1
	VMOVUPS     32(SI), Y2
	VMOVUPS     64(SI), Y3
	VMOVUPS     96(SI), Y4
	VFMADD231PS (DI), Y1, Y0
	VFMADD231PS 32(DI), Y2, Y5
	VFMADD231PS 64(DI), Y3, Y6
	VFMADD231PS 96(DI), Y4, Y7
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JMP         f32loop32

f32loop8:
	TESTQ       CX, CX
	JZ          f32done
	VMOVUPS     (SI), Y1
	VFMADD231PS (DI), Y1, Y0
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         f32loop8

f32done:
	ADD4
	HSUM8
	VZEROUPPER
	MOVSS X0, ret+56(FP)
	RET

// func dotF16AVX2(x []byte, y []float32, n int) float32
TEXT ·dotF16AVX2(SB), NOSPLIT, $0-60
	MOVQ   x_base+0(FP), SI
	MOVQ   y_base+24(FP), DI
	MOVQ   n+48(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

f16loop32:
	CMPQ        CX, $32
	JL          f16loop8
	VCVTPH2PS   (SI), Y1
	VCVTPH2PS   16(SI), Y2
	VCVTPH2PS   32(SI), Y3
	VCVTPH2PS   48(SI), Y4
	VFMADD231PS (DI), Y1, Y0
	VFMADD231PS 32(DI), Y2, Y5
	VFMADD231PS 64(DI), Y3, Y6
	VFMADD231PS 96(DI), Y4, Y7
	ADDQ        $64, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JMP         f16loop32

f16loop8:
	TESTQ       CX, CX
	JZ          f16done
	VCVTPH2PS   (SI), Y1
	VFMADD231PS (DI), Y1, Y0
	ADDQ        $16, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         f16loop8

f16done:
	ADD4
	HSUM8
	VZEROUPPER
	MOVSS X0, ret+56(FP)
	RET

// func dotBF16AVX2(x []byte, y []float32, n int) float32
TEXT ·dotBF16AVX2(SB), NOSPLIT, $0-60
	MOVQ   x_base+0(FP), SI
	MOVQ   y_base+24(FP), DI
	MOVQ   n+48(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

bf16loop32:
	CMPQ        CX, $32
	JL          bf16loop8
	VPMOVZXWD   (SI), Y1
	VPMOVZXWD   16(SI), Y2
	VPMOVZXWD   32(SI), Y3
	VPMOVZXWD   48(SI), Y4
	VPSLLD      $16, Y1, Y1
	VPSLLD      $16, Y2, Y2
	VPSLLD      $16, Y3, Y3
	VPSLLD      $16, Y4, Y4
	VFMADD231PS (DI), Y1, Y0
	VFMADD231PS 32(DI), Y2, Y5
	VFMADD231PS 64(DI), Y3, Y6
	VFMADD231PS 96(DI), Y4, Y7
	ADDQ        $64, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JMP         bf16loop32

bf16loop8:
	TESTQ       CX, CX
	JZ          bf16done
	VPMOVZXWD   (SI), Y1
	VPSLLD      $16, Y1, Y1
	VFMADD231PS (DI), Y1, Y0
	ADDQ        $16, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         bf16loop8

bf16done:
	ADD4
	HSUM8
	VZEROUPPER
	MOVSS X0, ret+56(FP)
	RET

// func dotF16x2AVX2(x []byte, y0, y1 []float32, n int, acc *[2][4][8]float32)
//
// dotF16AVX2 for two activation rows: each converted weight vector meets
// both rows, which keep four accumulators each (Y0, Y5-Y7 and Y8-Y11),
// stored to acc for the caller to fold as ADD4 and HSUM8 do.
TEXT ·dotF16x2AVX2(SB), NOSPLIT, $0-88
	MOVQ   x_base+0(FP), SI
	MOVQ   y0_base+24(FP), DI
	MOVQ   y1_base+48(FP), BX
	MOVQ   n+72(FP), CX
	MOVQ   acc+80(FP), DX
	VXORPS Y0, Y0, Y0
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11

x2loop32:
	CMPQ        CX, $32
	JL          x2loop8
	VCVTPH2PS   (SI), Y1
	VCVTPH2PS   16(SI), Y2
	VCVTPH2PS   32(SI), Y3
	VCVTPH2PS   48(SI), Y4
	VFMADD231PS (DI), Y1, Y0
	VFMADD231PS 32(DI), Y2, Y5
	VFMADD231PS 64(DI), Y3, Y6
	VFMADD231PS 96(DI), Y4, Y7
	VFMADD231PS (BX), Y1, Y8
	VFMADD231PS 32(BX), Y2, Y9
	VFMADD231PS 64(BX), Y3, Y10
	VFMADD231PS 96(BX), Y4, Y11
	ADDQ        $64, SI
	ADDQ        $128, DI
	ADDQ        $128, BX
	SUBQ        $32, CX
	JMP         x2loop32

x2loop8:
	TESTQ       CX, CX
	JZ          x2done
	VCVTPH2PS   (SI), Y1
	VFMADD231PS (DI), Y1, Y0
	VFMADD231PS (BX), Y1, Y8
	ADDQ        $16, SI
	ADDQ        $32, DI
	ADDQ        $32, BX
	SUBQ        $8, CX
	JMP         x2loop8

x2done:
	VMOVUPS Y0, (DX)
	VMOVUPS Y5, 32(DX)
	VMOVUPS Y6, 64(DX)
	VMOVUPS Y7, 96(DX)
	VMOVUPS Y8, 128(DX)
	VMOVUPS Y9, 160(DX)
	VMOVUPS Y10, 192(DX)
	VMOVUPS Y11, 224(DX)
	VZEROUPPER
	RET

// func quantizeF16AVX2(src []float32, dst []byte, n int) (nan bool)
//
// n float32 (a multiple of 8) to binary16, rounded to nearest even as
// floatToHalf does; nan reports a NaN among them, whose payload F16C keeps
// and floatToHalf does not (the caller converts such a row again in Go).
TEXT ·quantizeF16AVX2(SB), NOSPLIT, $0-57
	MOVQ   src_base+0(FP), SI
	MOVQ   dst_base+24(FP), DI
	MOVQ   n+48(FP), CX
	SHRQ   $3, CX
	VPXOR  Y2, Y2, Y2

qf16loop:
	VMOVUPS   (SI), Y0
	VCMPPS    $3, Y0, Y0, Y1 // unordered: NaN
	VPOR      Y1, Y2, Y2
	VCVTPS2PH $0, Y0, (DI)
	ADDQ      $32, SI
	ADDQ      $16, DI
	DECQ      CX
	JNZ       qf16loop
	VPTEST    Y2, Y2
	SETNE     ret+56(FP)
	VZEROUPPER
	RET

// func dequantF16AVX2(src []byte, dst []float32, n int) (nan bool)
//
// n binary16 (a multiple of 8) to float32, exactly; nan reports a NaN
// among them (F16C quiets a signalling NaN, halfToFloat keeps its bits).
TEXT ·dequantF16AVX2(SB), NOSPLIT, $0-57
	MOVQ         src_base+0(FP), SI
	MOVQ         dst_base+24(FP), DI
	MOVQ         n+48(FP), CX
	SHRQ         $3, CX
	VPXOR        X2, X2, X2
	MOVL         $0x7fff7fff, AX
	VMOVD        AX, X3
	VPBROADCASTD X3, X3
	MOVL         $0x7c007c00, AX
	VMOVD        AX, X4
	VPBROADCASTD X4, X4

df16loop:
	VMOVDQU   (SI), X0
	VPAND     X3, X0, X1
	VPCMPGTW  X4, X1, X1 // |h| > infinity: NaN
	VPOR      X1, X2, X2
	VCVTPH2PS X0, Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       df16loop
	VPTEST    X2, X2
	SETNE     ret+56(FP)
	VZEROUPPER
	RET
