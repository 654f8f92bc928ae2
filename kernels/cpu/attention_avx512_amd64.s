//go:build !purego

#include "textflag.h"

// The attention's three phases (attention.flash) in AVX-512.

// DOT64 is W = the 16 partial sums of dotHalfWideGo for the F16 key head at
// P against the query in Z16-Z19: accumulator j (fused with zero, Z30) in
// Z0-Z3, then (0+2) + (1+3).
#define DOT64(P, W) \
	VCVTPH2PS   (P), Z0; \
	VCVTPH2PS   32(P), Z1; \
	VCVTPH2PS   64(P), Z2; \
	VCVTPH2PS   96(P), Z3; \
	VFMADD213PS Z30, Z16, Z0; \
	VFMADD213PS Z30, Z17, Z1; \
	VFMADD213PS Z30, Z18, Z2; \
	VFMADD213PS Z30, Z19, Z3; \
	VADDPS      Z2, Z0, Z0; \
	VADDPS      Z3, Z1, Z1; \
	VADDPS      Z1, Z0, W

// DOT128 is DOT64 for 128-element heads, the query in Z16-Z23: the second
// step of 64 fused into the same four accumulators.
#define DOT128(P, W) \
	VCVTPH2PS   (P), Z0; \
	VCVTPH2PS   32(P), Z1; \
	VCVTPH2PS   64(P), Z2; \
	VCVTPH2PS   96(P), Z3; \
	VFMADD213PS Z30, Z16, Z0; \
	VFMADD213PS Z30, Z17, Z1; \
	VFMADD213PS Z30, Z18, Z2; \
	VFMADD213PS Z30, Z19, Z3; \
	VCVTPH2PS   128(P), Z24; \
	VCVTPH2PS   160(P), Z25; \
	VCVTPH2PS   192(P), Z26; \
	VCVTPH2PS   224(P), Z27; \
	VFMADD231PS Z24, Z20, Z0; \
	VFMADD231PS Z25, Z21, Z1; \
	VFMADD231PS Z26, Z22, Z2; \
	VFMADD231PS Z27, Z23, Z3; \
	VADDPS      Z2, Z0, Z0; \
	VADDPS      Z3, Z1, Z1; \
	VADDPS      Z1, Z0, W

// The halving of 16 lanes to one, for 16 keys at once: each level adds the
// same pairs of lanes as dotHalfWideGo's loop (l and l+8, then l and l+4,
// l and l+2, l and l+1), with the lanes of two keys' vectors shuffled so
// one add serves both.
//
// L1: lanes 0-7 of D are A's l+(l+8), lanes 8-15 B's.
#define L1(A, B, D) \
	VSHUFF32X4 $0x44, B, A, Z8; \
	VSHUFF32X4 $0xee, B, A, Z9; \
	VADDPS     Z9, Z8, D

// L2: of C = L1(A, B) and D = L1(C', D'), quarter j of E is key j's four
// sums l+(l+4), keys in the order A, B, C', D'.
#define L2(C, D, E) \
	VSHUFF32X4 $0x88, D, C, Z8; \
	VSHUFF32X4 $0xdd, D, C, Z9; \
	VADDPS     Z9, Z8, E

// L3: quarter j of G holds two sums l+(l+2) of E's key j, then two of F's.
#define L3(E, F, G) \
	VSHUFPS $0x44, F, E, Z8; \
	VSHUFPS $0xee, F, E, Z9; \
	VADDPS  Z9, Z8, G

// L4: quarter j of S is the totals of G's key j, H's key j, then G's and
// H's second keys of that quarter.
#define L4(G, H, S) \
	VSHUFPS $0x88, H, G, Z8; \
	VSHUFPS $0xdd, H, G, Z9; \
	VADDPS  Z9, Z8, S

