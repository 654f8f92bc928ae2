//go:build !purego

#include "textflag.h"
#include "simd_amd64.h"

// func dotQ8_0AVX2(x, y []byte, nb int) float32
//
// Q8_0 weights x with Q8_0 activations y, nb blocks of 34 bytes each; two
// blocks per turn into one accumulator, block after block, as ggml's x86
// product does (the order decides last bits that 8-bit activations turn
// into different tokens).
TEXT ·dotQ8_0AVX2(SB), NOSPLIT, $0-60
	MOVQ   x_base+0(FP), SI
	MOVQ   y_base+24(FP), DI
	MOVQ   nb+48(FP), CX
	VXORPS Y0, Y0, Y0
	ONES16

pair:
	CMPQ        CX, $2
	JL          tail
	VMOVDQU     2(SI), Y2
	I8DOT(2(DI), Y2, Y3)
	F16PROD((SI), (DI), X4, Y4, X5, Y5)
	VFMADD231PS Y2, Y4, Y0
	VMOVDQU     36(SI), Y6
	I8DOT(36(DI), Y6, Y7)
	F16PROD(34(SI), 34(DI), X9, Y9, X10, Y10)
	VFMADD231PS Y6, Y9, Y0
	ADDQ        $68, SI
	ADDQ        $68, DI
	SUBQ        $2, CX
	JMP         pair

tail:
	TESTQ       CX, CX
	JZ          done
	VMOVDQU     2(SI), Y2
	I8DOT(2(DI), Y2, Y3)
	F16PROD((SI), (DI), X4, Y4, X5, Y5)
	VFMADD231PS Y2, Y4, Y0

done:
	HSUM8
	VZEROUPPER
	MOVSS  X0, ret+56(FP)
	RET

// func dotQ8_0x4AVX2(x []byte, ys *[4]*byte, nb int, acc *[4][8]float32)
//
// dotQ8_0AVX2 for four activation rows (see ROWS4 in simd_amd64.h); each
// row's eight lanes go to acc for the caller's HSUM8.
TEXT ·dotQ8_0x4AVX2(SB), NOSPLIT, $0-48
	MOVQ   x_base+0(FP), SI
	MOVQ   nb+32(FP), CX
	ROWS4
	ONES16
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11

block4:
	VMOVDQU 2(SI), Y1
	Q80ROWS4(Y8, Y9, Y10, Y11)
	ADDQ    $34, SI
	NEXT4($34)
	DECQ    CX
	JNZ     block4

	STORE4(Y8, Y9, Y10, Y11)
	VZEROUPPER
	RET

// func dotQ8_0x5AVX2(x []byte, ys *[5]*byte, nb int, acc *[5][8]float32)
//
// dotQ8_0x4AVX2 with a fifth row: a verification batch of a draft of four.
TEXT ·dotQ8_0x5AVX2(SB), NOSPLIT, $0-48
	MOVQ   x_base+0(FP), SI
	MOVQ   nb+32(FP), CX
	ROWS5
	ONES16
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12

block5:
	VMOVDQU 2(SI), Y1
	Q80ROWS4(Y8, Y9, Y10, Y11)
	Q80ROW(R10, Y12)
	ADDQ    $34, SI
	NEXT4($34)
	ADDQ    $34, R10
	DECQ    CX
	JNZ     block5

	STORE5(Y8, Y9, Y10, Y11, Y12)
	VZEROUPPER
	RET
