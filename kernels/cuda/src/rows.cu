// Row-wise ops: RMSNorm, softmax, argmax, and the gathers and scatters of
// rows (embedding lookup, KV-cache writes). One block per row.
#include "common.cuh"

// rms_norm: y[b] = x[b] / sqrt(mean(x[b]^2) + eps) * w. One block per
// row (blockDim.x a multiple of 32, at most 1024): each thread loads its
// first NORM_REGS values of the row and of the weights at the start, in one
// round trip, and keeps them in registers while the block sums the
// squares; values beyond are read twice. In place (y == x) is safe: a
// thread writes only what it read.
#define NORM_REGS 4
extern "C" __global__ void __launch_bounds__(1024)
    rms_norm(const float* x, long long xstride, const float* __restrict__ w, float* y, long long ystride, int n,
             float eps) {
    grid_dep_begin();
    __shared__ float scratch[32];
    const float* xr = x + blockIdx.x * xstride;
    float* yr = y + blockIdx.x * ystride;
    float xv[NORM_REGS], wv[NORM_REGS];
#pragma unroll
    for (int k = 0; k < NORM_REGS; k++) {
        int i = threadIdx.x + k * blockDim.x;
        xv[k] = i < n ? xr[i] : 0.f;
        wv[k] = i < n ? __ldg(w + i) : 0.f;
    }
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < NORM_REGS; k++) s += xv[k] * xv[k];
    for (int i = threadIdx.x + NORM_REGS * blockDim.x; i < n; i += blockDim.x) s += xr[i] * xr[i];
    s = block_sum(s, scratch);
    float r = rsqrtf(s / n + eps);
#pragma unroll
    for (int k = 0; k < NORM_REGS; k++) {
        int i = threadIdx.x + k * blockDim.x;
        if (i < n) yr[i] = xv[k] * r * wv[k];
    }
    for (int i = threadIdx.x + NORM_REGS * blockDim.x; i < n; i += blockDim.x) yr[i] = xr[i] * r * w[i];
}

// softmax over each row.
extern "C" __global__ void softmax(const float* __restrict__ x, long long xstride, float* __restrict__ y,
                                   long long ystride, int n) {
    grid_dep_begin();
    __shared__ float scratch[32];
    const float* xr = x + blockIdx.x * xstride;
    float* yr = y + blockIdx.x * ystride;
    float m = -INFINITY;
    for (int i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, xr[i]);
    m = warp_max(m);
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    if (lane == 0) scratch[wid] = m;
    __syncthreads();
    m = lane < (blockDim.x >> 5) ? scratch[lane] : -INFINITY;
    m = warp_max(m);
    float s = 0.f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += __expf(xr[i] - m);
    s = block_sum(s, scratch);
    float inv = 1.f / s;
    for (int i = threadIdx.x; i < n; i += blockDim.x) yr[i] = __expf(xr[i] - m) * inv;
}

// better reports whether (v, i) ranks above (bv, bi): larger value, then
// lower index. NaN ranks below everything.
__device__ __forceinline__ bool better(float v, int i, float bv, int bi) {
    if (v != v) return false;
    if (bv != bv) return true;
    return v > bv || (v == bv && i < bi);
}

__device__ __forceinline__ void warp_best(float* v, int* i) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, *v, o);
        int oi = __shfl_xor_sync(0xffffffffu, *i, o);
        if (better(ov, oi, *v, *i)) { *v = ov; *i = oi; }
    }
}

// block_best leaves the block's best (value, index) in every thread.
__device__ __forceinline__ void block_best(float* v, int* i, float* sv, int* si) {
    warp_best(v, i);
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) { sv[wid] = *v; si[wid] = *i; }
    __syncthreads();
    if (lane < (blockDim.x >> 5)) { *v = sv[lane]; *i = si[lane]; } else { *v = -INFINITY; *i = 0x7fffffff; }
    warp_best(v, i);
}

