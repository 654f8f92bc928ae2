//go:build !purego

#include "textflag.h"
#include "simd_amd64.h"

// Activation quantizers, the same arithmetic as quantizeQ8_0 and
// quantizeQ8_K in Go (VCVTPS2DQ rounds to nearest even, as roundInt does),
// so both produce identical bytes.

// PACK32 rounds the 32 floats in Y0-Y3 to int32 (nearest even), saturates
// them to int8 in order and stores the 32 bytes at mem (Y13 = packOrder).
#define PACK32(mem) \
	VCVTPS2DQ Y0, Y0; \
	VCVTPS2DQ Y1, Y1; \
	VCVTPS2DQ Y2, Y2; \
	VCVTPS2DQ Y3, Y3; \
	VPACKSSDW Y1, Y0, Y4; \
	VPACKSSDW Y3, Y2, Y5; \
	VPACKSSWB Y5, Y4, Y4; \
	VPERMD    Y4, Y13, Y4; \
	VMOVDQU   Y4, mem

// ABSMAX4 folds |Y0|..|Y3| into Y4 with max (Y15 = 0x7fffffff lanes).
#define ABSMAX4 \
	VANDPS Y15, Y0, Y0; \
	VANDPS Y15, Y1, Y1; \
	VANDPS Y15, Y2, Y2; \
	VANDPS Y15, Y3, Y3; \
	VMAXPS Y0, Y4, Y4; \
	VMAXPS Y1, Y4, Y4; \
	VMAXPS Y2, Y4, Y4; \
	VMAXPS Y3, Y4, Y4

// HMAX leaves the largest of Y4's lanes in every lane of X4 (X5 scratch).
#define HMAX \
	VEXTRACTF128 $1, Y4, X5; \
	VMAXPS       X5, X4, X4; \
	VPERMILPS    $0x4e, X4, X5; \
	VMAXPS       X5, X4, X4; \
	VPERMILPS    $0xb1, X4, X5; \
	VMAXPS       X5, X4, X4

#define QSETUP \
	MOVL         $0x7fffffff, AX; \
	VMOVD        AX, X15; \
	VPBROADCASTD X15, Y15; \
	VMOVDQU      ·packOrder(SB), Y13

// func quantizeQ8_0AVX2(x []float32, y []byte, nb int)
TEXT ·quantizeQ8_0AVX2(SB), NOSPLIT, $0-56
	MOVQ x_base+0(FP), SI
	MOVQ y_base+24(FP), DI
	MOVQ nb+48(FP), CX
	QSETUP
	MOVL  $0x42fe0000, AX              // 127.0
	VMOVD AX, X14

block:
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VXORPS  Y4, Y4, Y4
	ABSMAX4
	HMAX

	// d = amax/127 as f16; id = 127/amax, or 0 for an all-zero block.
	VDIVSS    X14, X4, X5
	VCVTPS2PH $0, X5, X5
	VMOVD     X5, AX
	MOVW      AX, (DI)
	VDIVSS    X4, X14, X6
	VXORPS    X7, X7, X7
	VCMPSS    $4, X7, X4, X7             // amax != 0
	VANDPS    X7, X6, X6
	VBROADCASTSS X6, Y6

	VMULPS (SI), Y6, Y0
	VMULPS 32(SI), Y6, Y1
	VMULPS 64(SI), Y6, Y2
	VMULPS 96(SI), Y6, Y3
	PACK32(2(DI))

	ADDQ $128, SI
	ADDQ $34, DI
	DECQ CX
	JNZ  block
	VZEROUPPER
	RET

// BSUM2 stores at mem the two int16 sums of the 16 int32 quants in Y0, Y1
// and of the 16 in Y2, Y3 (Y7, Y8 scratch).
#define BSUM2(mem) \
	VPADDD       Y1, Y0, Y7; \
	VPADDD       Y3, Y2, Y8; \
	VPHADDD      Y8, Y7, Y7; \
	VPHADDD      Y7, Y7, Y7; \
	VEXTRACTI128 $1, Y7, X8; \
	VPADDD       X8, X7, X7; \
	VPACKSSDW    X7, X7, X7; \
	VMOVD        X7, mem

