// Matrix-vector products for decode and small batches: Y[b][o] = W[o] . X[b]
// for b < nb <= NB. One warp owns one output row and reads that weight row
// once for all nb vectors, so the kernels run at weight-reading speed.
//
// The hot weight types (Q8_0, Q4_K, Q6_K) use integer dot products (dp4a)
// against activations quantized to 8 bits in blocks of 32 (quantize_q8);
// F16 reads 16-byte vectors against F32 activations; every other type
// dequantizes 32 elements at a time (dequant32) against F32 activations.
#include "common.cuh"

#define MV_WARPS 4

// Activations quantized for the integer kernels, in the group-major q8
// layout of common.cuh (q8_off).
extern "C" __global__ void quantize_q8(const float* __restrict__ x, long long xstride,
                                       signed char* __restrict__ xq, float2* __restrict__ xd,
                                       int n, int rows) {
    grid_dep_begin();
    int gw = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    int groups = n >> 5;
    if (gw >= groups * rows) return;
    int b = gw / groups, g = gw % groups, P = q8_pitch(rows);
    quantize_group(x[b * xstride + 32 * g + lane], xq + q8_off(g, b, P), xd + q8_sc(g, b, P));
}

// mv_store ends a warp's WR weight rows from row on: it adds each row and
// batch row's partial sums across the lanes (warp_sum), and lane 0 stores
// the sums of rows and batch rows that exist (adds them with accumulate).
template <int WR, int NB>
__device__ __forceinline__ void mv_store(const float (&acc)[WR][NB], int lane, int row, int rows, int nb,
                                         float* __restrict__ y, long long ystride, int accumulate) {
#pragma unroll
    for (int r = 0; r < WR; r++)
#pragma unroll
        for (int b = 0; b < NB; b++) {
            float s = warp_sum(acc[r][b]);
            if (lane == 0 && b < nb && row + r < rows) {
                float* out = y + b * ystride + row + r;
                *out = accumulate ? *out + s : s;
            }
        }
}

// Generic: dequantize 32 weights, dot with F32 activations.
template <int T, int NB>
__device__ void mv_generic(const u8* __restrict__ w, long long wstride, const float* __restrict__ x,
                           long long xstride, float* __restrict__ y, long long ystride, int rows,
                           int n, int nb, int accumulate) {
    int row = blockIdx.x * MV_WARPS + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= rows) return;
    const u8* wr = w + (size_t)row * wstride;
    float acc[1][NB];
#pragma unroll
    for (int b = 0; b < NB; b++) acc[0][b] = 0.f;
    for (int g = lane; g < (n >> 5); g += 32) {
        float v[32];
        dequant32<T>(wr, g, v);
#pragma unroll
        for (int b = 0; b < NB; b++) {
            if (b < nb) {
                const float4* xv = (const float4*)(x + b * xstride + 32 * g);
                float s = 0.f;
#pragma unroll
                for (int i = 0; i < 8; i++) {
                    float4 t = __ldg(xv + i);
                    s += v[4 * i] * t.x + v[4 * i + 1] * t.y + v[4 * i + 2] * t.z + v[4 * i + 3] * t.w;
                }
                acc[0][b] += s;
            }
        }
    }
    mv_store<1, NB>(acc, lane, row, rows, nb, y, ystride, accumulate);
}

// F16 weights in 16-byte vectors (rows 16-byte aligned, n % 8 == 0). A
// warp takes WR neighbouring weight rows, so each activation vector it
// loads serves WR rows: at several batch rows the activations' loads (4
// bytes an element a batch row, from L1) outweigh the weights' (2 bytes).
template <int NB, int WR>
__device__ void mv_f16_vec(const u8* __restrict__ w, long long wstride, const float* __restrict__ x,
                           long long xstride, float* __restrict__ y, long long ystride, int rows,
                           int n, int nb, int accumulate) {
    int row = (blockIdx.x * MV_WARPS + (threadIdx.x >> 5)) * WR, lane = threadIdx.x & 31;
    if (row >= rows) return;
    const uint4* wr[WR];
#pragma unroll
    for (int r = 0; r < WR; r++) wr[r] = (const uint4*)(w + (size_t)min(row + r, rows - 1) * wstride);
    float acc[WR][NB];
#pragma unroll
    for (int r = 0; r < WR; r++)
#pragma unroll
        for (int b = 0; b < NB; b++) acc[r][b] = 0.f;
#pragma unroll 2
    for (int i = lane; i < (n >> 3); i += 32) {
        float2 f[WR][4];
#pragma unroll
        for (int r = 0; r < WR; r++) {
            uint4 q = __ldg(wr[r] + i);
            const __half2* h = (const __half2*)&q;
#pragma unroll
            for (int k = 0; k < 4; k++) f[r][k] = __half22float2(h[k]);
        }
#pragma unroll
        for (int b = 0; b < NB; b++) {
            if (b < nb) {
                const float4* xv = (const float4*)(x + b * xstride) + 2 * i;
                float4 a = __ldg(xv), c = __ldg(xv + 1);
#pragma unroll
                for (int r = 0; r < WR; r++)
                    acc[r][b] += f[r][0].x * a.x + f[r][0].y * a.y + f[r][1].x * a.z + f[r][1].y * a.w +
                                 f[r][2].x * c.x + f[r][2].y * c.y + f[r][3].x * c.z + f[r][3].y * c.w;
            }
        }
    }
    mv_store<WR, NB>(acc, lane, row, rows, nb, y, ystride, accumulate);
}

// The integer kernels' float steps are spelt out with round-to-nearest
// intrinsics (no contraction left to the compiler): verification of
// several rows (mvx_q4_k below, and these kernels at several batch rows)
// must give each row's sums bit for bit as decode's one-row launch does,
// so that greedy speculation is exactly the target's, and a fused
// multiply-add the compiler may or may not form differs in the last bit.
//
// q4k_term is one lane's share of a Q4_K block for one batch row: the
// integer sums slo and shi of its two groups (low and high nibbles of its
// 32 bytes) with their 6-bit scales sc and mins m, the block's d and dmin,
// and the activations' (scale, scale*sum) pairs dlo and dhi.
__device__ __forceinline__ float q4k_term(float d, float dmin, float sc0, float m0, float sc1, float m1, float2 dlo,
                                          float2 dhi, int slo, int shi) {
    float a = __fmaf_rn(__fmul_rn(sc1, dhi.x), (float)shi, __fmul_rn(__fmul_rn(sc0, dlo.x), (float)slo));
    float b = __fmaf_rn(m1, dhi.y, __fmul_rn(m0, dlo.y));
    return __fmaf_rn(d, a, -__fmul_rn(dmin, b));
}

// The integer kernels below take R weight rows (one, or a gate row and an
// up row) at once, so that a lane has the loads of all of them in flight
// before it uses any. dot_* leave each lane's partial sums in acc[r][b];
// the caller reduces them over the warp.