// argmax: one block per row. Each thread keeps four 16-byte loads in
// flight (the row is read once, by one multiprocessor, so the time is
// round trips to memory), then the block reduces.
extern "C" __global__ void __launch_bounds__(1024)
    argmax(const float* __restrict__ x, long long xstride, int* __restrict__ out, int n) {
    grid_dep_begin();
    __shared__ float sv[32];
    __shared__ int si[32];
    const float* xr = x + blockIdx.x * xstride;
    float bv = -INFINITY;
    int bi = 0x7fffffff;
    int done = 0;
    if (((size_t)xr & 15) == 0) {
        const float4* xv = (const float4*)xr;
        int nv = n >> 2, step = blockDim.x;
        for (int j = threadIdx.x; j < nv; j += 4 * step) {
            float4 v[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                int jj = j + u * step;
                v[u] = jj < nv ? __ldg(xv + jj) : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
            }
#pragma unroll
            for (int u = 0; u < 4; u++) {
                int i = 4 * (j + u * step);
                if (better(v[u].x, i, bv, bi)) { bv = v[u].x; bi = i; }
                if (better(v[u].y, i + 1, bv, bi)) { bv = v[u].y; bi = i + 1; }
                if (better(v[u].z, i + 2, bv, bi)) { bv = v[u].z; bi = i + 2; }
                if (better(v[u].w, i + 3, bv, bi)) { bv = v[u].w; bi = i + 3; }
            }
        }
        done = nv << 2;
    }
    for (int i = done + threadIdx.x; i < n; i += blockDim.x)
        if (better(xr[i], i, bv, bi)) { bv = xr[i]; bi = i; }
    block_best(&bv, &bi, sv, si);
    if (threadIdx.x == 0) out[blockIdx.x] = bi < n ? bi : 0;
}

// top_k_chunk: the k best of each chunk of a row, by k rounds of a block
// arg-max over the chunk held in shared memory (dynamic: chunk floats).
// Candidates go to cv/ci [rows][nchunks][k]; a chunk shorter than k pads
// with -inf at index n.
extern "C" __global__ void top_k_chunk(const float* __restrict__ x, long long xstride, float* __restrict__ cv,
                                       int* __restrict__ ci, int n, int chunk, int k) {
    grid_dep_begin();
    extern __shared__ float vals[];
    __shared__ float sv[32];
    __shared__ int si[32];
    int row = blockIdx.y, c = blockIdx.x, nchunks = gridDim.x;
    int start = c * chunk, len = min(chunk, n - start);
    const float* xr = x + row * xstride + start;
    for (int i = threadIdx.x; i < chunk; i += blockDim.x) vals[i] = i < len ? xr[i] : __int_as_float(0x7fffffff);
    __syncthreads();
    float* ov = cv + ((size_t)row * nchunks + c) * k;
    int* oi = ci + ((size_t)row * nchunks + c) * k;
    for (int r = 0; r < k; r++) {
        float bv = -INFINITY;
        int bi = 0x7fffffff;
        for (int i = threadIdx.x; i < len; i += blockDim.x)
            if (better(vals[i], i, bv, bi)) { bv = vals[i]; bi = i; }
        block_best(&bv, &bi, sv, si);
        if (threadIdx.x == 0) {
            if (bi < len) {
                ov[r] = bv; oi[r] = start + bi;
                vals[bi] = __int_as_float(0x7fffffff); // NaN: never chosen again
            } else {
                ov[r] = -INFINITY; oi[r] = n;
            }
        }
        __syncthreads();
    }
}

