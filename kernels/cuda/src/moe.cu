// Mixture-of-experts feed-forward (kernels.MoE: Qwen3 MoE, Mixtral), in
// six launches so that a captured graph serves any routing:
//
//	moe_logits_<router> per row, per expert: the router's logit
//	moe_topk            per row: softmax, the top experts (lower index
//	                    first on ties), their weights
//	moe_group           the routed (row, expert) pairs sorted by expert:
//	                    each expert's count and first slot, the experts
//	                    in use, and each pair's slot
//	moe_gate_up_<type>  per expert in use, per gate/up row: the products
//	                    of every pair routed to it, and their SwiGLU
//	moe_down_<type>     per expert in use, per down row, likewise
//	moe_sum             per row: the pairs' outputs weighted, in rank order
//
// The expert products take each expert's slice of the 3-D tensor (rows
// [e*ff, (e+1)*ff) of gate and up, [e*n, (e+1)*n) of down) and read it
// once for up to MOE_NB of its pairs at a time, so a batch whose rows
// share experts reads their weights once. Grids are sized for the most
// experts a batch can use (min(pairs, experts)); blocks past the experts
// in use exit at once, so decode runs the used experts' blocks only.
//
// A warp walks its weight row 32 elements at a time, lane l taking
// element l (dequant1), so that the weights' bytes and the F32
// activations are read in whole segments. The first version gave each
// lane a group of 32 (dequant32, as mv_generic does): lanes 128 bytes
// apart, each load instruction touched 32 segments, and a Qwen3-30B-A3B
// block took 347 us at one row (kernels/cuda/NOTES.md, hmoe's calls).
#include "common.cuh"

#define MOE_WARPS 4
#define MOE_NB 4

// dequant1 is element l (< 32) of group g of a row of type T.
template <int T> __device__ float dequant1(const u8* row, int g, int l);

template <> __device__ __forceinline__ float dequant1<T_F32>(const u8* row, int g, int l) {
    return ((const float*)row)[32 * g + l];
}
template <> __device__ __forceinline__ float dequant1<T_F16>(const u8* row, int g, int l) {
    return h2f(((const u16*)row)[32 * g + l]);
}
template <> __device__ __forceinline__ float dequant1<T_BF16>(const u8* row, int g, int l) {
    return bf2f(((const u16*)row)[32 * g + l]);
}
template <> __device__ __forceinline__ float dequant1<T_Q4_0>(const u8* row, int g, int l) {
    const u8* b = row + 18 * (size_t)g;
    int q = b[2 + (l & 15)];
    return ((l < 16 ? q & 0xF : q >> 4) - 8) * ldh(b);
}
template <> __device__ __forceinline__ float dequant1<T_Q4_1>(const u8* row, int g, int l) {
    const u8* b = row + 20 * (size_t)g;
    int q = b[4 + (l & 15)];
    return (l < 16 ? q & 0xF : q >> 4) * ldh(b) + ldh(b + 2);
}
template <> __device__ __forceinline__ float dequant1<T_Q5_0>(const u8* row, int g, int l) {
    const u8* b = row + 22 * (size_t)g;
    int q = b[6 + (l & 15)];
    int h = (ld32(b + 2) >> l) & 1;
    return (((l < 16 ? q & 0xF : q >> 4) | (h << 4)) - 16) * ldh(b);
}
template <> __device__ __forceinline__ float dequant1<T_Q5_1>(const u8* row, int g, int l) {
    const u8* b = row + 24 * (size_t)g;
    int q = b[8 + (l & 15)];
    int h = (ld32(b + 4) >> l) & 1;
    return ((l < 16 ? q & 0xF : q >> 4) | (h << 4)) * ldh(b) + ldh(b + 2);
}
template <> __device__ __forceinline__ float dequant1<T_Q8_0>(const u8* row, int g, int l) {
    const u8* b = row + 34 * (size_t)g;
    return (signed char)b[2 + l] * ldh(b);
}
template <> __device__ __forceinline__ float dequant1<T_IQ4_NL>(const u8* row, int g, int l) {
    const u8* b = row + 18 * (size_t)g;
    int q = b[2 + (l & 15)];
    return ldh(b) * kIQ4NL[l < 16 ? q & 0xF : q >> 4];
}
template <> __device__ __forceinline__ float dequant1<T_Q4_K>(const u8* row, int g, int l) {
    const u8* b = row + 144 * (size_t)(g >> 3);
    int j = g & 7;
    float sc, m;
    k4_scale(b + 4, j, &sc, &m);
    int q = (b[16 + 32 * (j >> 1) + l] >> (4 * (j & 1))) & 0xF;
    return ldh(b) * sc * q - ldh(b + 2) * m;
}
template <> __device__ __forceinline__ float dequant1<T_Q5_K>(const u8* row, int g, int l) {
    const u8* b = row + 176 * (size_t)(g >> 3);
    int j = g & 7;
    float sc, m;
    k4_scale(b + 4, j, &sc, &m);
    int q = ((b[48 + 32 * (j >> 1) + l] >> (4 * (j & 1))) & 0xF) + ((b[16 + l] >> j) & 1) * 16;
    return ldh(b) * sc * q - ldh(b + 2) * m;
}
template <> __device__ __forceinline__ float dequant1<T_Q6_K>(const u8* row, int g, int l) {
    const u8* b = row + 210 * (size_t)(g >> 3);
    int j = g & 7, h = j >> 2, r = j & 3;
    int ql = (b[64 * h + 32 * (r & 1) + l] >> (4 * (r >> 1))) & 0xF;
    int qh = (b[128 + 32 * h + l] >> (2 * r)) & 3;
    int sc = (signed char)b[192 + 8 * h + 2 * r + (l >> 4)];
    return ldh(b + 208) * sc * ((ql | (qh << 4)) - 32);
}