// KEYS4 is E = the four keys j, j+4, j+8, j+12 of a block (AX = key j,
// R9 four rows, R13 twelve), through L1 and L2.
#define KEYS4(DOT, E) \
	LEAQ (AX)(R9*1), R8; \
	LEAQ (AX)(R9*2), R10; \
	LEAQ (AX)(R13*1), R12; \
	DOT(AX, Z4); \
	DOT(R8, Z5); \
	L1(Z4, Z5, Z6); \
	DOT(R10, Z4); \
	DOT(R12, Z5); \
	L1(Z4, Z5, Z7); \
	L2(Z6, Z7, E)

// BLOCK is the 16 scaled scores of the keys from SI, stored at BX. Quarter
// j of E_k holds key k+4j, so after L3 and L4 lane i holds key i.
#define BLOCK(DOT) \
	MOVQ  SI, AX; \
	KEYS4(DOT, Z10); \
	ADDQ  DX, AX; \
	KEYS4(DOT, Z11); \
	ADDQ  DX, AX; \
	KEYS4(DOT, Z12); \
	ADDQ  DX, AX; \
	KEYS4(DOT, Z13); \
	L3(Z10, Z11, Z14); \
	L3(Z12, Z13, Z15); \
	L4(Z14, Z15, Z6); \
	VMULPS  Z31, Z6, Z6; \
	VMOVUPS Z6, (BX)

// func scoresHalf64AVX512(k []byte, stride int, q []float32, x []float32, scale float32, blocks int)
//
// scoresHalfGo for blocks of 16 keys of 64 elements.
TEXT ·scoresHalf64AVX512(SB), NOSPLIT, $0-96
	MOVQ         k_base+0(FP), SI
	MOVQ         stride+24(FP), DX
	MOVQ         q_base+32(FP), DI
	MOVQ         x_base+56(FP), BX
	VBROADCASTSS scale+80(FP), Z31
	MOVQ         blocks+88(FP), CX
	VMOVUPS      (DI), Z16
	VMOVUPS      64(DI), Z17
	VMOVUPS      128(DI), Z18
	VMOVUPS      192(DI), Z19
	VPXORD       Z30, Z30, Z30
	MOVQ         DX, R9
	SHLQ         $2, R9
	LEAQ         (R9)(R9*2), R13

block64:
	BLOCK(DOT64)
	LEAQ (SI)(R9*4), SI
	ADDQ $64, BX
	DECQ CX
	JNZ  block64
	VZEROUPPER
	RET

// func scoresHalf128AVX512(k []byte, stride int, q []float32, x []float32, scale float32, blocks int)
//
// scoresHalfGo for blocks of 16 keys of 128 elements.
TEXT ·scoresHalf128AVX512(SB), NOSPLIT, $0-96
	MOVQ         k_base+0(FP), SI
	MOVQ         stride+24(FP), DX
	MOVQ         q_base+32(FP), DI
	MOVQ         x_base+56(FP), BX
	VBROADCASTSS scale+80(FP), Z31
	MOVQ         blocks+88(FP), CX
	VMOVUPS      (DI), Z16
	VMOVUPS      64(DI), Z17
	VMOVUPS      128(DI), Z18
	VMOVUPS      192(DI), Z19
	VMOVUPS      256(DI), Z20
	VMOVUPS      320(DI), Z21
	VMOVUPS      384(DI), Z22
	VMOVUPS      448(DI), Z23
	VPXORD       Z30, Z30, Z30
	MOVQ         DX, R9
	SHLQ         $2, R9
	LEAQ         (R9)(R9*2), R13

block128:
	BLOCK(DOT128)
	LEAQ (SI)(R9*4), SI
	ADDQ $64, BX
	DECQ CX
	JNZ  block128
	VZEROUPPER
	RET