// top_k_merge: the k best of a row's candidates, ties to the lower index.
extern "C" __global__ void top_k_merge(const float* __restrict__ cv, const int* __restrict__ ci, int ncand,
                                       int* __restrict__ ids, long long idstride, float* __restrict__ vals,
                                       long long vstride, int k) {
    grid_dep_begin();
    extern __shared__ float sm[];
    float* v = sm;
    int* id = (int*)(sm + ncand);
    __shared__ float sv[32];
    __shared__ int si[32];
    int row = blockIdx.x;
    for (int i = threadIdx.x; i < ncand; i += blockDim.x) {
        v[i] = cv[(size_t)row * ncand + i];
        id[i] = ci[(size_t)row * ncand + i];
    }
    __syncthreads();
    for (int r = 0; r < k; r++) {
        float bv = -INFINITY;
        int bi = 0x7fffffff, bj = -1;
        for (int j = threadIdx.x; j < ncand; j += blockDim.x)
            if (better(v[j], id[j], bv, bi)) { bv = v[j]; bi = id[j]; bj = j; }
        // carry the slot along with the winner: pack by a second reduction
        float tv = bv;
        int ti = bi;
        block_best(&tv, &ti, sv, si);
        __syncthreads();
        if (bj >= 0 && bi == ti && bv == tv) { v[bj] = __int_as_float(0x7fffffff); }
        if (threadIdx.x == 0) {
            ids[row * idstride + r] = ti;
            vals[row * vstride + r] = tv;
        }
        __syncthreads();
    }
}

// get_rows: y[b] = dequant(src[idx[b]]), any weight type.
template <int T>
__device__ void get_rows_t(const u8* __restrict__ src, long long sstride, const int* __restrict__ idx,
                           float* __restrict__ y, long long ystride, int n, int nrows) {
    int b = blockIdx.y;
    int r = idx[b];
    float* yr = y + b * ystride;
    if (r < 0 || r >= nrows) { // out-of-range ids read as zeros, never out of bounds
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) yr[i] = 0.f;
        return;
    }
    const u8* row = src + (size_t)r * sstride;
    for (int g = blockIdx.x * blockDim.x + threadIdx.x; g < (n >> 5); g += gridDim.x * blockDim.x) {
        float v[32];
        dequant32<T>(row, g, v);
#pragma unroll
        for (int i = 0; i < 32; i++) yr[32 * g + i] = v[i];
    }
}
#define GET_ROWS(T, name)                                                                           \
    extern "C" __global__ void get_rows_##name(const u8* src, long long sstride, const int* idx,   \
                                               float* y, long long ystride, int n, int nrows) {    \
        grid_dep_begin();                                                                          \
        get_rows_t<T>(src, sstride, idx, y, ystride, n, nrows);                                    \
    }
FOR_EACH_WEIGHT_TYPE(GET_ROWS)

// get_rows for F32 rows of any width (not a multiple of 32).
extern "C" __global__ void get_rows_f32_any(const float* __restrict__ src, long long sstride,
                                            const int* __restrict__ idx, float* __restrict__ y,
                                            long long ystride, int n, int nrows) {
    grid_dep_begin();
    int b = blockIdx.y, r = idx[b];
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[b * ystride + i] = (r >= 0 && r < nrows) ? src[r * sstride + i] : 0.f;
}

// set_rows: dst[idx[b]] = x[b], to F32 or F16 rows (strides in elements).
// Two scatters with the same indices (K and V) run as one launch, blockIdx.z
// choosing the job.
template <typename DT> __device__ __forceinline__ DT to_elem(float v);
template <> __device__ __forceinline__ float to_elem<float>(float v) { return v; }
template <> __device__ __forceinline__ u16 to_elem<u16>(float v) { return f2h(v); }

template <typename DT>
__device__ void set_rows_t(const float* x0, long long xs0, DT* d0, long long ds0, int n0, int nr0,
                           const float* x1, long long xs1, DT* d1, long long ds1, int n1, int nr1,
                           const int* __restrict__ idx) {
    bool j1 = blockIdx.z == 1;
    const float* x = j1 ? x1 : x0;
    DT* dst = j1 ? d1 : d0;
    long long xstride = j1 ? xs1 : xs0, dstride = j1 ? ds1 : ds0;
    int n = j1 ? n1 : n0, nrows = j1 ? nr1 : nr0;
    int b = blockIdx.y, r = idx[b];
    if (r < 0 || r >= nrows) return;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        dst[r * dstride + i] = to_elem<DT>(x[b * xstride + i]);
}
extern "C" __global__ void set_rows_f32(const float* x0, long long xs0, float* d0, long long ds0, int n0, int nr0,
                                        const float* x1, long long xs1, float* d1, long long ds1, int n1, int nr1,
                                        const int* idx) {
    grid_dep_begin();
    set_rows_t<float>(x0, xs0, d0, ds0, n0, nr0, x1, xs1, d1, ds1, n1, nr1, idx);
}
extern "C" __global__ void set_rows_f16(const float* x0, long long xs0, u16* d0, long long ds0, int n0, int nr0,
                                        const float* x1, long long xs1, u16* d1, long long ds1, int n1, int nr1,
                                        const int* idx) {
    grid_dep_begin();
    set_rows_t<u16>(x0, xs0, d0, ds0, n0, nr0, x1, xs1, d1, ds1, n1, nr1, idx);
}