// Q8_0 x q8: one lane per 32-weight block.
template <int NB, int R>
__device__ __forceinline__ void dot_q8_0(const u8* const (&wr)[R], const signed char* __restrict__ xq,
                                         const float2* __restrict__ xd, int n, int nb, float (&acc)[R][NB]) {
    int lane = threadIdx.x & 31, nblk = n >> 5, P = q8_pitch(nb);
#pragma unroll 2
    for (int k = lane; k < nblk; k += 32) {
        float d[R];
        int q[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) {
            const u8* blkp = wr[r] + 34 * (size_t)k;
            d[r] = ldh(blkp);
#pragma unroll
            for (int i = 0; i < 8; i++) q[r][i] = (int)ld32(blkp + 2 + 4 * i);
        }
#pragma unroll
        for (int b = 0; b < NB; b++) {
            if (b < nb) {
                const int4* xv = (const int4*)(xq + q8_off(k, b, P));
                int4 a = __ldg(xv), c = __ldg(xv + 1);
                float xs = __ldg(xd + q8_sc(k, b, P)).x;
#pragma unroll
                for (int r = 0; r < R; r++) {
                    int s = __dp4a(q[r][0], a.x, 0);
                    s = __dp4a(q[r][1], a.y, s); s = __dp4a(q[r][2], a.z, s); s = __dp4a(q[r][3], a.w, s);
                    s = __dp4a(q[r][4], c.x, s); s = __dp4a(q[r][5], c.y, s); s = __dp4a(q[r][6], c.z, s);
                    s = __dp4a(q[r][7], c.w, s);
                    acc[r][b] = __fmaf_rn(__fmul_rn(d[r], xs), (float)s, acc[r][b]);
                }
            }
        }
    }
}

// Q4_K x q8: four lanes per 256-weight block, each lane 64 weights (32
// bytes of nibbles, two 16-byte loads) and the block's 16-byte header.
// Rows must be 16-byte aligned.
template <int NB, int R>
__device__ __forceinline__ void dot_q4_k(const u8* const (&wr)[R], const signed char* __restrict__ xq,
                                         const float2* __restrict__ xd, int n, int nb, float (&acc)[R][NB]) {
    int lane = threadIdx.x & 31, nblk = n >> 8, p = lane & 3, P = q8_pitch(nb);
#pragma unroll 2
    for (int k = lane >> 2; k < nblk; k += 8) {
        uint4 hdr[R], q0[R], q1[R];
#pragma unroll
        for (int r = 0; r < R; r++) {
            const u8* blkp = wr[r] + 144 * (size_t)k;
            hdr[r] = __ldg((const uint4*)blkp);
            q0[r] = __ldg((const uint4*)(blkp + 16 + 32 * p));
            q1[r] = __ldg((const uint4*)(blkp + 32 + 32 * p));
        }
        float d[R], dmin[R], sc0[R], m0[R], sc1[R], m1[R];
#pragma unroll
        for (int r = 0; r < R; r++) {
            d[r] = h2f(hdr[r].x & 0xFFFF);
            dmin[r] = h2f(hdr[r].x >> 16);
            k4_scale_hdr(hdr[r], 2 * p, &sc0[r], &m0[r]);
            k4_scale_hdr(hdr[r], 2 * p + 1, &sc1[r], &m1[r]);
        }
        int g = 8 * k + 2 * p; // activation group of the low nibbles
#pragma unroll
        for (int b = 0; b < NB; b++) {
            if (b < nb) {
                const int4* xv = (const int4*)(xq + q8_off(g, b, P));
                const int4* xw = (const int4*)(xq + q8_off(g + 1, b, P));
                int4 a0 = __ldg(xv), a1 = __ldg(xv + 1), c0 = __ldg(xw), c1 = __ldg(xw + 1);
                int xa[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
                int xc[8] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
                float2 dlo = __ldg(xd + q8_sc(g, b, P)), dhi = __ldg(xd + q8_sc(g + 1, b, P));
#pragma unroll
                for (int r = 0; r < R; r++) {
                    int qw[8] = {(int)q0[r].x, (int)q0[r].y, (int)q0[r].z, (int)q0[r].w,
                                 (int)q1[r].x, (int)q1[r].y, (int)q1[r].z, (int)q1[r].w};
                    int slo = 0, shi = 0;
#pragma unroll
                    for (int i = 0; i < 8; i++) {
                        slo = __dp4a(qw[i] & 0x0F0F0F0F, xa[i], slo);
                        shi = __dp4a((qw[i] >> 4) & 0x0F0F0F0F, xc[i], shi);
                    }
                    acc[r][b] = __fadd_rn(acc[r][b], q4k_term(d[r], dmin[r], sc0[r], m0[r], sc1[r], m1[r], dlo,
                                                              dhi, slo, shi));
                }
            }
        }
    }
}

// q6k_quants unpacks eight values (off..off+7) of each of the four groups
// of a Q6_K block's half: ql and qh point at the half's low and high bits
// at off (ql = block + 64*half + off, qh = block + 128 + 32*half + off).
// q[i] gets group i's values less 32, four signed bytes a word.
__device__ __forceinline__ void q6k_quants(const u8* ql, const u8* qh, int (&q)[4][2]) {
    int la[2] = {(int)ld32(ql), (int)ld32(ql + 4)};
    int lb[2] = {(int)ld32(ql + 32), (int)ld32(ql + 36)};
    int hh[2] = {(int)ld32(qh), (int)ld32(qh + 4)};
#pragma unroll
    for (int i = 0; i < 2; i++) {
        q[0][i] = __vsubss4((la[i] & 0x0F0F0F0F) | ((hh[i] << 4) & 0x30303030), 0x20202020);
        q[1][i] = __vsubss4((lb[i] & 0x0F0F0F0F) | ((hh[i] << 2) & 0x30303030), 0x20202020);
        q[2][i] = __vsubss4(((la[i] >> 4) & 0x0F0F0F0F) | (hh[i] & 0x30303030), 0x20202020);
        q[3][i] = __vsubss4(((lb[i] >> 4) & 0x0F0F0F0F) | ((hh[i] >> 2) & 0x30303030), 0x20202020);
    }
}

// Q6_K x q8: eight lanes per 256-weight block; lane part t covers l-values
// 8*(t&3)..+8 of half t>>2 in all four quarter rows (32 weights).
template <int NB, int R>
__device__ __forceinline__ void dot_q6_k(const u8* const (&wr)[R], const signed char* __restrict__ xq,
                                         const float2* __restrict__ xd, int n, int nb, float (&acc)[R][NB]) {
    int lane = threadIdx.x & 31, nblk = n >> 8, t = lane & 7, h = t >> 2, l0 = 8 * (t & 3), P = q8_pitch(nb);
#pragma unroll 2
    for (int k = lane >> 3; k < nblk; k += 4) {
        int q[R][4][2];
        float s4[R][4];
#pragma unroll
        for (int r = 0; r < R; r++) {
            const u8* blkp = wr[r] + 210 * (size_t)k;
            const u8* ql = blkp + 64 * h + l0;
            const u8* qh = blkp + 128 + 32 * h + l0;
            const signed char* sc = (const signed char*)(blkp + 192) + 8 * h + (l0 >> 4);
            float d = ldh(blkp + 208);
            q6k_quants(ql, qh, q[r]);
#pragma unroll
            for (int j = 0; j < 4; j++) s4[r][j] = __fmul_rn(d, (float)sc[2 * j]);
        }
        int g0 = 8 * k + 4 * h;
#pragma unroll
        for (int b = 0; b < NB; b++) {
            if (b < nb) {
                float a[R];
#pragma unroll
                for (int r = 0; r < R; r++) a[r] = 0.f;
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const int2 xv = __ldg((const int2*)(xq + q8_off(g0 + j, b, P) + l0));
                    float xs = __ldg(xd + q8_sc(g0 + j, b, P)).x;
#pragma unroll
                    for (int r = 0; r < R; r++) {
                        int s = __dp4a(q[r][j][0], xv.x, 0);
                        s = __dp4a(q[r][j][1], xv.y, s);
                        a[r] = __fmaf_rn(__fmul_rn(s4[r][j], xs), (float)s, a[r]);
                    }
                }
#pragma unroll
                for (int r = 0; r < R; r++) acc[r][b] = __fadd_rn(acc[r][b], a[r]);
            }
        }
    }
}