// Constants of the exponential: 2^(j/16) for j = 0..15; 16/ln2 and ln2/16
// in two parts, the first with 41 significant bits so n·hi is exact for
// |n| < 2^12; the Taylor coefficients 1/k! for k = 2..7.
DATA expTab<>+0(SB)/8, $0x3ff0000000000000
DATA expTab<>+8(SB)/8, $0x3ff0b5586cf9890f
DATA expTab<>+16(SB)/8, $0x3ff172b83c7d517b
DATA expTab<>+24(SB)/8, $0x3ff2387a6e756238
DATA expTab<>+32(SB)/8, $0x3ff306fe0a31b715
DATA expTab<>+40(SB)/8, $0x3ff3dea64c123422
DATA expTab<>+48(SB)/8, $0x3ff4bfdad5362a27
DATA expTab<>+56(SB)/8, $0x3ff5ab07dd485429
DATA expTab<>+64(SB)/8, $0x3ff6a09e667f3bcc
DATA expTab<>+72(SB)/8, $0x3ff7a11473eb0187
DATA expTab<>+80(SB)/8, $0x3ff8ace5422aa0dc
DATA expTab<>+88(SB)/8, $0x3ff9c49182a3f090
DATA expTab<>+96(SB)/8, $0x3ffae89f995ad3ae
DATA expTab<>+104(SB)/8, $0x3ffc199bdd85529c
DATA expTab<>+112(SB)/8, $0x3ffd5818dcfba487
DATA expTab<>+120(SB)/8, $0x3ffea4afa2a490da
GLOBL expTab<>(SB), RODATA|NOPTR, $128

DATA expConst<>+0(SB)/8, $0x4338000000000000  // 1.5·2^52: adding it rounds to an integer
DATA expConst<>+8(SB)/8, $0x40371547652b82fe  // 16/ln2
DATA expConst<>+16(SB)/8, $0x3fa62e42fefa3000 // ln2/16, high part
DATA expConst<>+24(SB)/8, $0x3d13de6af278ece6 // ln2/16, low part
DATA expConst<>+32(SB)/8, $0x3f2a01a01a01a01a // 1/7!
DATA expConst<>+40(SB)/8, $0x3f56c16c16c16c17 // 1/6!
DATA expConst<>+48(SB)/8, $0x3f81111111111111 // 1/5!
DATA expConst<>+56(SB)/8, $0x3fa5555555555555 // 1/4!
DATA expConst<>+64(SB)/8, $0x3fc5555555555555 // 1/3!
DATA expConst<>+72(SB)/8, $0x3fe0000000000000 // 1/2
DATA expConst<>+80(SB)/8, $0x3ff0000000000000 // 1
DATA expConst<>+88(SB)/8, $0xfff0ffffffffffff // keeps n<<48 but for j's four bits: (n>>4)<<52
DATA expConst<>+96(SB)/8, $0x000000001fffffff // the bits below float32's mantissa
DATA expConst<>+104(SB)/8, $0x0000000010000000 // a float32 midpoint's
DATA expConst<>+112(SB)/8, $0x0000000000000200 // ambiguous within 512 units of the last place
DATA expConst<>+120(SB)/8, $0xc055c00000000000 // -87: results above are normal float32
DATA expConst<>+128(SB)/8, $0xc05a000000000000 // -104: results below round to 0
DATA expConst<>+136(SB)/8, $0xbff0000000000000 // -1: the mark of a lane left to Go
GLOBL expConst<>(SB), RODATA|NOPTR, $144