// Quantized cache rows, bit-exact with kernels/quant's quantizers: one
// warp a block of 32 values, lane i holding value i. __fmul_rn and
// friends keep each product and sum a rounding of its own, as in the Go
// code (no fused multiply-add), and the divisions are IEEE ones.
//
// store_q8_0: d = amax/127 stored as f16; q = round-to-even(x*(127/amax)).
__device__ __forceinline__ void store_q8_0(u8* blk, float x) {
    int lane = threadIdx.x & 31;
    float amax = warp_max(fabsf(x));
    float id = amax != 0.f ? __fdiv_rn(127.f, amax) : 0.f;
    int q = __float2int_rn(__fmul_rn(x, id));
    if (lane == 0) *(u16*)blk = f2h(__fdiv_rn(amax, 127.f));
    blk[2 + lane] = (u8)q;
}

// store_q4_0: d = peak/-8, peak the first value of largest magnitude
// (+0 for a block of zeros), stored as f16; q = min(15, trunc(x*(1/d) +
// 8.5)); value j in the low nibble of byte j, value j+16 in its high one.
__device__ __forceinline__ void store_q4_0(u8* blk, float x) {
    int lane = threadIdx.x & 31;
    float a = fabsf(x);
    int at = lane;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float oa = __shfl_xor_sync(0xffffffffu, a, o);
        int oat = __shfl_xor_sync(0xffffffffu, at, o);
        if (oa > a || (oa == a && oat < at)) {
            a = oa;
            at = oat;
        }
    }
    float peak = __shfl_sync(0xffffffffu, x, at);
    if (a == 0.f) peak = 0.f;
    float d = __fdiv_rn(peak, -8.f);
    float id = d != 0.f ? __fdiv_rn(1.f, d) : 0.f;
    int q = min(15, __float2int_rz(__fadd_rn(__fmul_rn(x, id), 8.5f)));
    int hi = __shfl_down_sync(0xffffffffu, q, 16);
    if (lane == 0) *(u16*)blk = f2h(d);
    if (lane < 16) blk[2 + lane] = (u8)(q | (hi << 4));
}

// store_group writes group g (32 values, one a lane; lanes past n hold
// none) of a cache row of type t starting at row: F32, F16, Q8_0 or
// Q4_0 (whose rows are whole groups). Every lane of the warp must call it.
__device__ __forceinline__ void store_group(u8* row, int t, int g, float x, bool in) {
    int lane = threadIdx.x & 31;
    switch (t) {
    case T_F32:
        if (in) ((float*)row)[32 * g + lane] = x;
        break;
    case T_F16:
        if (in) ((u16*)row)[32 * g + lane] = f2h(x);
        break;
    case T_Q8_0:
        store_q8_0(row + 34 * g, x);
        break;
    case T_Q4_0:
        store_q4_0(row + 18 * g, x);
        break;
    }
}

