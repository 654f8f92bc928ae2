//go:build !purego

#include "textflag.h"
#include "simd_amd64.h"

// Q5KSTEP is Q4KSTEP (see q4_k_amd64.s) with the fifth bits: bits 0 and 1
// of each byte of Y8 belong to the low- and high-nibble sub-blocks of this
// step; Y8 moves down two bits per step (a word shift lets bits of the next
// byte into bits 6-7, never read). Needs Y9 = 0x10 bytes.
#define Q5KSTEP(qs, q8lo, q8hi, sclo, schi) \
	VMOVDQU    qs, Y4; \
	VPSRLW     $4, Y4, Y5; \
	VPAND      Y15, Y4, Y4; \
	VPAND      Y15, Y5, Y5; \
	VPSLLW     $4, Y8, Y6; \
	VPSLLW     $3, Y8, Y7; \
	VPAND      Y9, Y6, Y6; \
	VPAND      Y9, Y7, Y7; \
	VPOR       Y6, Y4, Y4; \
	VPOR       Y7, Y5, Y5; \
	VPSRLW     $2, Y8, Y8; \
	VPMADDUBSW q8lo, Y4, Y4; \
	VPMADDUBSW q8hi, Y5, Y5; \
	VPSHUFB    sclo, Y2, Y6; \
	VPSHUFB    schi, Y2, Y7; \
	VPMADDWD   Y6, Y4, Y4; \
	VPMADDWD   Y7, Y5, Y5; \
	VPADDD     Y4, Y3, Y3; \
	VPADDD     Y5, Y3, Y3

// func dotQ5_KAVX2(x, y []byte, nb int) float32
//
// Q5_K weights x (176-byte blocks) with Q8_K activations y (292-byte
// blocks), as dotQ4_KAVX2 with the fifth bits from qh.
TEXT ·dotQ5_KAVX2(SB), NOSPLIT, $0-60
	MOVQ   x_base+0(FP), SI
	MOVQ   y_base+24(FP), DI
	MOVQ   nb+48(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS X1, X1, X1
	BYTES8($0x0F0F0F0F, X15, Y15)
	BYTES8($0x10101010, X9, Y9)
	LEAQ   ·q4kWord(SB), R8

block:
	Q4KSCALES
	KMINS
	VMOVDQU 16(SI), Y8
	VPERMQ  $0x44, Y2, Y2
	VPXOR   Y3, Y3, Y3
	Q5KSTEP(48(SI), 4(DI), 36(DI), (R8), 32(R8))
	Q5KSTEP(80(SI), 68(DI), 100(DI), 64(R8), 96(R8))
	Q5KSTEP(112(SI), 132(DI), 164(DI), 128(R8), 160(R8))
	Q5KSTEP(144(SI), 196(DI), 228(DI), 192(R8), 224(R8))
	Q4KSUM

	ADDQ $176, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  block
	KRESULT