// dot_q picks the integer dot product of weight type T.
template <int T, int NB, int R>
__device__ __forceinline__ void dot_q(const u8* const (&wr)[R], const signed char* __restrict__ xq,
                                      const float2* __restrict__ xd, int n, int nb, float (&acc)[R][NB]) {
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int b = 0; b < NB; b++) acc[r][b] = 0.f;
    if constexpr (T == T_Q8_0) {
        dot_q8_0<NB, R>(wr, xq, xd, n, nb, acc);
    } else if constexpr (T == T_Q4_K) {
        dot_q4_k<NB, R>(wr, xq, xd, n, nb, acc);
    } else {
        static_assert(T == T_Q6_K, "no integer kernel for this weight type");
        dot_q6_k<NB, R>(wr, xq, xd, n, nb, acc);
    }
}

// mvq: WR neighbouring weight rows per warp against quantize_q8
// activations. With WR 2 each activation group a lane loads (from L1)
// serves two weight rows: at several batch rows those loads, a byte an
// element a batch row, outweigh the weights' (0.56-1.06 bytes).
template <int T, int NB, int WR>
__device__ void mvq(const u8* __restrict__ w, long long wstride, const signed char* __restrict__ xq,
                    const float2* __restrict__ xd, float* __restrict__ y, long long ystride, int rows, int n,
                    int nb, int accumulate) {
    int row = (blockIdx.x * MV_WARPS + (threadIdx.x >> 5)) * WR, lane = threadIdx.x & 31;
    if (row >= rows) return;
    const u8* wp[WR];
#pragma unroll
    for (int r = 0; r < WR; r++) wp[r] = w + (size_t)min(row + r, rows - 1) * wstride;
    float acc[WR][NB];
    dot_q<T, NB, WR>(wp, xq, xd, n, nb, acc);
    mv_store<WR, NB>(acc, lane, row, rows, nb, y, ystride, accumulate);
}

// silu_mul is silu(g) * u, the same bits in the fused gate/up product of
// decode and in swiglu_q8 after the several-row products.
__device__ __forceinline__ float silu_mul(float g, float u) {
    return __fmul_rn(__fdiv_rn(g, __fadd_rn(1.f, __expf(-g))), u);
}

// mvq_glu: the gate and up products of the same activations and the
// SwiGLU of their results, y = silu(Wg x) * (Wu x), quantized on the way
// for the next product (to oq, od; rows a multiple of 32). A warp takes
// row i of both weights and writes the gate, up and SwiGLU values (y may
// be the gate's or the up's output); the last warp of each group of 32
// rows to finish (a counter per group, which it sets back to zero)
// quantizes that group.
template <int T, int NB>
__device__ void mvq_glu(const u8* __restrict__ wg, long long wgs, float* yg, long long ygs,
                        const u8* __restrict__ wu, long long wus, float* yu, long long yus, float* y,
                        long long ys, int rows, const signed char* __restrict__ xq,
                        const float2* __restrict__ xd, int n, int nb, signed char* __restrict__ oq,
                        float2* __restrict__ od, int* __restrict__ counters) {
    int row = blockIdx.x * MV_WARPS + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= rows) return;
    const u8* const wr[2] = {wg + (size_t)row * wgs, wu + (size_t)row * wus};
    float acc[2][NB];
    dot_q<T, NB, 2>(wr, xq, xd, n, nb, acc);
#pragma unroll
    for (int b = 0; b < NB; b++) {
        float g = warp_sum(acc[0][b]), u = warp_sum(acc[1][b]);
        if (lane == 0 && b < nb) {
            yg[b * ygs + row] = g;
            yu[b * yus + row] = u;
            y[b * ys + row] = silu_mul(g, u);
        }
    }
    int grp = row >> 5, last = 0;
    if (lane == 0) {
        __threadfence(); // this row's values are visible before it counts
        last = atomicAdd(counters + grp, 1) == 31;
    }
    if (!__shfl_sync(0xffffffffu, last, 0)) return;
    __threadfence();
    int P = q8_pitch(nb);
    for (int b = 0; b < nb; b++) {
        float v = __ldcg(y + b * ys + 32 * grp + lane); // from L2: other warps wrote it
        quantize_group(v, oq + q8_off(grp, b, P), od + q8_sc(grp, b, P));
    }
    if (lane == 0) counters[grp] = 0;
}

// mvx_sum adds the 32 partials of each of a block's NO outputs (part[i][o]:
// decode's lane i's share of output o, row row0 + o/NC, batch row o%NC) in
// warp_sum's order: after the step of offset o, lane i holds its value
// plus lane i^o's (float addition commutes, so both lanes agree), and
// decode stores lane 0's.
#define MVX_WARPS 8
template <int NO>
__device__ __forceinline__ void mvx_sum(float (&part)[32][NO + 1], int row0, int rows, int NC, int nb,
                                        float* __restrict__ y, long long ystride, int accumulate) {
    __syncthreads();
    for (int o = threadIdx.x; o < NO; o += 32 * MVX_WARPS) {
        int r = row0 + o / NC, b = o % NC;
        if (r >= rows || b >= nb) continue;
        float v[16];
#pragma unroll
        for (int i = 0; i < 16; i++) v[i] = __fadd_rn(part[i][o], part[i + 16][o]);
#pragma unroll
        for (int s = 8; s > 0; s >>= 1)
#pragma unroll
            for (int i = 0; i < s; i++) v[i] = __fadd_rn(v[i], v[i + s]);
        float* out = y + b * ystride + r;
        *out = accumulate ? *out + v[0] : v[0];
    }
}

// MvxTile is what the mvx kernels below share around their block decode:
// a block takes 16*MT weight rows and up to NC = 8*NT batch rows, each of
// its MVX_WARPS warps computes, in mma fragments, four of decode's 32
// lanes' partials of every output (acc[m][i][j][e]: decode lane 4*warp + i,
// row tile m, column tile j, fragment element e), and finish adds the 32
// partials of each output in decode's order. A kernel keeps only its
// weight type's decode: which blocks a warp takes and which lane's
// partial each of its four accumulators is.
template <int MT, int NT>
struct MvxTile {
    static constexpr int NC = 8 * NT, NO = 16 * MT * NC; // outputs of the block: row-major 16*MT x NC
    int warp, g, t, row0, P;
    const u8* wr[MT][2];      // fragment rows g and g+8 of each 16-row tile
    int bcol[NT], scol[NT];   // each column tile's activation row and scale pair
    float acc[MT][4][NT][4];  // [row tile][decode lane 4*warp + i][column tile][fragment element]