// QK32 quantizes the 32 floats at xoff(SI) with the scale in Y6 into the
// quants at qoff(DI) and their two bsums at boff(DI).
#define QK32(xoff, qoff, boff) \
	VMULPS    xoff(SI), Y6, Y0; \
	VMULPS    xoff+32(SI), Y6, Y1; \
	VMULPS    xoff+64(SI), Y6, Y2; \
	VMULPS    xoff+96(SI), Y6, Y3; \
	VCVTPS2DQ Y0, Y0; \
	VCVTPS2DQ Y1, Y1; \
	VCVTPS2DQ Y2, Y2; \
	VCVTPS2DQ Y3, Y3; \
	BSUM2(boff(DI)); \
	VPACKSSDW Y1, Y0, Y4; \
	VPACKSSDW Y3, Y2, Y5; \
	VPACKSSWB Y5, Y4, Y4; \
	VPERMD    Y4, Y13, Y4; \
	VMOVDQU   Y4, qoff(DI)

// func quantizeQ8_KAVX2(x []float32, y []byte, nb int)
TEXT ·quantizeQ8_KAVX2(SB), NOSPLIT, $0-56
	MOVQ x_base+0(FP), SI
	MOVQ y_base+24(FP), DI
	MOVQ nb+48(FP), CX
	QSETUP
	MOVL  $0xc2fe0000, AX              // -127.0
	VMOVD AX, X14
	MOVL  $0x3f800000, AX              // 1.0
	VMOVD AX, X12

block:
	// amax over the 256 floats.
	VXORPS Y4, Y4, Y4
	XORQ   R8, R8

amax:
	VMOVUPS (SI)(R8*1), Y0
	VMOVUPS 32(SI)(R8*1), Y1
	VMOVUPS 64(SI)(R8*1), Y2
	VMOVUPS 96(SI)(R8*1), Y3
	ABSMAX4
	ADDQ    $128, R8
	CMPQ    R8, $1024
	JL      amax
	HMAX
	VXORPS  X5, X5, X5
	VUCOMISS X5, X4
	JEQ     zero

	// The first element of that magnitude gives the sign (as ggml).
	VBROADCASTSS X4, Y4
	XORQ         R8, R8

find:
	VANDPS    (SI)(R8*4), Y15, Y0
	VCMPPS    $0, Y4, Y0, Y0
	VMOVMSKPS Y0, AX
	TESTL     AX, AX
	JNZ       found
	ADDQ      $8, R8
	JMP       find

found:
	BSFL   AX, AX
	ADDQ   R8, AX
	VMOVSS (SI)(AX*4), X0
	VDIVSS X0, X14, X6                  // iscale = -127/max
	VDIVSS X6, X12, X7                  // d = 1/iscale
	VMOVSS X7, (DI)
	VBROADCASTSS X6, Y6
	QK32(0, 4, 260)
	QK32(128, 36, 264)
	QK32(256, 68, 268)
	QK32(384, 100, 272)
	QK32(512, 132, 276)
	QK32(640, 164, 280)
	QK32(768, 196, 284)
	QK32(896, 228, 288)

next:
	ADDQ $1024, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  block
	VZEROUPPER
	RET

zero:
	// An all-zero block is all zeros, d and bsums included.
	VPXOR   Y0, Y0, Y0
	VMOVDQU Y0, (DI)
	VMOVDQU Y0, 32(DI)
	VMOVDQU Y0, 64(DI)
	VMOVDQU Y0, 96(DI)
	VMOVDQU Y0, 128(DI)
	VMOVDQU Y0, 160(DI)
	VMOVDQU Y0, 192(DI)
	VMOVDQU Y0, 224(DI)
	VMOVDQU Y0, 256(DI)
	VMOVDQU Y0, 260(DI)
	JMP     next