// FOR_EACH_MOE_TYPE(M) applies M(T, name) to the types with a dequant1.
#define FOR_EACH_MOE_TYPE(M) \
    M(T_F32, f32) M(T_F16, f16) M(T_BF16, bf16) M(T_Q4_0, q4_0) M(T_Q4_1, q4_1) M(T_Q5_0, q5_0) \
    M(T_Q5_1, q5_1) M(T_Q8_0, q8_0) M(T_IQ4_NL, iq4_nl) M(T_Q4_K, q4_k) M(T_Q5_K, q5_k) M(T_Q6_K, q6_k)

// moe_logits: grid (ceil(experts/8), rows), 8 warps a block, a warp an
// expert: logits[r*experts + e].
template <int T>
__device__ void moe_logits(const u8* __restrict__ w, long long wstride, const float* __restrict__ x,
                           long long xstride, int n, int experts, float* __restrict__ logits) {
    int e = blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31, r = blockIdx.y;
    if (e >= experts) return;
    const u8* wr = w + (size_t)e * wstride;
    const float* xr = x + r * xstride;
    float s = 0.f;
#pragma unroll 8
    for (int g = 0; g < (n >> 5); g++) s += dequant1<T>(wr, g, lane) * xr[32 * g + lane];
    s = warp_sum(s);
    if (lane == 0) logits[(size_t)r * experts + e] = s;
}

// moe_topk: one warp a row; dynamic shared memory holds the row's
// probabilities.
extern "C" __global__ void __launch_bounds__(32)
moe_topk(const float* __restrict__ logits, int experts, int used, int renorm, int* ids, float* wts) {
    grid_dep_begin();
    extern __shared__ float probs[];
    __shared__ int sid[64];
    __shared__ float swt[64];
    int r = blockIdx.x, lane = threadIdx.x;
    float m = -INFINITY;
    for (int e = lane; e < experts; e += 32) {
        probs[e] = logits[(size_t)r * experts + e];
        m = fmaxf(m, probs[e]);
    }
    m = warp_max(m);
    float sum = 0.f;
    for (int e = lane; e < experts; e += 32) {
        float p = expf(probs[e] - m);
        probs[e] = p;
        sum += p;
    }
    sum = warp_sum(sum);
    __syncwarp();
    for (int k = 0; k < used; k++) {
        // Probabilities are >= 0; a chosen expert is marked -1.
        float best = -INFINITY;
        int bi = 0x7fffffff;
        for (int e = lane; e < experts; e += 32) {
            float p = probs[e];
            if (p > best) best = p, bi = e;
        }
        for (int off = 16; off > 0; off >>= 1) {
            float ob = __shfl_xor_sync(0xffffffffu, best, off);
            int oi = __shfl_xor_sync(0xffffffffu, bi, off);
            if (ob > best || (ob == best && oi < bi)) best = ob, bi = oi;
        }
        if (lane == 0) {
            sid[k] = bi;
            swt[k] = best / sum;
            probs[bi] = -1.f;
        }
        __syncwarp();
    }
    if (lane == 0) {
        float total = 0.f;
        for (int k = 0; k < used; k++) total += swt[k];
        for (int k = 0; k < used; k++) {
            ids[r * used + k] = sid[k];
            wts[r * used + k] = renorm ? swt[k] / total : swt[k];
        }
    }
}