// EXP8 is Z7 = e^Z6 for eight float64 lanes, within about 2^-50 relative:
// n = round(x·16/ln2), r = x - n·ln2/16 (|r| ≤ ln2/32), e^r by its Taylor
// polynomial to degree 7, times 2^(j/16) (j = n mod 16, from the table in
// Z22:Z23) and 2^(n>>4) added to the exponent. Lanes whose float32
// rounding is in doubt are set to -1 and their bits ORed into R11 (the
// mask's upper byte is KNOTW's, not lanes'): results
// within 512 units of a float32 midpoint (the exponential's error and
// math.Exp's are both far below that), x below -87 (subnormal float32
// results) but not below -104 (zero), and NaN.
#define EXP8 \
	VMOVAPD          Z27, Z12; \
	VFMADD231PD      Z26, Z6, Z12; \
	VSUBPD           Z27, Z12, Z13; \
	VMOVAPD          Z6, Z7; \
	VFNMADD231PD     Z25, Z13, Z7; \
	VFNMADD231PD     Z24, Z13, Z7; \
	VBROADCASTSD     expConst<>+32(SB), Z13; \
	VFMADD213PD.BCST expConst<>+40(SB), Z7, Z13; \
	VFMADD213PD.BCST expConst<>+48(SB), Z7, Z13; \
	VFMADD213PD.BCST expConst<>+56(SB), Z7, Z13; \
	VFMADD213PD.BCST expConst<>+64(SB), Z7, Z13; \
	VFMADD213PD.BCST expConst<>+72(SB), Z7, Z13; \
	VFMADD213PD.BCST expConst<>+80(SB), Z7, Z13; \
	VFMADD213PD.BCST expConst<>+80(SB), Z7, Z13; \
	VMOVDQA64        Z12, Z9; \
	VPERMI2PD        Z22, Z23, Z9; \
	VMULPD           Z9, Z13, Z13; \
	VPSLLQ           $48, Z12, Z12; \
	VPANDQ           Z21, Z12, Z12; \
	VPADDQ           Z12, Z13, Z7; \
	VPANDQ           Z20, Z7, Z12; \
	VPSUBQ           Z19, Z12, Z12; \
	VPABSQ           Z12, Z12; \
	VPCMPUQ          $2, Z18, Z12, K3; \
	VCMPPD           $0x1d, Z17, Z6, K4; \
	VCMPPD           $0x11, Z16, Z6, K5; \
	KANDW            K4, K3, K3; \
	KORW             K4, K5, K6; \
	KNOTW            K6, K6; \
	KORW             K6, K3, K3; \
	VMOVAPD          Z14, K5, Z7; \
	VMOVAPD          Z15, K3, Z7; \
	KMOVW            K3, R10; \
	ANDQ             $0xff, R10; \
	ORQ              R10, R11

// func onlineWeightsAVX512(x, ms, vs, d []float32, blocks int) (flags int)
//
// onlineWeightsGo for blocks of 16 scores, with the exponents also stored
// in d. The running maximum before each position is an exclusive prefix
// maximum, taken 16 lanes at a time in four steps of shifted maxima and
// carried between blocks in Z31; this needs scores without NaN (flags bit
// 1 says one was met, nothing is then to be trusted). The exponentials of
// lanes EXP8 leaves to Go are -1 in ms or vs (flags bit 0).
TEXT ·onlineWeightsAVX512(SB), NOSPLIT, $0-112
	MOVQ             x_base+0(FP), SI
	MOVQ             ms_base+24(FP), DI
	MOVQ             vs_base+48(FP), R8
	MOVQ             d_base+72(FP), R9
	MOVQ             blocks+96(FP), CX
	XORQ             R11, R11
	MOVL             $0xff800000, AX
	VPBROADCASTD     AX, Z30                          // -inf
	VMOVAPS          Z30, Z31                         // the maximum so far
	MOVL             $15, AX
	VPBROADCASTD     AX, Z29                          // lane 15's index
	MOVL             $0x3f800000, AX
	VPBROADCASTD     AX, Z28                          // 1
	VBROADCASTSD     expConst<>+0(SB), Z27
	VBROADCASTSD     expConst<>+8(SB), Z26
	VBROADCASTSD     expConst<>+16(SB), Z25
	VBROADCASTSD     expConst<>+24(SB), Z24
	VMOVUPD          expTab<>+0(SB), Z23
	VMOVUPD          expTab<>+64(SB), Z22
	VBROADCASTSD     expConst<>+88(SB), Z21
	VBROADCASTSD     expConst<>+96(SB), Z20
	VBROADCASTSD     expConst<>+104(SB), Z19
	VBROADCASTSD     expConst<>+112(SB), Z18
	VBROADCASTSD     expConst<>+120(SB), Z17
	VBROADCASTSD     expConst<>+128(SB), Z16
	VBROADCASTSD     expConst<>+136(SB), Z15
	VPXORQ           Z14, Z14, Z14

