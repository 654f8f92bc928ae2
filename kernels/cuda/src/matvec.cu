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

// Activations quantized for the integer kernels: for each row b of X,
// n int8 values at xq + b*n and n/32 pairs (d, d*sum(q)) at xd + b*n/32.
extern "C" __global__ void quantize_q8(const float* __restrict__ x, long long xstride,
                                       signed char* __restrict__ xq, float2* __restrict__ xd,
                                       int n, int rows) {
    int gw = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    int groups = n >> 5;
    if (gw >= groups * rows) return;
    int b = gw / groups, g = gw % groups;
    float v = x[b * xstride + 32 * g + lane];
    float amax = warp_max(fabsf(v));
    float d = amax / 127.f;
    int q = amax == 0.f ? 0 : __float2int_rn(v / d);
    xq[(size_t)b * n + 32 * g + lane] = (signed char)q;
    float s = warp_sum((float)q);
    if (lane == 0) xd[(size_t)b * groups + g] = make_float2(d, d * s);
}

// Generic: dequantize 32 weights, dot with F32 activations.
template <int T, int NB>
__device__ void mv_generic(const u8* __restrict__ w, long long wstride, const float* __restrict__ x,
                           long long xstride, float* __restrict__ y, long long ystride, int rows,
                           int n, int nb, int accumulate) {
    int row = blockIdx.x * MV_WARPS + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= rows) return;
    const u8* wr = w + (size_t)row * wstride;
    float acc[NB];
#pragma unroll
    for (int b = 0; b < NB; b++) acc[b] = 0.f;
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
                acc[b] += s;
            }
        }
    }
#pragma unroll
    for (int b = 0; b < NB; b++) {
        float s = warp_sum(acc[b]);
        if (lane == 0 && b < nb) {
            float* out = y + b * ystride + row;
            *out = accumulate ? *out + s : s;
        }
    }
}

// F16 weights in 16-byte vectors (rows 16-byte aligned, n % 8 == 0).
template <int NB>
__device__ void mv_f16_vec(const u8* __restrict__ w, long long wstride, const float* __restrict__ x,
                           long long xstride, float* __restrict__ y, long long ystride, int rows,
                           int n, int nb, int accumulate) {
    int row = blockIdx.x * MV_WARPS + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= rows) return;
    const uint4* wr = (const uint4*)(w + (size_t)row * wstride);
    float acc[NB];
#pragma unroll
    for (int b = 0; b < NB; b++) acc[b] = 0.f;
#pragma unroll 2
    for (int i = lane; i < (n >> 3); i += 32) {
        uint4 q = __ldg(wr + i);
        const __half2* h = (const __half2*)&q;
        float2 f0 = __half22float2(h[0]), f1 = __half22float2(h[1]);
        float2 f2 = __half22float2(h[2]), f3 = __half22float2(h[3]);
#pragma unroll
        for (int b = 0; b < NB; b++) {
            if (b < nb) {
                const float4* xv = (const float4*)(x + b * xstride) + 2 * i;
                float4 a = __ldg(xv), c = __ldg(xv + 1);
                acc[b] += f0.x * a.x + f0.y * a.y + f1.x * a.z + f1.y * a.w +
                          f2.x * c.x + f2.y * c.y + f3.x * c.z + f3.y * c.w;
            }
        }
    }
#pragma unroll
    for (int b = 0; b < NB; b++) {
        float s = warp_sum(acc[b]);
        if (lane == 0 && b < nb) {
            float* out = y + b * ystride + row;
            *out = accumulate ? *out + s : s;
        }
    }
}

// Q8_0 x q8: one lane per 32-weight block.
template <int NB>
__device__ void mv_q8_0_dp4a(const u8* __restrict__ w, long long wstride, const signed char* __restrict__ xq,
                             const float2* __restrict__ xd, float* __restrict__ y, long long ystride,
                             int rows, int n, int nb, int accumulate) {
    int row = blockIdx.x * MV_WARPS + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= rows) return;
    const u8* wr = w + (size_t)row * wstride;
    int nblk = n >> 5;
    float acc[NB];
#pragma unroll
    for (int b = 0; b < NB; b++) acc[b] = 0.f;
