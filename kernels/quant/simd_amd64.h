// Macros shared by the AVX2 kernels.

// HSUM8 leaves the sum of the 8 floats of Y0 in X0 (Y1 is scratch).
#define HSUM8 \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS       X1, X0, X0; \
	VPERMILPS    $0x4e, X0, X1; \
	VADDPS       X1, X0, X0; \
	VPERMILPS    $0xb1, X0, X1; \
	VADDSS       X1, X0, X0

// I8DOT multiplies the 32 signed bytes in W with the 32 at mem and leaves
// the 8 sums of four neighbouring products in W as float32. VPMADDUBSW
// needs one unsigned operand, so W's signs move onto the other operand
// first (|w|·(y·sign w) = w·y; neither side is ever -128). T is scratch;
// Y15 must hold sixteen int16 ones.
#define I8DOT(mem, W, T) \
	VMOVDQU    mem, T; \
	VPSIGNB    W, T, T; \
	VPSIGNB    W, W, W; \
	VPMADDUBSW T, W, W; \
	VPMADDWD   Y15, W, W; \
	VCVTDQ2PS  W, W

// F16PROD leaves eight copies of f16(a)·f16(b) in YD (XT, YT scratch).
#define F16PROD(a, b, XD, YD, XT, YT) \
	VPBROADCASTW a, XD; \
	VCVTPH2PS    XD, YD; \
	VPBROADCASTW b, XT; \
	VCVTPH2PS    XT, YT; \
	VMULPS       YT, YD, YD

// ONES16 sets Y15 to sixteen int16 ones.
#define ONES16 \
	VPCMPEQW Y15, Y15, Y15; \
	VPSRLW   $15, Y15, Y15

// NIB32 unpacks the 16 bytes at mem into 32 nibbles in W: low nibbles
// (elements 0-15) in the low lane, high nibbles (16-31) in the high lane.
// Needs Y14 = 0x0F bytes.
#define NIB32(mem, W, XW, XT) \
	VMOVDQU     mem, XW; \
	VPSRLW      $4, XW, XT; \
	VINSERTI128 $1, XT, W, W; \
	VPAND       Y14, W, W

// BYTES8 sets Y to 32 copies of the byte in every byte of the uint32 c.
#define BYTES8(c, X, Y) \
	MOVL         c, AX; \
	VMOVD        AX, X; \
	VPBROADCASTD X, Y

// QHBITS spreads the 32 bits of the uint32 at mem to 32 bytes in T: 0xFF
// where the bit is set, else 0 (byte j of the broadcast dword goes to bytes
// 8j..8j+7, every byte but one bit is set, compare with all ones).
// Needs Y13 = qhSpread, Y12 = 0x7fbfdfeff7fbfdfe quadwords, Y11 = all ones.
#define QHBITS(mem, T) \
	VPBROADCASTD mem, T; \
	VPSHUFB      Y13, T, T; \
	VPOR         Y12, T, T; \
	VPCMPEQB     Y11, T, T

// Q5W unpacks one Q5_0 block (quants at qs, high bits at qh) into 32 signed
// bytes q-16 in W: (bit ? 0 : 0xF0) | nibble is nibble+16·bit-16 as a
// signed byte. Needs NIB32's and QHBITS's constants and Y10 = 0xF0 bytes.
#define Q5W(qs, qh, W, XW, T, XT) \
	NIB32(qs, W, XW, XT); \
	QHBITS(qh, T); \
	VPANDN Y10, T, T; \
	VPOR   T, W, W

// QHSETUP loads the constants QHBITS needs.
#define QHSETUP \
	MOVQ         $0x7fbfdfeff7fbfdfe, AX; \
	VMOVQ        AX, X12; \
	VPBROADCASTQ X12, Y12; \
	VPCMPEQB     Y11, Y11, Y11; \
	VMOVDQU      ·qhSpread(SB), Y13

// Q4KSCALES unpacks the 12 scale bytes at 4(SI) (u0 u1 u2 as little-endian
// uint32s; see kScaleMin) into int16 scales 0-7 | mins 0-7 in Y2, and
// leaves Σ_j m_j·(the activation quants' sum over sub-block j) as four
// int32 partial sums in X3 and dmin·dy in X5 for KMINS: the
// Q8_K bsums give it without touching the quants again.
#define Q4KSCALES \
	Q4KUNPACK; \
	Q4KMINSUM

// Q4KUNPACK is the weight half of Q4KSCALES: the 12 scale bytes at 4(SI)
// as int16 scales 0-7 | mins 0-7 in Y2 (R9-R13 scratch).
#define Q4KUNPACK \
	MOVL 4(SI), R9; \
	MOVL 8(SI), R10; \
	MOVL 12(SI), R11; \
	MOVL R11, R12; \
	SHRL $4, R12; \
	ANDL $0x0F0F0F0F, R12; \
	MOVL R10, R13; \
	SHRL $6, R13; \
	ANDL $0x03030303, R13; \
	SHLL $4, R13; \
	ORL  R13, R12; \
	ANDL $0x3F3F3F3F, R10; \
	ANDL $0x0F0F0F0F, R11; \
	MOVL R9, R13; \
	SHRL $6, R13; \
	ANDL $0x03030303, R13; \
	SHLL $4, R13; \
	ORL  R13, R11; \
	ANDL $0x3F3F3F3F, R9; \
	VMOVD     R9, X2; \
	VPINSRD   $1, R11, X2, X2; \
	VPINSRD   $2, R10, X2, X2; \
	VPINSRD   $3, R12, X2, X2; \
	VPMOVZXBW X2, Y2