// moe_group: one block. count, first: per expert; active[0..*nactive)
// the experts in use, ascending; order: slot -> pair; slot: pair -> slot.
// Slots within an expert are taken in whatever order the atomics give:
// each pair's products are computed alone, so results do not depend on it.
extern "C" __global__ void __launch_bounds__(1024)
moe_group(const int* __restrict__ ids, int pairs, int experts, int* count, int* first, int* active,
          int* nactive, int* order, int* slot) {
    grid_dep_begin();
    extern __shared__ int cnt[];  // [experts] counts, then [experts] cursors
    int* cur = cnt + experts;
    for (int e = threadIdx.x; e < experts; e += blockDim.x) cnt[e] = 0;
    __syncthreads();
    for (int p = threadIdx.x; p < pairs; p += blockDim.x) atomicAdd(&cnt[ids[p]], 1);
    __syncthreads();
    if (threadIdx.x == 0) {
        int s = 0, a = 0;
        for (int e = 0; e < experts; e++) {
            cur[e] = s;
            first[e] = s;
            count[e] = cnt[e];
            if (cnt[e] > 0) active[a++] = e;
            s += cnt[e];
        }
        *nactive = a;
    }
    __syncthreads();
    for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
        int k = atomicAdd(&cur[ids[p]], 1);
        order[k] = p;
        slot[p] = k;
    }
}

// moe_gate_up: grid (ceil(ff/MOE_WARPS), most experts in use); a warp
// takes gate row and up row `row` of the block's expert for its pairs.
// estride is the bytes of one expert's ff rows.
template <int T>
__device__ void moe_gate_up(const u8* __restrict__ wg, const u8* __restrict__ wu, long long wstride,
                            long long estride, const float* __restrict__ x, long long xstride, int n, int ff,
                            int used, const int* __restrict__ count, const int* __restrict__ first,
                            const int* __restrict__ active, const int* __restrict__ nactive,
                            const int* __restrict__ order, float* __restrict__ act) {
    if ((int)blockIdx.y >= *nactive) return;
    int e = active[blockIdx.y];
    int row = blockIdx.x * MOE_WARPS + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= ff) return;
    const u8* gr = wg + e * estride + (size_t)row * wstride;
    const u8* ur = wu + e * estride + (size_t)row * wstride;
    int c = count[e], f0 = first[e];
    for (int k0 = 0; k0 < c; k0 += MOE_NB) {
        const float* xs[MOE_NB];
        float ag[MOE_NB], au[MOE_NB];
#pragma unroll
        for (int b = 0; b < MOE_NB; b++) {
            xs[b] = x + (size_t)(order[f0 + min(k0 + b, c - 1)] / used) * xstride + lane;
            ag[b] = au[b] = 0.f;
        }
#pragma unroll 8
        for (int g = 0; g < (n >> 5); g++) {
            float wgv = dequant1<T>(gr, g, lane), wuv = dequant1<T>(ur, g, lane);
#pragma unroll
            for (int b = 0; b < MOE_NB; b++) {
                if (k0 + b < c) {
                    float xv = __ldg(xs[b] + 32 * g);
                    ag[b] += wgv * xv;
                    au[b] += wuv * xv;
                }
            }
        }
#pragma unroll
        for (int b = 0; b < MOE_NB; b++) {
            float gs = warp_sum(ag[b]), us = warp_sum(au[b]);
            if (lane == 0 && k0 + b < c) act[(size_t)(f0 + k0 + b) * ff + row] = gs / (1.f + expf(-gs)) * us;
        }
    }
}