    // start sets the tile up; false: this job has fewer rows than the grid.
    __device__ __forceinline__ bool start(const u8* __restrict__ w, long long wstride, int rows, int nb) {
        int lane = threadIdx.x & 31;
        warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
        row0 = blockIdx.x * 16 * MT, P = q8_pitch(nb);
        if (row0 >= rows) return false;
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int h = 0; h < 2; h++) wr[m][h] = w + (size_t)min(row0 + 16 * m + 8 * h + g, rows - 1) * wstride;
        // columns past the batch read real rows and are never stored; a
        // scale pair's 16-byte load starts at most at P-2 (0 for one row)
#pragma unroll
        for (int j = 0; j < NT; j++) {
            bcol[j] = min(8 * j + g, nb - 1);
            scol[j] = min(8 * j + 2 * t, P - 2 > 0 ? P - 2 : 0);
        }
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < NT; j++)
#pragma unroll
                    for (int e = 0; e < 4; e++) acc[m][i][j][e] = 0.f;
        return true;
    }

    // finish meets the 32 partials of each output in shared memory and
    // stores their sum (mvx_sum).
    __device__ __forceinline__ void finish(float* __restrict__ y, long long ystride, int rows, int nb, int accumulate) {
        __shared__ float part[32][NO + 1];
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < NT; j++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        part[4 * warp + i][(16 * m + 8 * (e >> 1) + g) * NC + 8 * j + 2 * t + (e & 1)] = acc[m][i][j][e];
        mvx_sum<NO>(part, row0, rows, NC, nb, y, ystride, accumulate);
    }
};

// mvx_q4_k: Q4_K products of 2 to 8*NT rows (verification) on tensor
// cores that give every row the bits of decode's matrix-vector kernel.
// Decode's warp (dot_q4_k) leaves in lane L = 4*k0 + p the sum, block by
// block (k = k0, k0+8, ...), of q4k_term over groups 2p and 2p+1 of each
// block, and adds the 32 lanes with warp_sum. The integer sums of a group
// are exact either way (dp4a or mma), so the same float steps in the same
// order give the same bits: warp k0 of this block's MVX_WARPS takes blocks
// k0, k0+8, ... of 16*MT weight rows, gets each group's sums for all the
// rows and batch rows from mmas, and keeps lane (k0, p)'s partial for each
// output in its fragment; the 32 partials of each output then meet in
// shared memory, where one thread adds them in warp_sum's order. Each
// weight is read once for all the rows, and the activations once per
// 16*MT weight rows, not once per weight row as the matrix-vector kernels
// do. Rows 16-byte aligned; grid (ceil(rows/(16*MT)), jobs); MVX_WARPS
// warps.
template <int MT, int NT>
__device__ void mvx_q4_k(const u8* __restrict__ w, long long wstride, float* __restrict__ y, long long ystride,
                         int rows, const signed char* __restrict__ xq, const float2* __restrict__ xd, int n, int nb,
                         int accumulate) {
    MvxTile<MT, NT> b;
    if (!b.start(w, wstride, rows, nb)) return;
    const int t = b.t, P = b.P;
    int nblk = n >> 8;
    for (int k = b.warp; k < nblk; k += MVX_WARPS) {
        uint4 hdr[MT][2];
        uint2 q[MT][2][4];
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const u8* blkp = b.wr[m][h] + 144 * (size_t)k;
                hdr[m][h] = __ldg((const uint4*)blkp);
#pragma unroll
                for (int p = 0; p < 4; p++) q[m][h][p] = __ldg((const uint2*)(blkp + 16 + 32 * p + 8 * t));
            }
#pragma unroll
        for (int p = 0; p < 4; p++) { // decode lane 4*warp + p
            int gl = 8 * k + 2 * p; // the group of the low nibbles
            uint2 xl[NT], xh[NT];
            float4 sl[NT], sh[NT];
#pragma unroll
            for (int j = 0; j < NT; j++) {
                xl[j] = __ldg((const uint2*)(xq + q8_off(gl, b.bcol[j], P) + 8 * t));
                xh[j] = __ldg((const uint2*)(xq + q8_off(gl + 1, b.bcol[j], P) + 8 * t));
                sl[j] = __ldg((const float4*)(xd + q8_sc(gl, b.scol[j], P)));
                sh[j] = __ldg((const float4*)(xd + q8_sc(gl + 1, b.scol[j], P)));
            }
#pragma unroll
            for (int m = 0; m < MT; m++) {
                float d[2], dmin[2], sc0[2], m0[2], sc1[2], m1[2];
                unsigned lo[2][2], hi[2][2];
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    d[h] = h2f(hdr[m][h].x & 0xFFFF);
                    dmin[h] = h2f(hdr[m][h].x >> 16);
                    k4_scale_hdr(hdr[m][h], 2 * p, &sc0[h], &m0[h]);
                    k4_scale_hdr(hdr[m][h], 2 * p + 1, &sc1[h], &m1[h]);
                    lo[h][0] = q[m][h][p].x & 0x0F0F0F0F;
                    lo[h][1] = q[m][h][p].y & 0x0F0F0F0F;
                    hi[h][0] = (q[m][h][p].x >> 4) & 0x0F0F0F0F;
                    hi[h][1] = (q[m][h][p].y >> 4) & 0x0F0F0F0F;
                }
#pragma unroll
                for (int j = 0; j < NT; j++) {
                    int cl[4] = {0, 0, 0, 0}, ch[4] = {0, 0, 0, 0};
                    mma_s8(cl, lo[0][0], lo[1][0], lo[0][1], lo[1][1], xl[j].x, xl[j].y);
                    mma_s8(ch, hi[0][0], hi[1][0], hi[0][1], hi[1][1], xh[j].x, xh[j].y);
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        int h = e >> 1; // row g or g+8
                        float2 dlo = (e & 1) ? make_float2(sl[j].z, sl[j].w) : make_float2(sl[j].x, sl[j].y);
                        float2 dhi = (e & 1) ? make_float2(sh[j].z, sh[j].w) : make_float2(sh[j].x, sh[j].y);
                        b.acc[m][p][j][e] = __fadd_rn(b.acc[m][p][j][e], q4k_term(d[h], dmin[h], sc0[h], m0[h], sc1[h],
                                                                                  m1[h], dlo, dhi, cl[e], ch[e]));
                    }
                }
            }
        }
    }
    b.finish(y, ystride, rows, nb, accumulate);
}