#pragma unroll 2
    for (int k = lane; k < nblk; k += 32) {
        const u8* blkp = wr + 34 * (size_t)k;
        float d = ldh(blkp);
        int q[8];
#pragma unroll
        for (int i = 0; i < 8; i++) q[i] = (int)ld32(blkp + 2 + 4 * i);
#pragma unroll
        for (int b = 0; b < NB; b++) {
            if (b < nb) {
                const int4* xv = (const int4*)(xq + (size_t)b * n + 32 * k);
                int4 a = __ldg(xv), c = __ldg(xv + 1);
                int s = __dp4a(q[0], a.x, 0);
                s = __dp4a(q[1], a.y, s); s = __dp4a(q[2], a.z, s); s = __dp4a(q[3], a.w, s);
                s = __dp4a(q[4], c.x, s); s = __dp4a(q[5], c.y, s); s = __dp4a(q[6], c.z, s);
                s = __dp4a(q[7], c.w, s);
                acc[b] += d * __ldg(xd + (size_t)b * nblk + k).x * (float)s;
            }
        }
    }
#pragma unroll
    for (int b = 0; b < NB; b++) {
        float s = warp_sum(acc[b]);
        if (lane == 0 && b < nb) {
            float* out = y + b * ystride + row;
            *out = accumulate ? *out + s : s;
        }
    }
}

// Q4_K x q8: four lanes per 256-weight block, each lane 64 weights (32
// bytes of nibbles, two 16-byte loads) and the block's 16-byte header.
// Rows must be 16-byte aligned.
template <int NB>
__device__ void mv_q4_k_dp4a(const u8* __restrict__ w, long long wstride, const signed char* __restrict__ xq,
                             const float2* __restrict__ xd, float* __restrict__ y, long long ystride,
                             int rows, int n, int nb, int accumulate) {
    int row = blockIdx.x * MV_WARPS + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= rows) return;
    const u8* wr = w + (size_t)row * wstride;
    int nblk = n >> 8, p = lane & 3;
    float acc[NB];
#pragma unroll
    for (int b = 0; b < NB; b++) acc[b] = 0.f;
#pragma unroll 2
    for (int k = lane >> 2; k < nblk; k += 8) {
        const u8* blkp = wr + 144 * (size_t)k;
        uint4 hdr = __ldg((const uint4*)blkp);
        uint4 q0 = __ldg((const uint4*)(blkp + 16 + 32 * p));
        uint4 q1 = __ldg((const uint4*)(blkp + 32 + 32 * p));
        float d = h2f(hdr.x & 0xFFFF), dmin = h2f(hdr.x >> 16);
        float sc0, m0, sc1, m1;
        k4_scale_hdr(hdr, 2 * p, &sc0, &m0);
        k4_scale_hdr(hdr, 2 * p + 1, &sc1, &m1);
        int qw[8] = {(int)q0.x, (int)q0.y, (int)q0.z, (int)q0.w, (int)q1.x, (int)q1.y, (int)q1.z, (int)q1.w};
        int g = 8 * k + 2 * p; // activation group of the low nibbles
#pragma unroll
        for (int b = 0; b < NB; b++) {
            if (b < nb) {
                const int4* xv = (const int4*)(xq + (size_t)b * n + 32 * g);
                int4 a0 = __ldg(xv), a1 = __ldg(xv + 1), c0 = __ldg(xv + 2), c1 = __ldg(xv + 3);
                int xa[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
                int xc[8] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
                int slo = 0, shi = 0;
#pragma unroll
                for (int i = 0; i < 8; i++) {
                    slo = __dp4a(qw[i] & 0x0F0F0F0F, xa[i], slo);
                    shi = __dp4a((qw[i] >> 4) & 0x0F0F0F0F, xc[i], shi);
                }
                float2 dlo = __ldg(xd + (size_t)b * (n >> 5) + g), dhi = __ldg(xd + (size_t)b * (n >> 5) + g + 1);
                acc[b] += d * (sc0 * dlo.x * slo + sc1 * dhi.x * shi) - dmin * (m0 * dlo.y + m1 * dhi.y);
            }
        }
    }
#pragma unroll
    for (int b = 0; b < NB; b++) {
        float s = warp_sum(acc[b]);
        if (lane == 0 && b < nb) {
            float* out = y + b * ystride + row;
            *out = accumulate ? *out + s : s;
        }
    }
}