// moe_down: grid (ceil(n/MOE_WARPS), most experts in use); a warp takes
// down row `row` of the block's expert for its pairs.
template <int T>
__device__ void moe_down(const u8* __restrict__ wd, long long wstride, long long estride,
                         const float* __restrict__ act, int ff, int n, const int* __restrict__ count,
                         const int* __restrict__ first, const int* __restrict__ active,
                         const int* __restrict__ nactive, float* __restrict__ out) {
    if ((int)blockIdx.y >= *nactive) return;
    int e = active[blockIdx.y];
    int row = blockIdx.x * MOE_WARPS + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= n) return;
    const u8* dr = wd + e * estride + (size_t)row * wstride;
    int c = count[e], f0 = first[e];
    for (int k0 = 0; k0 < c; k0 += MOE_NB) {
        float acc[MOE_NB];
#pragma unroll
        for (int b = 0; b < MOE_NB; b++) acc[b] = 0.f;
#pragma unroll 8
        for (int g = 0; g < (ff >> 5); g++) {
            float wv = dequant1<T>(dr, g, lane);
#pragma unroll
            for (int b = 0; b < MOE_NB; b++)
                if (k0 + b < c) acc[b] += wv * act[(size_t)(f0 + k0 + b) * ff + 32 * g + lane];
        }
#pragma unroll
        for (int b = 0; b < MOE_NB; b++) {
            float s = warp_sum(acc[b]);
            if (lane == 0 && k0 + b < c) out[(size_t)(f0 + k0 + b) * n + row] = s;
        }
    }
}

// moe_sum: grid (ceil(n/256), rows). y may be the op's input (in place):
// every product has read it by now.
extern "C" __global__ void moe_sum(const float* __restrict__ outs, int n, int used, const int* __restrict__ slot,
                                   const float* __restrict__ wts, float* y, long long ystride) {
    grid_dep_begin();
    int i = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
    if (i >= n) return;
    float s = 0.f;
    for (int k = 0; k < used; k++) s += wts[r * used + k] * outs[(size_t)slot[r * used + k] * n + i];
    y[r * ystride + i] = s;
}

#define MOE_KERNELS(T, name)                                                                              \
    extern "C" __global__ void __launch_bounds__(256)                                                     \
        moe_logits_##name(const u8* w, long long wstride, const float* x, long long xstride, int n,        \
                          int experts, float* logits) {                                                    \
        grid_dep_begin();                                                                                 \
        moe_logits<T>(w, wstride, x, xstride, n, experts, logits);                                         \
    }                                                                                                     \
    extern "C" __global__ void __launch_bounds__(32 * MOE_WARPS)                                          \
        moe_gate_up_##name(const u8* wg, const u8* wu, long long wstride, long long estride,               \
                           const float* x, long long xstride, int n, int ff, int used, const int* count,    \
                           const int* first, const int* active, const int* nactive, const int* order,      \
                           float* act) {                                                                   \
        grid_dep_begin();                                                                                 \
        moe_gate_up<T>(wg, wu, wstride, estride, x, xstride, n, ff, used, count, first, active, nactive,   \
                       order, act);                                                                        \
    }                                                                                                     \
    extern "C" __global__ void __launch_bounds__(32 * MOE_WARPS)                                          \
        moe_down_##name(const u8* wd, long long wstride, long long estride, const float* act, int ff,      \
                        int n, const int* count, const int* first, const int* active, const int* nactive,  \
                        float* out) {                                                                      \
        grid_dep_begin();                                                                                 \
        moe_down<T>(wd, wstride, estride, act, ff, n, count, first, active, nactive, out);                 \
    }

FOR_EACH_MOE_TYPE(MOE_KERNELS)