// mvxp_q4_k: Q4_K products of 2 to 2*NT rows in decode's order, as
// mvx_q4_k computes them, without its idle columns. mvx_q4_k gives an mma's
// eight columns to eight batch rows, so at two rows three quarters of its
// outputs, and of the float steps each output costs, are thrown away. Here
// an mma's 16 rows are four weight rows times the four decode lanes p of
// one warp (fragment row g: weight row g>>1, p = g&1; row g+8: p = 2 +
// (g&1)), each row holding the weights of p's group, and its eight columns
// four p times two batch rows (column c: p = c&3, batch row c>>2), each
// holding the activations of p's group: an output is a sum of one group
// wherever its row's and column's p agree, and of mismatched groups
// elsewhere (never used). The fragment puts exactly one agreeing output in
// each lane: lane (g, t) keeps element e = 2*(t&1) + (g&1), decode lane
// p = e's sum for weight row g>>1 and batch row t>>1, so every lane does
// one output's float steps (q4k_term, in decode's order) per mma pair
// where mvx_q4_k's lanes do four. 16 weight rows a block (four mma row
// tiles), MVX_WARPS warps taking blocks as mvx_q4_k's do; rows 16-byte
// aligned; grid (ceil(rows/16), jobs).
template <int NT>
__device__ void mvxp_q4_k(const u8* __restrict__ w, long long wstride, float* __restrict__ y, long long ystride,
                          int rows, const signed char* __restrict__ xq, const float2* __restrict__ xd, int n, int nb,
                          int accumulate) {
    constexpr int NC = 2 * NT, NO = 16 * NC;
    __shared__ float part[32][NO + 1];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int row0 = blockIdx.x * 16;
    if (row0 >= rows) return;
    const int P = q8_pitch(nb), odd = g & 1, hi = t & 1, p = 2 * hi + odd;
    const u8* wr[4];
#pragma unroll
    for (int q = 0; q < 4; q++) wr[q] = w + (size_t)min(row0 + 4 * q + (g >> 1), rows - 1) * wstride;
    int bn[NT], bl[NT]; // batch rows of the B column g and of the lane's output
#pragma unroll
    for (int j = 0; j < NT; j++) {
        bn[j] = min(2 * j + (g >> 2), nb - 1);
        bl[j] = min(2 * j + (t >> 1), nb - 1);
    }
    // the lane's two scale indices j0 = 2p, j1 = 2p+1 sit at bytes 2*odd and
    // 2*odd+1 of the header's y, z and w words (k4_scale_hdr)
    const unsigned jj = 2 * odd;
    const unsigned selYZ = jj | (jj + 1) << 4 | (jj + 4) << 8 | (jj + 5) << 12;
    const unsigned selW = jj | (jj + 1) << 4 | jj << 8 | (jj + 1) << 12;
    float acc[4][NT];
#pragma unroll
    for (int q = 0; q < 4; q++)
#pragma unroll
        for (int j = 0; j < NT; j++) acc[q][j] = 0.f;
    const int nblk = n >> 8;
    for (int k = warp; k < nblk; k += MVX_WARPS) {
        uint4 hdr[4];
        uint2 qa[4], qb[4];
#pragma unroll
        for (int q = 0; q < 4; q++) {
            const u8* blkp = wr[q] + 144 * (size_t)k;
            hdr[q] = __ldg((const uint4*)blkp);
            qa[q] = __ldg((const uint2*)(blkp + 16 + 32 * odd + 8 * t));
            qb[q] = __ldg((const uint2*)(blkp + 80 + 32 * odd + 8 * t));
        }
        uint2 xl[NT], xh[NT];
        float2 dlo[NT], dhi[NT];
        const int gb = 8 * k + 2 * (g & 3), gp = 8 * k + 2 * p;
#pragma unroll
        for (int j = 0; j < NT; j++) {
            xl[j] = __ldg((const uint2*)(xq + q8_off(gb, bn[j], P) + 8 * t));
            xh[j] = __ldg((const uint2*)(xq + q8_off(gb + 1, bn[j], P) + 8 * t));
            dlo[j] = __ldg(xd + q8_sc(gp, bl[j], P));
            dhi[j] = __ldg(xd + q8_sc(gp + 1, bl[j], P));
        }
#pragma unroll
        for (int q = 0; q < 4; q++) {
            float d = h2f(hdr[q].x & 0xFFFF), dmin = h2f(hdr[q].x >> 16);
            unsigned yz = __byte_perm(hdr[q].y, hdr[q].z, selYZ), ww = __byte_perm(hdr[q].w, 0, selW);
            unsigned s = hi ? ((ww & 0x00000F0Fu) | ((ww >> 4) & 0x0F0F0000u) | ((yz >> 2) & 0x30303030u))
                            : yz & 0x3F3F3F3Fu; // bytes: sc(j0), sc(j1), m(j0), m(j1)
            float sc0 = s & 0xFF, sc1 = (s >> 8) & 0xFF, m0 = (s >> 16) & 0xFF, m1 = s >> 24;
            unsigned lo0 = qa[q].x & 0x0F0F0F0F, lo1 = qb[q].x & 0x0F0F0F0F;
            unsigned lo2 = qa[q].y & 0x0F0F0F0F, lo3 = qb[q].y & 0x0F0F0F0F;
            unsigned hi0 = (qa[q].x >> 4) & 0x0F0F0F0F, hi1 = (qb[q].x >> 4) & 0x0F0F0F0F;
            unsigned hi2 = (qa[q].y >> 4) & 0x0F0F0F0F, hi3 = (qb[q].y >> 4) & 0x0F0F0F0F;
#pragma unroll
            for (int j = 0; j < NT; j++) {
                int cl[4] = {0, 0, 0, 0}, ch[4] = {0, 0, 0, 0};
                mma_s8(cl, lo0, lo1, lo2, lo3, xl[j].x, xl[j].y);
                mma_s8(ch, hi0, hi1, hi2, hi3, xh[j].x, xh[j].y);
                int slo = hi ? (odd ? cl[3] : cl[2]) : (odd ? cl[1] : cl[0]);
                int shi = hi ? (odd ? ch[3] : ch[2]) : (odd ? ch[1] : ch[0]);
                acc[q][j] = __fadd_rn(acc[q][j], q4k_term(d, dmin, sc0, m0, sc1, m1, dlo[j], dhi[j], slo, shi));
            }
        }
    }
#pragma unroll
    for (int q = 0; q < 4; q++)
#pragma unroll
        for (int j = 0; j < NT; j++) part[4 * warp + p][(4 * q + (g >> 1)) * NC + 2 * j + (t >> 1)] = acc[q][j];
    mvx_sum<NO>(part, row0, rows, NC, nb, y, ystride, accumulate);
}