weights:
	VMOVUPS          (SI), Z0
	VCMPPS           $3, Z0, Z0, K1
	KORTESTW         K1, K1
	JNE              nan

	// Inclusive prefix maximum P in Z1, then with the carry.
	VALIGND          $15, Z30, Z0, Z2
	VMAXPS           Z2, Z0, Z1
	VALIGND          $14, Z30, Z1, Z2
	VMAXPS           Z2, Z1, Z1
	VALIGND          $12, Z30, Z1, Z2
	VMAXPS           Z2, Z1, Z1
	VALIGND          $8, Z30, Z1, Z2
	VMAXPS           Z2, Z1, Z1
	VMAXPS           Z31, Z1, Z1

	// The maximum before each lane, E in Z3; the carry becomes P's lane 15.
	VALIGND          $15, Z31, Z1, Z3
	VPERMPS          Z1, Z29, Z31

	// New maxima in K2; d = E - x there, x - E elsewhere.
	VCMPPS           $0x1e, Z3, Z0, K2
	VSUBPS           Z3, Z0, Z4
	VSUBPS           Z0, Z3, K2, Z4
	VMOVUPS          Z4, (R9)

	// e^d in Z5, eight lanes at a time in float64.
	VCVTPS2PD        Y4, Z6
	EXP8
	VCVTPD2PS        Z7, Y10
	VEXTRACTF64X4    $1, Z4, Y11
	VCVTPS2PD        Y11, Z6
	EXP8
	VCVTPD2PS        Z7, Y11
	VINSERTF64X4     $1, Y11, Z10, Z5
	// R11's bits of the upper half land on those of the lower: only
	// whether any is set matters.

	// ms = e at new maxima, 1 elsewhere; vs the other way round.
	VMOVAPS          Z28, Z10
	VMOVAPS          Z5, K2, Z10
	VMOVUPS          Z10, (DI)
	VMOVAPS          Z28, K2, Z5
	VMOVUPS          Z5, (R8)

	ADDQ             $64, SI
	ADDQ             $64, DI
	ADDQ             $64, R8
	ADDQ             $64, R9
	DECQ             CX
	JNZ              weights
	XORQ             AX, AX
	TESTQ            R11, R11
	SETNE            AX
	MOVQ             AX, flags+104(FP)
	VZEROUPPER
	RET

nan:
	MOVQ             $2, flags+104(FP)
	VZEROUPPER
	RET

// UNIT16 is f16(acc + v·vs) for the 16 values of chunk C: the F16 values
// at C·32(SI), the accumulator at C·64(R14), Z2 = vs broadcast.
#define UNIT16(C, Z, Y) \
	VCVTPH2PS   C*32(SI), Z; \
	VFMADD213PS C*64(R14), Z2, Z; \
	VCVTPS2PH   $0, Z, Y; \
	VCVTPH2PS   Y, Z; \
	VMOVUPS     Z, C*64(R14)

// RESCALE16 is f16(acc·ms) for chunk C of the accumulator at R14, Z2 = ms
// broadcast.
#define RESCALE16(C, Z, Y) \
	VMULPS    C*64(R14), Z2, Z; \
	VCVTPS2PH $0, Z, Y; \
	VCVTPH2PS Y, Z; \
	VMOVUPS   Z, C*64(R14)

// func accumulateHalfUnits64AVX512(acc []float32, v []byte, stride int, ms, vs []float32, wstride, units, n int, sums []float32)
//
// accumulateHalfUnitsGo for heads of 64 elements. Per position, each unit
// (query head) in turn: its rescaling, its accumulation, its sum; the
// accumulators stay in memory, one unit's after another, so the chains of
// different units (and chunks) overlap while each waits on its previous
// position.
TEXT ·accumulateHalfUnits64AVX512(SB), NOSPLIT, $0-152
	MOVQ         acc_base+0(FP), DI
	MOVQ         v_base+24(FP), SI
	MOVQ         ms_base+56(FP), R8
	MOVQ         vs_base+80(FP), R9
	MOVQ         wstride+104(FP), R10
	SHLQ         $2, R10
	MOVQ         units+112(FP), R12
	MOVQ         n+120(FP), R11
	MOVQ         sums_base+128(FP), BX
	MOVL         $0x3f800000, AX
	VMOVD        AX, X10

