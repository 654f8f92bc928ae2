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