// mvx_q6_k: Q6_K products of 2 to 8*NT rows in decode's order (dot_q6_k).
// Decode's lane L = 8*k0 + 4*h + c takes, of blocks k0, k0+4, ..., half h
// and in each of that half's four groups the quarter c (values 8c..8c+7),
// and adds the four quarters' scaled integer sums into a block term. An mma
// sums all 32 values of a group, so each quarter gets an mma of its own
// whose weights are zero outside it: a lane of the mma holds values
// 8t..8t+7 of its rows (the k order of mvx_q4_k), so the mma of quarter c
// takes the weights of lane t == c and zeros from the other three. Warp
// w = 2*k0 + h keeps decode lane 4*w + c's partials; mvx_sum adds them.
// 16 weight rows a block, rows 2-byte aligned; grid (ceil(rows/16), jobs).
template <int NT>
__device__ void mvx_q6_k(const u8* __restrict__ w, long long wstride, float* __restrict__ y, long long ystride,
                         int rows, const signed char* __restrict__ xq, const float2* __restrict__ xd, int n, int nb,
                         int accumulate) {
    MvxTile<1, NT> b;
    if (!b.start(w, wstride, rows, nb)) return;
    const int t = b.t, P = b.P, k0 = b.warp >> 1, h = b.warp & 1;
    int nblk = n >> 8;
    for (int k = k0; k < nblk; k += 4) {
        int q[2][4][2]; // [row g, g+8][group of the half][values 8t..+3, 8t+4..+7]
        float s4[2][8]; // the half's eight 16-value scales times d
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const u8* blkp = b.wr[0][r] + 210 * (size_t)k;
            const u8* ql = blkp + 64 * h + 8 * t;
            const u8* qh = blkp + 128 + 32 * h + 8 * t;
            q6k_quants(ql, qh, q[r]);
            unsigned sw[2] = {ld32(blkp + 192 + 8 * h), ld32(blkp + 196 + 8 * h)};
            float d = ldh(blkp + 208);
#pragma unroll
            for (int m = 0; m < 8; m++) s4[r][m] = __fmul_rn(d, (float)(signed char)(sw[m >> 2] >> (8 * (m & 3))));
        }
        float a[NT][4][4];
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int c = 0; c < 4; c++)
#pragma unroll
                for (int e = 0; e < 4; e++) a[j][c][e] = 0.f;
        int g0 = 8 * k + 4 * h;
#pragma unroll
        for (int i = 0; i < 4; i++) { // group g0 + i
            uint2 xv[NT];
            float4 xs[NT];
#pragma unroll
            for (int j = 0; j < NT; j++) {
                xv[j] = __ldg((const uint2*)(xq + q8_off(g0 + i, b.bcol[j], P) + 8 * t));
                xs[j] = __ldg((const float4*)(xd + q8_sc(g0 + i, b.scol[j], P)));
            }
#pragma unroll
            for (int c = 0; c < 4; c++) {
                bool mine = t == c;
                unsigned a0 = mine ? q[0][i][0] : 0, a1 = mine ? q[1][i][0] : 0;
                unsigned a2 = mine ? q[0][i][1] : 0, a3 = mine ? q[1][i][1] : 0;
#pragma unroll
                for (int j = 0; j < NT; j++) {
                    int sum[4] = {0, 0, 0, 0};
                    mma_s8(sum, a0, a1, a2, a3, xv[j].x, xv[j].y);
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        float x = (e & 1) ? xs[j].z : xs[j].x;
                        a[j][c][e] = __fmaf_rn(__fmul_rn(s4[e >> 1][2 * i + (c >> 1)], x), (float)sum[e], a[j][c][e]);
                    }
                }
            }
        }
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int c = 0; c < 4; c++) // decode lane 4*warp + c
#pragma unroll
                for (int e = 0; e < 4; e++) b.acc[0][c][j][e] = __fadd_rn(b.acc[0][c][j][e], a[j][c][e]);
    }
    b.finish(y, ystride, rows, nb, accumulate);
}

// mvxp_q6_k: Q6_K products of 2 to 2*NT rows in decode's order, as
// mvx_q6_k computes them, with one mma a group where mvx_q6_k has four.
// Decode's four lanes c of a half split each group into quarters (values
// 8c..8c+7), and a lane t of an mma fragment holds exactly values 8t..8t+7
// of every row and column (the k order of mvx_q4_k): so the weight rows
// go in whole, and column c' of each two-row batch tile (columns 4b + c')
// holds batch row b's activations of quarter c' alone, zeros elsewhere.
// Output (row, 4b + c') is then quarter c''s integer sum, decode lane
// 4*warp + c''s for that row and batch row: all 16 x 8 outputs are used,
// where mvx_q6_k's quarter mmas use a quarter each. The float steps stay
// dot_q6_k's, per output: fma(s4 * xs, sum, a) over the half's four
// groups, then acc + a. 16 weight rows a block, warps as in mvx_q6_k
// (w = 2*k0 + h); rows 2-byte aligned; grid (ceil(rows/16), jobs).
template <int NT>
__device__ void mvxp_q6_k(const u8* __restrict__ w, long long wstride, float* __restrict__ y, long long ystride,
                          int rows, const signed char* __restrict__ xq, const float2* __restrict__ xd, int n, int nb,
                          int accumulate) {
    constexpr int NC = 2 * NT, NO = 16 * NC;
    __shared__ float part[32][NO + 1];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int row0 = blockIdx.x * 16;
    if (row0 >= rows) return;
    const int P = q8_pitch(nb), k0 = warp >> 1, h = warp & 1, odd = t & 1;
    const bool mine = t == (g & 3); // this lane's slot of B column g is the column's quarter
    const u8* wr[2] = {w + (size_t)min(row0 + g, rows - 1) * wstride, w + (size_t)min(row0 + g + 8, rows - 1) * wstride};
    int bn[NT], bl[NT]; // batch rows of the B column g and of the lane's outputs
#pragma unroll
    for (int j = 0; j < NT; j++) {
        bn[j] = min(2 * j + (g >> 2), nb - 1);
        bl[j] = min(2 * j + (t >> 1), nb - 1);
    }
    float acc[NT][4];
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) acc[j][e] = 0.f;
    const int nblk = n >> 8;
    for (int k = k0; k < nblk; k += 4) {
        int q[2][4][2]; // [row g, g+8][group of the half][values 8t..+3, 8t+4..+7]
        float s4[2][4]; // d times the 16-value scale of quarters 2*odd, 2*odd+1 in each group
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const u8* blkp = wr[r] + 210 * (size_t)k;
            const u8* ql = blkp + 64 * h + 8 * t;
            const u8* qh = blkp + 128 + 32 * h + 8 * t;
            q6k_quants(ql, qh, q[r]);
            unsigned sw[2] = {ld32(blkp + 192 + 8 * h), ld32(blkp + 196 + 8 * h)};
            float d = ldh(blkp + 208);
            // scale 2i + odd of the half: byte 2*(i&1) + odd of word i>>1
#pragma unroll
            for (int i = 0; i < 4; i++)
                s4[r][i] = __fmul_rn(d, (float)(signed char)(sw[i >> 1] >> (16 * (i & 1) + 8 * odd)));
        }
        float a[NT][4];
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) a[j][e] = 0.f;
        const int g0 = 8 * k + 4 * h;
#pragma unroll
        for (int i = 0; i < 4; i++) { // group g0 + i
#pragma unroll
            for (int j = 0; j < NT; j++) {
                uint2 xv = make_uint2(0, 0);
                if (mine) xv = __ldg((const uint2*)(xq + q8_off(g0 + i, bn[j], P) + 8 * t));
                float xs = __ldg(xd + q8_sc(g0 + i, bl[j], P)).x;
                int sum[4] = {0, 0, 0, 0};
                mma_s8(sum, q[0][i][0], q[1][i][0], q[0][i][1], q[1][i][1], xv.x, xv.y);
                float f[2] = {__fmul_rn(s4[0][i], xs), __fmul_rn(s4[1][i], xs)};
#pragma unroll
                for (int e = 0; e < 4; e++) a[j][e] = __fmaf_rn(f[e >> 1], (float)sum[e], a[j][e]);
            }
        }
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[j][e] = __fadd_rn(acc[j][e], a[j][e]);
    }
    // element e: row g + 8*(e>>1), column 2t + (e&1): quarter 2*odd + (e&1), batch row t>>1 of the tile
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            part[4 * warp + 2 * odd + (e & 1)][(g + 8 * (e >> 1)) * NC + 2 * j + (t >> 1)] = acc[j][e];
    mvx_sum<NO>(part, row0, rows, NC, nb, y, ystride, accumulate);
}