key64:
	MOVQ DI, R14
	MOVQ R8, AX
	MOVQ R9, CX
	MOVQ BX, DX
	MOVQ R12, R13

unit64:
	VMOVSS   (AX), X1
	VUCOMISS X10, X1
	JNE      rescale64
	JPS      rescale64

add64:
	VBROADCASTSS (CX), Z2
	UNIT16(0, Z3, Y3)
	UNIT16(1, Z4, Y4)
	UNIT16(2, Z5, Y5)
	UNIT16(3, Z6, Y6)
	VMOVSS       (DX), X7
	VFMADD213SS  (CX), X1, X7
	VMOVSS       X7, (DX)
	ADDQ         $256, R14
	ADDQ         R10, AX
	ADDQ         R10, CX
	ADDQ         $4, DX
	DECQ         R13
	JNZ          unit64
	ADDQ         stride+48(FP), SI
	ADDQ         $4, R8
	ADDQ         $4, R9
	DECQ         R11
	JNZ          key64
	VZEROUPPER
	RET

rescale64:
	VBROADCASTSS X1, Z2
	RESCALE16(0, Z3, Y3)
	RESCALE16(1, Z4, Y4)
	RESCALE16(2, Z5, Y5)
	RESCALE16(3, Z6, Y6)
	JMP          add64

// func accumulateHalfUnits128AVX512(acc []float32, v []byte, stride int, ms, vs []float32, wstride, units, n int, sums []float32)
//
// accumulateHalfUnits64AVX512 for heads of 128 elements.
TEXT ·accumulateHalfUnits128AVX512(SB), NOSPLIT, $0-152
	MOVQ         acc_base+0(FP), DI
	MOVQ         v_base+24(FP), SI
	MOVQ         ms_base+56(FP), R8
	MOVQ         vs_base+80(FP), R9
	MOVQ         wstride+104(FP), R10
	SHLQ         $2, R10
	MOVQ         units+112(FP), R12
	MOVQ         n+120(FP), R11
	MOVQ         sums_base+128(FP), BX
	MOVL         $0x3f800000, AX
	VMOVD        AX, X10

key128:
	MOVQ DI, R14
	MOVQ R8, AX
	MOVQ R9, CX
	MOVQ BX, DX
	MOVQ R12, R13

unit128:
	VMOVSS   (AX), X1
	VUCOMISS X10, X1
	JNE      rescale128
	JPS      rescale128

add128:
	VBROADCASTSS (CX), Z2
	UNIT16(0, Z3, Y3)
	UNIT16(1, Z4, Y4)
	UNIT16(2, Z5, Y5)
	UNIT16(3, Z6, Y6)
	UNIT16(4, Z7, Y7)
	UNIT16(5, Z8, Y8)
	UNIT16(6, Z9, Y9)
	UNIT16(7, Z11, Y11)
	VMOVSS       (DX), X7
	VFMADD213SS  (CX), X1, X7
	VMOVSS       X7, (DX)
	ADDQ         $512, R14
	ADDQ         R10, AX
	ADDQ         R10, CX
	ADDQ         $4, DX
	DECQ         R13
	JNZ          unit128
	ADDQ         stride+48(FP), SI
	ADDQ         $4, R8
	ADDQ         $4, R9
	DECQ         R11
	JNZ          key128
	VZEROUPPER
	RET

rescale128:
	VBROADCASTSS X1, Z2
	RESCALE16(0, Z3, Y3)
	RESCALE16(1, Z4, Y4)
	RESCALE16(2, Z5, Y5)
	RESCALE16(3, Z6, Y6)
	RESCALE16(4, Z7, Y7)
	RESCALE16(5, Z8, Y8)
	RESCALE16(6, Z9, Y9)
	RESCALE16(7, Z11, Y11)
	JMP          add128