// Q6_K x q8: eight lanes per 256-weight block; lane part t covers l-values
// 8*(t&3)..+8 of half t>>2 in all four quarter rows (32 weights).
template <int NB>
__device__ void mv_q6_k_dp4a(const u8* __restrict__ w, long long wstride, const signed char* __restrict__ xq,
                             const float2* __restrict__ xd, float* __restrict__ y, long long ystride,
                             int rows, int n, int nb, int accumulate) {
    int row = blockIdx.x * MV_WARPS + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= rows) return;
    const u8* wr = w + (size_t)row * wstride;
    int nblk = n >> 8, t = lane & 7, h = t >> 2, l0 = 8 * (t & 3);
    float acc[NB];
#pragma unroll
    for (int b = 0; b < NB; b++) acc[b] = 0.f;
#pragma unroll 2
    for (int k = lane >> 3; k < nblk; k += 4) {
        const u8* blkp = wr + 210 * (size_t)k;
        const u8* ql = blkp + 64 * h + l0;
        const u8* qh = blkp + 128 + 32 * h + l0;
        const signed char* sc = (const signed char*)(blkp + 192) + 8 * h + (l0 >> 4);
        float d = ldh(blkp + 208);
        int la[2] = {(int)ld32(ql), (int)ld32(ql + 4)};
        int lb[2] = {(int)ld32(ql + 32), (int)ld32(ql + 36)};
        int hh[2] = {(int)ld32(qh), (int)ld32(qh + 4)};
        int q[4][2];
#pragma unroll
        for (int i = 0; i < 2; i++) {
            q[0][i] = __vsubss4((la[i] & 0x0F0F0F0F) | ((hh[i] << 4) & 0x30303030), 0x20202020);
            q[1][i] = __vsubss4((lb[i] & 0x0F0F0F0F) | ((hh[i] << 2) & 0x30303030), 0x20202020);
            q[2][i] = __vsubss4(((la[i] >> 4) & 0x0F0F0F0F) | (hh[i] & 0x30303030), 0x20202020);
            q[3][i] = __vsubss4(((lb[i] >> 4) & 0x0F0F0F0F) | ((hh[i] >> 2) & 0x30303030), 0x20202020);
        }
        float s4[4] = {d * sc[0], d * sc[2], d * sc[4], d * sc[6]};
        int g0 = 8 * k + 4 * h;
#pragma unroll
        for (int b = 0; b < NB; b++) {
            if (b < nb) {
                float a = 0.f;
#pragma unroll
                for (int r = 0; r < 4; r++) {
                    const int2 xv = __ldg((const int2*)(xq + (size_t)b * n + 32 * (g0 + r) + l0));
                    int s = __dp4a(q[r][0], xv.x, 0);
                    s = __dp4a(q[r][1], xv.y, s);
                    a += s4[r] * __ldg(xd + (size_t)b * (n >> 5) + g0 + r).x * (float)s;
                }
                acc[b] += a;
            }
        }
    }
#pragma unroll
    for (int b = 0; b < NB; b++) {
        float s = warp_sum(acc[b]);
        if (lane == 0 && b < nb) {
            float* out = y + b * ystride + row;
            *out = accumulate ? *out + s : s;
        }
    }
}

// Entry points. Strides are in bytes for W and in elements for X and Y.
// mv_<type>_<NB>: generic F32-activation kernels for every weight type.
#define MV_GENERIC(T, name, NB)                                                                   \
    extern "C" __global__ void __launch_bounds__(32 * MV_WARPS)                                   \
        mv_##name##_##NB(const u8* w, long long wstride, const float* x, long long xstride,      \
                         float* y, long long ystride, int rows, int n, int nb, int accumulate) { \
        mv_generic<T, NB>(w, wstride, x, xstride, y, ystride, rows, n, nb, accumulate);         \
    }
#define MV_GENERIC_ALL(T, name) MV_GENERIC(T, name, 1) MV_GENERIC(T, name, 2) MV_GENERIC(T, name, 4) MV_GENERIC(T, name, 8)
FOR_EACH_WEIGHT_TYPE(MV_GENERIC_ALL)

// Jobs: up to three products that share their activations (Q, K and V;
// gate and up) run as one launch, blockIdx.y choosing the job.
#define MV_JOBS_PARAMS                                                                     \
    const u8 *w0, long long ws0, float *y0, long long ys0, int r0, const u8 *w1, long long ws1, \
        float *y1, long long ys1, int r1, const u8 *w2, long long ws2, float *y2, long long ys2, int r2