// mvx_q8_0: Q8_0 products of 2 to 8*NT rows in decode's order (dot_q8_0,
// whose lane L takes blocks L, L+32, ...: one mma a block, no zeros).
// Warp w takes blocks 32*i + 4*w + u, u < 4, and keeps decode lane
// 4*w + u's partials; mvx_sum adds them. 16 weight rows a block, rows
// 2-byte aligned; grid (ceil(rows/16), jobs).
template <int NT>
__device__ void mvx_q8_0(const u8* __restrict__ w, long long wstride, float* __restrict__ y, long long ystride,
                         int rows, const signed char* __restrict__ xq, const float2* __restrict__ xd, int n, int nb,
                         int accumulate) {
    MvxTile<1, NT> b;
    if (!b.start(w, wstride, rows, nb)) return;
    const int t = b.t, P = b.P;
    int nblk = n >> 5;
    for (int k = 4 * b.warp; k < nblk; k += 32) {
        unsigned q[2][4][2];
        float d[2][4];
#pragma unroll
        for (int r = 0; r < 2; r++)
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const u8* blkp = b.wr[0][r] + 34 * (size_t)min(k + u, nblk - 1);
                d[r][u] = ldh(blkp);
                q[r][u][0] = ld32(blkp + 2 + 8 * t);
                q[r][u][1] = ld32(blkp + 6 + 8 * t);
            }
#pragma unroll
        for (int u = 0; u < 4; u++) { // decode lane 4*warp + u
            if (k + u >= nblk) break;
#pragma unroll
            for (int j = 0; j < NT; j++) {
                uint2 xv = __ldg((const uint2*)(xq + q8_off(k + u, b.bcol[j], P) + 8 * t));
                float4 xs = __ldg((const float4*)(xd + q8_sc(k + u, b.scol[j], P)));
                int sum[4] = {0, 0, 0, 0};
                mma_s8(sum, q[0][u][0], q[1][u][0], q[0][u][1], q[1][u][1], xv.x, xv.y);
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    float x = (e & 1) ? xs.z : xs.x;
                    b.acc[0][u][j][e] = __fmaf_rn(__fmul_rn(d[e >> 1][u], x), (float)sum[e], b.acc[0][u][j][e]);
                }
            }
        }
    }
    b.finish(y, ystride, rows, nb, accumulate);
}

// Entry points. Strides are in bytes for W and in elements for X and Y.
// mv_<type>_<NB>: generic F32-activation kernels for every weight type.
#define MV_GENERIC(T, name, NB)                                                                   \
    extern "C" __global__ void __launch_bounds__(32 * MV_WARPS)                                   \
        mv_##name##_##NB(const u8* w, long long wstride, const float* x, long long xstride,      \
                         float* y, long long ystride, int rows, int n, int nb, int accumulate) { \
        grid_dep_begin();                                                                       \
        mv_generic<T, NB>(w, wstride, x, xstride, y, ystride, rows, n, nb, accumulate);         \
    }
#define MV_GENERIC_ALL(T, name) MV_GENERIC(T, name, 1) MV_GENERIC(T, name, 2) MV_GENERIC(T, name, 4) MV_GENERIC(T, name, 8)
FOR_EACH_WEIGHT_TYPE(MV_GENERIC_ALL)


// mvv_f16_<NB>: F16 weights in 16-byte vectors, F32 activations, a
// weight row per warp; mvv2_f16_<NB>: two (grid ceil(rows/(2*MV_WARPS))).
#define MV_F16VEC(NB)                                                                          \
    extern "C" __global__ void __launch_bounds__(32 * MV_WARPS)                                \
        mvv_f16_##NB(JOBS_PARAMS, const float* x, long long xstride, int n, int nb, int accumulate) {    \
        grid_dep_begin();                                                                      \
        PICK_JOB                                                                               \
        mv_f16_vec<NB, 1>(w, wstride, x, xstride, y, ystride, rows, n, nb, accumulate);        \
    }                                                                                          \
    extern "C" __global__ void __launch_bounds__(32 * MV_WARPS)                                \
        mvv2_f16_##NB(JOBS_PARAMS, const float* x, long long xstride, int n, int nb, int accumulate) {    \
        grid_dep_begin();                                                                      \
        PICK_JOB                                                                               \
        mv_f16_vec<NB, 2>(w, wstride, x, xstride, y, ystride, rows, n, nb, accumulate);        \
    }
MV_F16VEC(1) MV_F16VEC(2) MV_F16VEC(4) MV_F16VEC(8)

// mvq_<type>_<NB>: integer kernels on quantize_q8 output, a weight row
// per warp; mvq2_<type>_<NB>: two (grid ceil(rows/(2*MV_WARPS))).
#define MV_Q8(T, name, NB)                                                                     \
    extern "C" __global__ void __launch_bounds__(32 * MV_WARPS)                                \
        mvq_##name##_##NB(JOBS_PARAMS, const signed char* xq, const float2* xd, int n, int nb,    \
                          int accumulate) {                                                    \
        grid_dep_begin();                                                                      \
        PICK_JOB                                                                               \
        mvq<T, NB, 1>(w, wstride, xq, xd, y, ystride, rows, n, nb, accumulate);                \
    }                                                                                          \
    extern "C" __global__ void __launch_bounds__(32 * MV_WARPS)                                \
        mvq2_##name##_##NB(JOBS_PARAMS, const signed char* xq, const float2* xd, int n, int nb,    \
                           int accumulate) {                                                   \
        grid_dep_begin();                                                                      \
        PICK_JOB                                                                               \
        mvq<T, NB, 2>(w, wstride, xq, xd, y, ystride, rows, n, nb, accumulate);                \
    }
// mvq_glu_<type>_<NB>: gate, up and SwiGLU quantized (mvq_glu); grid
// ceil(rows/MV_WARPS).
#define MV_GLU(T, name, NB)                                                                          \
    extern "C" __global__ void __launch_bounds__(32 * MV_WARPS) mvq_glu_##name##_##NB(               \
        const u8* wg, long long wgs, float* yg, long long ygs, const u8* wu, long long wus, float* yu, \
        long long yus, float* y, long long ys, int rows, const signed char* xq, const float2* xd, int n, \
        int nb, signed char* oq, float2* od, int* counters) {                                             \
        grid_dep_begin();                                                                                 \
        mvq_glu<T, NB>(wg, wgs, yg, ygs, wu, wus, yu, yus, y, ys, rows, xq, xd, n, nb, oq, od, counters); \
    }
