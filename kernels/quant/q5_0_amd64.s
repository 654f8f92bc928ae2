//go:build !purego

#include "textflag.h"
#include "simd_amd64.h"

// func dotQ5_0AVX2(x, y []byte, nb int) float32
//
// Q5_0 weights x (22-byte blocks) with Q8_0 activations y (34-byte blocks),
// one accumulator block after block as ggml's x86 product.
TEXT ·dotQ5_0AVX2(SB), NOSPLIT, $0-60
	MOVQ         x_base+0(FP), SI
	MOVQ         y_base+24(FP), DI
	MOVQ         nb+48(FP), CX
	VXORPS       Y0, Y0, Y0
	ONES16
	BYTES8($0x0F0F0F0F, X14, Y14)
	BYTES8($0xF0F0F0F0, X10, Y10)
	QHSETUP

pair:
	CMPQ        CX, $2
	JL          tail
	Q5W(6(SI), 2(SI), Y2, X2, Y3, X3)
	I8DOT(2(DI), Y2, Y3)
	F16PROD((SI), (DI), X4, Y4, X5, Y5)
	VFMADD231PS Y2, Y4, Y0
	Q5W(28(SI), 24(SI), Y6, X6, Y7, X7)
	I8DOT(36(DI), Y6, Y7)
	F16PROD(22(SI), 34(DI), X4, Y4, X5, Y5)
	VFMADD231PS Y6, Y4, Y0
	ADDQ        $44, SI
	ADDQ        $68, DI
	SUBQ        $2, CX
	JMP         pair

tail:
	TESTQ       CX, CX
	JZ          done
	Q5W(6(SI), 2(SI), Y2, X2, Y3, X3)
	I8DOT(2(DI), Y2, Y3)
	F16PROD((SI), (DI), X4, Y4, X5, Y5)
	VFMADD231PS Y2, Y4, Y0

done:
	HSUM8
	VZEROUPPER
	MOVSS  X0, ret+56(FP)
	RET

// func dotQ5_0x4AVX2(x []byte, ys *[4]*byte, nb int, acc *[4][8]float32)
//
// dotQ5_0AVX2 for four activation rows (see ROWS4 in simd_amd64.h); each
// row's eight lanes go to acc for the caller's HSUM8.
TEXT ·dotQ5_0x4AVX2(SB), NOSPLIT, $0-48
	MOVQ   x_base+0(FP), SI
	MOVQ   nb+32(FP), CX
	ONES16
	BYTES8($0x0F0F0F0F, X14, Y14)
	BYTES8($0xF0F0F0F0, X10, Y10)
	QHSETUP
	ROWS4 // after the constants, which go through AX
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9

block4:
	Q5W(6(SI), 2(SI), Y1, X1, Y4, X4)
	Q80ROWS4(Y6, Y7, Y8, Y9)
	ADDQ $22, SI
	NEXT4($34)
	DECQ CX
	JNZ  block4

	STORE4(Y6, Y7, Y8, Y9)
	VZEROUPPER
	RET

// func dotQ5_0x5AVX2(x []byte, ys *[5]*byte, nb int, acc *[5][8]float32)
//
// dotQ5_0x4AVX2 with a fifth row: a verification batch of a draft of four.
TEXT ·dotQ5_0x5AVX2(SB), NOSPLIT, $0-48
	MOVQ   x_base+0(FP), SI
	MOVQ   nb+32(FP), CX
	ONES16
	BYTES8($0x0F0F0F0F, X14, Y14)
	BYTES8($0xF0F0F0F0, X10, Y10)
	QHSETUP
	ROWS5 // after the constants, which go through AX
	VXORPS Y0, Y0, Y0
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9

block5:
	Q5W(6(SI), 2(SI), Y1, X1, Y4, X4)
	Q80ROWS4(Y6, Y7, Y8, Y9)
	Q80ROW(R10, Y0)
	ADDQ $22, SI
	NEXT4($34)
	ADDQ $34, R10
	DECQ CX
	JNZ  block5

	STORE5(Y6, Y7, Y8, Y9, Y0)
	VZEROUPPER
	RET
