// Macros shared by the blocked (AVX-512) kernels.

// ZERO24 clears the accumulators Z0-Z23.
#define ZERO24 \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1; \
	VPXORD Z2, Z2, Z2; \
	VPXORD Z3, Z3, Z3; \
	VPXORD Z4, Z4, Z4; \
	VPXORD Z5, Z5, Z5; \
	VPXORD Z6, Z6, Z6; \
	VPXORD Z7, Z7, Z7; \
	VPXORD Z8, Z8, Z8; \
	VPXORD Z9, Z9, Z9; \
	VPXORD Z10, Z10, Z10; \
	VPXORD Z11, Z11, Z11; \
	VPXORD Z12, Z12, Z12; \
	VPXORD Z13, Z13, Z13; \
	VPXORD Z14, Z14, Z14; \
	VPXORD Z15, Z15, Z15; \
	VPXORD Z16, Z16, Z16; \
	VPXORD Z17, Z17, Z17; \
	VPXORD Z18, Z18, Z18; \
	VPXORD Z19, Z19, Z19; \
	VPXORD Z20, Z20, Z20; \
	VPXORD Z21, Z21, Z21; \
	VPXORD Z22, Z22, Z22; \
	VPXORD Z23, Z23, Z23

// PAIRSUM turns A = [p | q] and B = [s | t] (8 floats each) into
// A = [p+q | s+t] (T1, T2 scratch): the single-row float kernels' last
// accumulator add, for two outputs at once.
#define PAIRSUM(A, B, T1, T2) \
	VSHUFF32X4 $0x44, B, A, T1; \
	VSHUFF32X4 $0xEE, B, A, T2; \
	VADDPS     T2, T1, A

// REDUCE4 turns A = [p | q] and B = [s | t] (8 floats each) into the
// HSUM8 of p, q, s and t in lanes 0, 4, 8 and 12 of A (T1, T2 scratch),
// with HSUM8's additions: ((x0+x4)+(x2+x6)) + ((x1+x5)+(x3+x7)).
#define REDUCE4(A, B, T1, T2) \
	VSHUFF32X4 $0x88, B, A, T1; \
	VSHUFF32X4 $0xDD, B, A, T2; \
	VADDPS     T2, T1, A; \
	VPERMILPS  $0x4e, A, T1; \
	VADDPS     T1, A, A; \
	VPERMILPS  $0xb1, A, T1; \
	VADDPS     T1, A, A

// Q8STORE stores four acts' sums with four panel rows from the lanes 0,
// 4, 8, 12 of A, B, C, D (rows 0-3; an act each lane) at R14, R14+R13,
// ... (a 4x4 transpose: each act's four rows are neighbours in out),
// moving R14 on four rows (K1 = 0x1111, Z24-Z31 scratch).
#define Q8STORE(A, B, C, D) \
	VCOMPRESSPS A, K1, Z24; \
	VCOMPRESSPS B, K1, Z25; \
	VCOMPRESSPS C, K1, Z26; \
	VCOMPRESSPS D, K1, Z27; \
	VUNPCKLPS   X25, X24, X28; \
	VUNPCKLPS   X27, X26, X29; \
	VUNPCKHPS   X25, X24, X30; \
	VUNPCKHPS   X27, X26, X31; \
	VMOVLHPS    X29, X28, X24; \
	VMOVHLPS    X28, X29, X25; \
	VMOVLHPS    X31, X30, X26; \
	VMOVHLPS    X30, X31, X27; \
	VMOVUPS     X24, (R14); \
	VMOVUPS     X25, (R14)(R13*1); \
	VMOVUPS     X26, (R14)(R13*2); \
	LEAQ        (R14)(R13*2), R14; \
	VMOVUPS     X27, (R14)(R13*1); \
	LEAQ        (R14)(R13*2), R14