// set_rows_kv: dst[idx[b]] = x[b] to rows of any cache type, one warp a
// group of 32 values (grid (groups/4 rounded up, rows, jobs), 128
// threads). Two jobs with the same indices (K and V, whose types may
// differ) share a launch, blockIdx.z choosing. Source strides are in
// floats, destination strides in bytes.
extern "C" __global__ void set_rows_kv(const float* x0, long long xs0, u8* d0, long long ds0, int n0, int nr0, int t0,
                                       const float* x1, long long xs1, u8* d1, long long ds1, int n1, int nr1, int t1,
                                       const int* __restrict__ idx) {
    grid_dep_begin();
    bool j1 = blockIdx.z == 1;
    const float* x = j1 ? x1 : x0;
    u8* dst = j1 ? d1 : d0;
    long long xstride = j1 ? xs1 : xs0, dstride = j1 ? ds1 : ds0;
    int n = j1 ? n1 : n0, nrows = j1 ? nr1 : nr0, t = j1 ? t1 : t0;
    int g = blockIdx.x * 4 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    int b = blockIdx.y, r = idx[b];
    if (r < 0 || r >= nrows || 32 * g >= n) return; // warp-uniform
    int e = 32 * g + lane;
    bool in = e < n;
    store_group(dst + r * dstride, t, g, in ? x[b * xstride + e] : 0.f, in);
}

// attn_prep is what lies between the Q/K/V products and attention, in one
// launch: each warp takes one head of one row (grid (ceil(heads/4), rows)).
// A Q or K head is RMS-normalised (when its weight is given), rotated, and
// written back; a K head is also written to cache row idx[row]; a V head is
// copied to the V cache. The head passes through shared memory so that a
// lane can rotate a pair it did not load.
#define PREP_WARPS 4
#define PREP_MAX_HEAD 256

// prep_head is attn_prep's work on one Q or K head x (one warp): it
// RMS-normalises the head into hb (head_dim floats of the warp's shared
// memory; w null: copied as it is) and rotates it for position p (the
// first dims elements; neox: pairs (j, j+dims/2), else (2j, 2j+1); the
// angle of pair j is p*scale*base^(-2j/dims), divided by factors[j] when
// given).
__device__ __forceinline__ void prep_head(const float* x, float* hb, const float* w, float eps, float p,
                                          const float* factors, int head_dim, int dims, float base,
                                          float scale, int neox) {
    int lane = threadIdx.x & 31;
    float ss = 0.f;
    for (int e = lane; e < head_dim; e += 32) {
        float t = x[e];
        hb[e] = t;
        ss += t * t;
    }
    if (w) {
        float rs = rsqrtf(warp_sum(ss) / head_dim + eps);
        for (int e = lane; e < head_dim; e += 32) hb[e] = hb[e] * rs * w[e];
    }
    __syncwarp();
    int half = dims >> 1;
    for (int j = lane; j < half; j += 32) {
        float theta = p * scale * powf(base, -2.f * j / dims);
        if (factors) theta /= factors[j];
        float c, s;
        sincosf(theta, &s, &c);
        int i0 = neox ? j : 2 * j, i1 = neox ? j + half : 2 * j + 1;
        float a = hb[i0], b = hb[i1];
        hb[i0] = a * c - b * s;
        hb[i1] = a * s + b * c;
    }
    __syncwarp();
}