#define MV_PICK_JOB                                                              \
    const u8* w = blockIdx.y == 0 ? w0 : (blockIdx.y == 1 ? w1 : w2);            \
    long long wstride = blockIdx.y == 0 ? ws0 : (blockIdx.y == 1 ? ws1 : ws2);   \
    float* y = blockIdx.y == 0 ? y0 : (blockIdx.y == 1 ? y1 : y2);               \
    long long ystride = blockIdx.y == 0 ? ys0 : (blockIdx.y == 1 ? ys1 : ys2);   \
    int rows = blockIdx.y == 0 ? r0 : (blockIdx.y == 1 ? r1 : r2);

// mvv_f16_<NB>: F16 weights in 16-byte vectors, F32 activations.
#define MV_F16VEC(NB)                                                                          \
    extern "C" __global__ void __launch_bounds__(32 * MV_WARPS)                                \
        mvv_f16_##NB(MV_JOBS_PARAMS, const float* x, long long xstride, int n, int nb, int accumulate) { \
        MV_PICK_JOB                                                                            \
        mv_f16_vec<NB>(w, wstride, x, xstride, y, ystride, rows, n, nb, accumulate);           \
    }
MV_F16VEC(1) MV_F16VEC(2) MV_F16VEC(4) MV_F16VEC(8)

// mvq_<type>_<NB>: integer kernels on quantize_q8 output.
#define MV_Q8(name, NB)                                                                        \
    extern "C" __global__ void __launch_bounds__(32 * MV_WARPS)                                \
        mvq_##name##_##NB(MV_JOBS_PARAMS, const signed char* xq, const float2* xd, int n, int nb, \
                          int accumulate) {                                                    \
        MV_PICK_JOB                                                                            \
        mv_##name##_dp4a<NB>(w, wstride, xq, xd, y, ystride, rows, n, nb, accumulate);         \
    }
#define MV_Q8_ALL(name) MV_Q8(name, 1) MV_Q8(name, 2) MV_Q8(name, 4) MV_Q8(name, 8)
MV_Q8_ALL(q8_0) MV_Q8_ALL(q4_k) MV_Q8_ALL(q6_k)

// rms_norm_q8: rms_norm that also leaves its output quantized for the
// integer matrix-vector kernels (n a multiple of 32). Grid (rows, parts),
// 256 threads: every block sums the whole row (it is in L2) and then
// normalises and quantizes its share of the groups, one warp per group, so
// a single row spreads over several multiprocessors. In place (y == x) it
// needs parts = 1, or one block would overwrite what another still sums.
extern "C" __global__ void rms_norm_q8(const float* __restrict__ x, long long xstride, const float* __restrict__ w,
                                       float* __restrict__ y, long long ystride, int n, float eps,
                                       signed char* __restrict__ xq, float2* __restrict__ xd) {
    __shared__ float scratch[32];
    int row = blockIdx.x;
    const float* xr = x + row * xstride;
    float* yr = y + row * ystride;
    float s = 0.f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += xr[i] * xr[i];
    s = block_sum(s, scratch);
    float r = rsqrtf(s / n + eps);
    int lane = threadIdx.x & 31;
    for (int g = blockIdx.y * 8 + (threadIdx.x >> 5); g < (n >> 5); g += gridDim.y * 8) {
        int i = 32 * g + lane;
        float v = xr[i] * r * w[i];
        yr[i] = v;
        quantize_group(v, xq + (size_t)row * n + 32 * g, xd + (size_t)row * (n >> 5) + g);
    }
}

// swiglu_q8: swiglu that also leaves its output quantized; grid
// (ceil(groups/8), rows), 256 threads, one warp per group of 32.
extern "C" __global__ void swiglu_q8(const float* g, long long gstride, const float* u, long long ustride,
                                     float* y, long long ystride, int n, signed char* __restrict__ xq,
                                     float2* __restrict__ xd) {
    int r = blockIdx.y, grp = blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (grp >= (n >> 5)) return;
    int i = 32 * grp + lane;
    float a = g[r * gstride + i];
    float v = a / (1.f + __expf(-a)) * u[r * ustride + i];
    y[r * ystride + i] = v;
    quantize_group(v, xq + (size_t)r * n + 32 * grp, xd + (size_t)r * (n >> 5) + grp);
}