// mvx_q4_k_<R>: mvx_q4_k for up to R rows, 16 weight rows a block;
// mvx2_q4_k_8: 32 (grid ceil(rows/32)). The 8-row kernel is held to 128
// registers so that two blocks share a multiprocessor.
#define MVX(name, MT, NT, R, MINB)                                                                           \
    extern "C" __global__ void __launch_bounds__(32 * MVX_WARPS, MINB)                                       \
        name##_q4_k_##R(JOBS_PARAMS, const signed char* xq, const float2* xd, int n, int nb, int accumulate) {    \
        grid_dep_begin();                                                                                    \
        PICK_JOB                                                                                             \
        mvx_q4_k<MT, NT>(w, wstride, y, ystride, rows, xq, xd, n, nb, accumulate);                          \
    }
MVX(mvx, 1, 1, 8, 2) MVX(mvx, 1, 2, 16, 1) MVX(mvx2, 2, 1, 8, 1)
// mvxp_q4_k_<R>: mvxp_q4_k for up to R rows (2 or 4). Three blocks a
// multiprocessor at 2 rows (80 registers) keep a block's 16 loads in one
// round trip; mvxp4_q4_k_2 (benchmarks) takes four, at 64 registers, and
// ptxas splits the loads into three round trips.
#define MVXP(name, NT, R, MINB)                                                                              \
    extern "C" __global__ void __launch_bounds__(32 * MVX_WARPS, MINB)                                       \
        name##_q4_k_##R(JOBS_PARAMS, const signed char* xq, const float2* xd, int n, int nb, int accumulate) { \
        grid_dep_begin();                                                                                    \
        PICK_JOB                                                                                             \
        mvxp_q4_k<NT>(w, wstride, y, ystride, rows, xq, xd, n, nb, accumulate);                             \
    }
MVXP(mvxp, 1, 2, 3) MVXP(mvxp, 2, 4, 2) MVXP(mvxp4, 1, 2, 4)
// mvxp_q6_k_<R>: mvxp_q6_k for up to R rows (4 or 8; the 2-row kernel lost
// to the matrix-vector kernels: NOTES.md, hrow2's calls).
#define MVXP6(NT, R, MINB)                                                                                   \
    extern "C" __global__ void __launch_bounds__(32 * MVX_WARPS, MINB)                                       \
        mvxp_q6_k_##R(JOBS_PARAMS, const signed char* xq, const float2* xd, int n, int nb, int accumulate) {  \
        grid_dep_begin();                                                                                    \
        PICK_JOB                                                                                             \
        mvxp_q6_k<NT>(w, wstride, y, ystride, rows, xq, xd, n, nb, accumulate);                             \
    }
MVXP6(2, 4, 4) MVXP6(4, 8, 2)
// mvx_q6_k_<R>, mvx_q8_0_<R>: mvx_q6_k and mvx_q8_0 for up to R rows.
#define MVX_NT(type, NT, R, MINB)                                                                            \
    extern "C" __global__ void __launch_bounds__(32 * MVX_WARPS, MINB)                                       \
        mvx_##type##_##R(JOBS_PARAMS, const signed char* xq, const float2* xd, int n, int nb, int accumulate) {    \
        grid_dep_begin();                                                                                    \
        PICK_JOB                                                                                             \
        mvx_##type<NT>(w, wstride, y, ystride, rows, xq, xd, n, nb, accumulate);                             \
    }
MVX_NT(q6_k, 1, 8, 2) MVX_NT(q6_k, 2, 16, 1) MVX_NT(q8_0, 1, 8, 2) MVX_NT(q8_0, 2, 16, 1)

#define MV_Q8_ALL(T, name) \
    MV_Q8(T, name, 1) MV_Q8(T, name, 2) MV_Q8(T, name, 4) MV_Q8(T, name, 8) \
    MV_GLU(T, name, 1) MV_GLU(T, name, 2) MV_GLU(T, name, 4) MV_GLU(T, name, 8)
MV_Q8_ALL(T_Q8_0, q8_0) MV_Q8_ALL(T_Q4_K, q4_k) MV_Q8_ALL(T_Q6_K, q6_k)

// rms_norm_q8: rms_norm that also leaves its output quantized for the
// integer matrix-vector kernels (n a multiple of 32). One block per row,
// one warp per group of 32 values (blockDim.x = 32 * min(groups, 32)):
// each thread loads its values of the row and of the weights at the start,
// all in one round trip, and keeps them in registers while the block sums
// the squares; then every warp scales and quantizes its groups. Groups
// beyond NORM_REGS per warp (rows over 4096 wide) are read twice. In place
// (y == x) is safe: a warp writes only the groups it read.
#define NORM_REGS 4
extern "C" __global__ void __launch_bounds__(1024)
    rms_norm_q8(const float* x, long long xstride, const float* __restrict__ w, float* y, long long ystride, int n,
                float eps, signed char* __restrict__ xq, float2* __restrict__ xd) {
    grid_dep_begin();
    __shared__ float scratch[32];
    int row = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    int groups = n >> 5, P = q8_pitch(gridDim.x);
    const float* xr = x + row * xstride;
    float* yr = y + row * ystride;
    float xv[NORM_REGS], wv[NORM_REGS];
#pragma unroll
    for (int k = 0; k < NORM_REGS; k++) {
        int g = warp + k * nw;
        xv[k] = g < groups ? xr[32 * g + lane] : 0.f;
        wv[k] = g < groups ? __ldg(w + 32 * g + lane) : 0.f;
    }
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < NORM_REGS; k++) s += xv[k] * xv[k];
    for (int g = warp + NORM_REGS * nw; g < groups; g += nw) {
        float t = xr[32 * g + lane];
        s += t * t;
    }
    s = block_sum(s, scratch);
    float r = rsqrtf(s / n + eps);
#pragma unroll
    for (int k = 0; k < NORM_REGS; k++) {
        int g = warp + k * nw;
        if (g < groups) {
            float v = xv[k] * r * wv[k];
            yr[32 * g + lane] = v;
            quantize_group(v, xq + q8_off(g, row, P), xd + q8_sc(g, row, P));
        }
    }
    for (int g = warp + NORM_REGS * nw; g < groups; g += nw) {
        int i = 32 * g + lane;
        float v = xr[i] * r * w[i];
        yr[i] = v;
        quantize_group(v, xq + q8_off(g, row, P), xd + q8_sc(g, row, P));
    }
}

// swiglu_q8: swiglu that also leaves its output quantized; grid
// (ceil(groups/8), rows), 256 threads, one warp per group of 32.
extern "C" __global__ void swiglu_q8(const float* g, long long gstride, const float* u, long long ustride,
                                     float* y, long long ystride, int n, signed char* __restrict__ xq,
                                     float2* __restrict__ xd) {
    grid_dep_begin();
    int r = blockIdx.y, grp = blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (grp >= (n >> 5)) return;
    int i = 32 * grp + lane;
    float a = g[r * gstride + i];
    float v = silu_mul(a, u[r * ustride + i]);
    y[r * ystride + i] = v;
    int P = q8_pitch(gridDim.y);
    quantize_group(v, xq + q8_off(grp, r, P), xd + q8_sc(grp, r, P));
}