template <typename CT>
__device__ void attn_prep_t(float* q, long long qs, float* k, long long ks, const float* __restrict__ v,
                            long long vs, CT* kc, long long kcs, int kcrows, CT* vc, long long vcs, int vcrows,
                            const float* __restrict__ qw, const float* __restrict__ kw, float qeps, float keps,
                            const int* __restrict__ pos, const int* __restrict__ idx,
                            const float* __restrict__ factors, int hq, int hk, int hv, int head_dim, int dims,
                            float base, float scale, int neox) {
    __shared__ float buf[PREP_WARPS][PREP_MAX_HEAD];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int h = blockIdx.x * PREP_WARPS + warp, r = blockIdx.y;
    if (h >= hq + hk + hv) return;
    int dst_row = idx[r];
    if (h >= hq + hk) { // a V head: to the cache
        h -= hq + hk;
        if (dst_row < 0 || dst_row >= vcrows) return;
        const float* src = v + r * vs + h * head_dim;
        CT* dst = vc + dst_row * vcs + h * head_dim;
        for (int e = lane; e < head_dim; e += 32) dst[e] = to_elem<CT>(src[e]);
        return;
    }
    bool is_k = h >= hq;
    if (is_k) h -= hq;
    float* x = (is_k ? k + r * ks : q + r * qs) + h * head_dim;
    const float* w = is_k ? kw : qw;
    float* hb = buf[warp];
    prep_head(x, hb, w, is_k ? keps : qeps, (float)pos[r], factors, head_dim, dims, base, scale, neox);
    bool cache = is_k && dst_row >= 0 && dst_row < kcrows;
    CT* kr = kc + dst_row * kcs + h * head_dim;
    for (int e = lane; e < head_dim; e += 32) {
        float t = hb[e];
        x[e] = t;
        if (cache) kr[e] = to_elem<CT>(t);
    }
}
#define ATTN_PREP(CT, name)                                                                                       \
    extern "C" __global__ void attn_prep_##name(                                                                  \
        float* q, long long qs, float* k, long long ks, const float* v, long long vs, CT* kc, long long kcs,      \
        int kcrows, CT* vc, long long vcs, int vcrows, const float* qw, const float* kw, float qeps, float keps,  \
        const int* pos, const int* idx, const float* factors, int hq, int hk, int hv, int head_dim, int dims,     \
        float base, float scale, int neox) {                                                                      \
        grid_dep_begin();                                                                                         \
        attn_prep_t<CT>(q, qs, k, ks, v, vs, kc, kcs, kcrows, vc, vcs, vcrows, qw, kw, qeps, keps, pos, idx,      \
                        factors, hq, hk, hv, head_dim, dims, base, scale, neox);                                  \
    }
ATTN_PREP(float, f32)
ATTN_PREP(u16, f16)

// attn_prep_kv is attn_prep for caches of any types, K and V apart (kt,
// vt: ggml type numbers; heads whole groups of 32), cache strides in
// bytes: the cache writes go through store_group.
extern "C" __global__ void attn_prep_kv(float* q, long long qs, float* k, long long ks, const float* __restrict__ v,
                                        long long vs, u8* kc, long long kcs, int kcrows, u8* vc, long long vcs,
                                        int vcrows, const float* __restrict__ qw, const float* __restrict__ kw,
                                        float qeps, float keps, const int* __restrict__ pos,
                                        const int* __restrict__ idx, const float* __restrict__ factors, int hq,
                                        int hk, int hv, int head_dim, int dims, float base, float scale, int neox,
                                        int kt, int vt, long long khb, long long vhb) {
    grid_dep_begin();
    __shared__ float buf[PREP_WARPS][PREP_MAX_HEAD];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int h = blockIdx.x * PREP_WARPS + warp, r = blockIdx.y;
    if (h >= hq + hk + hv) return;
    int dst_row = idx[r];
    int ng = head_dim >> 5;
    if (h >= hq + hk) { // a V head: to the cache
        h -= hq + hk;
        if (dst_row < 0 || dst_row >= vcrows) return;
        const float* src = v + r * vs + h * head_dim;
        u8* dst = vc + dst_row * vcs + h * vhb;
        for (int g = 0; g < ng; g++) store_group(dst, vt, g, src[32 * g + lane], true);
        return;
    }
    bool is_k = h >= hq;
    if (is_k) h -= hq;
    float* x = (is_k ? k + r * ks : q + r * qs) + h * head_dim;
    const float* w = is_k ? kw : qw;
    float* hb = buf[warp];
    prep_head(x, hb, w, is_k ? keps : qeps, (float)pos[r], factors, head_dim, dims, base, scale, neox);
    for (int e = lane; e < head_dim; e += 32) x[e] = hb[e];
    if (is_k && dst_row >= 0 && dst_row < kcrows) { // warp-uniform
        u8* kr = kc + dst_row * kcs + h * khb;
        for (int g = 0; g < ng; g++) store_group(kr, kt, g, hb[32 * g + lane], true);
    }
}