// Q4KMINSUM is the activation half of Q4KSCALES (see there); Y2 holds the
// scales and mins from Q4KUNPACK.
#define Q4KMINSUM \
	VMOVDQU      260(DI), Y3; \
	VEXTRACTI128 $1, Y3, X4; \
	VPHADDW      X4, X3, X3; \
	VEXTRACTI128 $1, Y2, X4; \
	VPMADDWD     X4, X3, X3; \
	VPBROADCASTW 2(SI), X5; \
	VCVTPH2PS    X5, X5; \
	VBROADCASTSS (DI), X6; \
	VMULPS       X6, X5, X5

// KMINS adds dmin·dy (X5) times the block's whole mins·bsums (the four
// int32 partial sums in X3 added first, exactly) to the scalar in X1, as
// ggml's Q5_K product and its repacked Q4_K products do.
#define KMINS \
	VPHADDD     X3, X3, X3; \
	VPHADDD     X3, X3, X3; \
	VCVTDQ2PS   X3, X3; \
	VFMADD231SS X3, X5, X1

// KSUMSCALAR adds d·dy times the sum of the block's eight int32 lanes in
// Y3 (added exactly first) to the scalar in X0, and returns X0 minus the
// scalar X1 when last: ggml's repacked Q4_K product keeps one float per
// output row and so rounds once per block.
#define KSUMSCALAR \
	VEXTRACTI128 $1, Y3, X4; \
	VPADDD       X4, X3, X3; \
	VPHADDD      X3, X3, X3; \
	VPHADDD      X3, X3, X3; \
	VCVTDQ2PS    X3, X3; \
	VPBROADCASTW (SI), X5; \
	VCVTPH2PS    X5, X5; \
	VMULSS       (DI), X5, X5; \
	VFMADD231SS  X3, X5, X0

// Q4KSUM adds d·dy times the block's int32 sums in Y3 to Y0.
#define Q4KSUM \
	VCVTDQ2PS    Y3, Y3; \
	VPBROADCASTW (SI), X5; \
	VCVTPH2PS    X5, Y5; \
	VBROADCASTSS (DI), Y6; \
	VMULPS       Y6, Y5, Y5; \
	VFMADD231PS  Y3, Y5, Y0

// KRESULT returns the sum of Y0's lanes minus the scalar X1 (X7 scratch).
#define KRESULT \
	VMOVAPS X1, X7; \
	HSUM8; \
	VSUBSS  X7, X0, X0; \
	VZEROUPPER; \
	MOVSS   X0, ret+56(FP); \
	RET

// Four-row kernels (func(x []byte, ys *[4]*byte, nb int, ...)) decode a
// weight block once and run it against the same block of four activation
// rows, at AX, BX, DX and DI, doing for each row exactly the float32
// operations of the single-row kernel in its order: the outputs keep their
// bits, only the weight-side work (loads, unpacking) is shared. Each row
// keeps its accumulator in a register of its own.

// ROWS4 loads the four activation row pointers.
#define ROWS4 \
	MOVQ ys+24(FP), R9; \
	MOVQ (R9), AX; \
	MOVQ 8(R9), BX; \
	MOVQ 16(R9), DX; \
	MOVQ 24(R9), DI

// NEXT4 moves the four activation row pointers on by n bytes.
#define NEXT4(n) \
	ADDQ n, AX; \
	ADDQ n, BX; \
	ADDQ n, DX; \
	ADDQ n, DI

// Q80ROW adds one Q8_0 activation block at P times the weight block (Y1
// the quants, Y2 their magnitudes, Y3 the scale) to the lanes of ACC, as
// I8DOT, F16PROD and the fused multiply-add do for one row (Y4, Y5
// scratch, Y15 = sixteen int16 ones).
#define Q80ROW(P, ACC) \
	VMOVDQU      2(P), Y4; \
	VPSIGNB      Y1, Y4, Y4; \
	VPMADDUBSW   Y4, Y2, Y4; \
	VPMADDWD     Y15, Y4, Y4; \
	VCVTDQ2PS    Y4, Y4; \
	VPBROADCASTW (P), X5; \
	VCVTPH2PS    X5, Y5; \
	VMULPS       Y5, Y3, Y5; \
	VFMADD231PS  Y4, Y5, ACC

// Q80ROWS4 is Q80ROW for the four rows, accumulators A0-A3, and the
// weight scale of the block at (SI).
#define Q80ROWS4(A0, A1, A2, A3) \
	VPSIGNB      Y1, Y1, Y2; \
	VPBROADCASTW (SI), X3; \
	VCVTPH2PS    X3, Y3; \
	Q80ROW(AX, A0); \
	Q80ROW(BX, A1); \
	Q80ROW(DX, A2); \
	Q80ROW(DI, A3)

// STORE4 writes four 8-lane accumulators to the [4][8]float32 at acc.
#define STORE4(A0, A1, A2, A3) \
	MOVQ    acc+40(FP), R9; \
	VMOVUPS A0, (R9); \
	VMOVUPS A1, 32(R9); \
	VMOVUPS A2, 64(R9); \
	VMOVUPS A3, 96(R9)

// ROWS5 is ROWS4 with a fifth row at R10, for the kernels whose block
// leaves room for five accumulators.
#define ROWS5 \
	ROWS4; \
	MOVQ 32(R9), R10

// STORE5 is STORE4 with a fifth accumulator.
#define STORE5(A0, A1, A2, A3, A4) \
	STORE4(A0, A1, A2, A3); \
	VMOVUPS A4, 128(R9)

// FOLD512 adds the upper 256 bits of Z into its lower half Y (exactly),
// through the scratch register T (a 256-bit one).
#define FOLD512(Z, Y, T) \
	VEXTRACTI64X4 $1, Z, T; \
	VPADDD        T, Y, Y
