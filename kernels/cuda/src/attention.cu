// Causal attention over a KV cache, split over the keys: attn_partial
// gives each (head, query, split) block a slice of keys 0..pos and leaves
// an unnormalised partial (max, sum, acc[head_dim]); attn_combine merges the
// splits. The number of splits is fixed when the program is compiled and
// each block sizes its slice from the position it reads at run time, so a
// captured graph stays valid as the context grows.
#include "common.cuh"

#define ATT_WARPS 4
#define ATT_MAXD 8 // head_dim <= 256

template <typename KT> __device__ __forceinline__ float kv_load(const KT* p);
template <> __device__ __forceinline__ float kv_load<float>(const float* p) { return *p; }
template <> __device__ __forceinline__ float kv_load<u16>(const u16* p) { return h2f(*p); }

// dot16 is the dot product of 16 bytes of a K row (4 floats or 8 halves)
// with the matching query elements in shared memory.
template <typename KT> __device__ __forceinline__ float dot16t(uint4 v, const float* q);
template <> __device__ __forceinline__ float dot16t<float>(uint4 v, const float* q) {
    return __uint_as_float(v.x) * q[0] + __uint_as_float(v.y) * q[1] + __uint_as_float(v.z) * q[2] +
           __uint_as_float(v.w) * q[3];
}
template <> __device__ __forceinline__ float dot16t<u16>(uint4 v, const float* q) {
    const __half2* h = (const __half2*)&v;
    float2 a = __half22float2(h[0]), b = __half22float2(h[1]), c = __half22float2(h[2]), d = __half22float2(h[3]);
    return a.x * q[0] + a.y * q[1] + b.x * q[2] + b.y * q[3] + c.x * q[4] + c.y * q[5] + d.x * q[6] + d.y * q[7];
}

// Each warp takes tiles of 32 keys: lane j scores key j of the tile (its
// whole K row in 16-byte loads, all lanes' loads in flight at once), the
// tile's weights update the running max and sum, then the warp adds the
// tile's V rows, each lane owning head_dim/32 output elements. K and V
// rows must be 16-byte aligned.
template <typename KT>
__device__ void attn_partial_t(const float* __restrict__ q, long long qstride, const KT* __restrict__ k,
                               long long kstride, const KT* __restrict__ v, long long vstride,
                               const int* __restrict__ pos,
                               float* __restrict__ part, int n_head, int n_kv_head, int head_dim,
                               float scale, int n_ctx) {
    __shared__ float sm[ATT_WARPS][2 + 32 * ATT_MAXD];
    __shared__ float qs[32 * ATT_MAXD];
    __shared__ float es[ATT_WARPS][32]; // a tile's weights: read back without shuffles
    int h = blockIdx.x, b = blockIdx.y, split = blockIdx.z, nsplit = gridDim.z;
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nd = head_dim >> 5;
    int kvh = h / (n_head / n_kv_head);
    int p = pos[b];
    int nkeys = min(p + 1, n_ctx);
    int chunk = (nkeys + nsplit - 1) / nsplit;
    int t0 = split * chunk, t1 = min(nkeys, t0 + chunk);
    for (int i = threadIdx.x; i < head_dim; i += blockDim.x) qs[i] = q[b * qstride + h * head_dim + i] * scale;
    __syncthreads();
    const int per16 = 16 / sizeof(KT); // elements per 16-byte load
    float acc[ATT_MAXD];
#pragma unroll
    for (int i = 0; i < ATT_MAXD; i++) acc[i] = 0.f;
    float m = -INFINITY, l = 0.f;
    for (int tile = t0 + 32 * w; tile < t1; tile += 32 * ATT_WARPS) {
        int t = tile + lane;
        float s = -INFINITY;
        if (t < t1) {
            const uint4* kr = (const uint4*)(k + (size_t)t * kstride + kvh * head_dim);
            float a = 0.f;
#pragma unroll 8
            for (int i = 0; i < head_dim / per16; i++) a += dot16t<KT>(__ldg(kr + i), qs + i * per16);
            s = a;
        }
        float mt = warp_max(s);
        float mn = fmaxf(m, mt);
        float corr = __expf(m - mn);
        float e = t < t1 ? __expf(s - mn) : 0.f;
        l = l * corr + warp_sum(e);
#pragma unroll
        for (int i = 0; i < ATT_MAXD; i++) acc[i] *= corr;
        int nt = min(32, t1 - tile);
        const KT* vb = v + (size_t)tile * vstride + kvh * head_dim + lane;
        // The weights go through shared memory rather than shuffles: a
        // shuffle orders the loads after it, which made every key a full
        // memory round trip.
        es[w][lane] = e;
        __syncwarp();
        if (nt == 32) { // a full tile: a constant trip count lets the loads run ahead
#pragma unroll 16
            for (int j = 0; j < 32; j++) {
                float ej = es[w][j];
                const KT* vr = vb + (size_t)j * vstride;
#pragma unroll
                for (int i = 0; i < ATT_MAXD; i++)
                    if (i < nd) acc[i] += ej * kv_load(vr + 32 * i);
            }
        } else {
#pragma unroll 4
            for (int j = 0; j < nt; j++) {
                float ej = es[w][j];
                const KT* vr = vb + (size_t)j * vstride;
#pragma unroll
                for (int i = 0; i < ATT_MAXD; i++)
                    if (i < nd) acc[i] += ej * kv_load(vr + 32 * i);
            }
        }
        __syncwarp();
        m = mn;
    }
    if (lane == 0) { sm[w][0] = m; sm[w][1] = l; }
#pragma unroll
    for (int i = 0; i < ATT_MAXD; i++)
        if (i < nd) sm[w][2 + lane + 32 * i] = acc[i];
    __syncthreads();
    if (w != 0) return;
    float M = -INFINITY;
    for (int j = 0; j < ATT_WARPS; j++)
        if (sm[j][1] > 0.f) M = fmaxf(M, sm[j][0]);
    float L = 0.f;
    float o[ATT_MAXD] = {};
    for (int j = 0; j < ATT_WARPS; j++) {
        if (sm[j][1] == 0.f) continue;
        float f = __expf(sm[j][0] - M);
        L += sm[j][1] * f;
#pragma unroll
        for (int i = 0; i < ATT_MAXD; i++)
            if (i < nd) o[i] += sm[j][2 + lane + 32 * i] * f;
    }
    float* out = part + (((size_t)b * n_head + h) * nsplit + split) * (head_dim + 2);
    if (lane == 0) { out[0] = M; out[1] = L; }
#pragma unroll
    for (int i = 0; i < ATT_MAXD; i++)
        if (i < nd) out[2 + lane + 32 * i] = o[i];
}

extern "C" __global__ void __launch_bounds__(32 * ATT_WARPS)
    attn_partial_f32(const float* q, long long qstride, const float* k, long long kstride, const float* v, long long vstride,
                     const int* pos, float* part, int n_head, int n_kv_head, int head_dim, float scale, int n_ctx) {
    attn_partial_t<float>(q, qstride, k, kstride, v, vstride, pos, part, n_head, n_kv_head, head_dim, scale, n_ctx);
}
extern "C" __global__ void __launch_bounds__(32 * ATT_WARPS)
    attn_partial_f16(const float* q, long long qstride, const u16* k, long long kstride, const u16* v, long long vstride,
                     const int* pos, float* part, int n_head, int n_kv_head, int head_dim, float scale, int n_ctx) {
    attn_partial_t<u16>(q, qstride, k, kstride, v, vstride, pos, part, n_head, n_kv_head, head_dim, scale, n_ctx);
}

// attn_combine: grid (n_head, B), head_dim threads.
extern "C" __global__ void attn_combine(const float* __restrict__ part, float* __restrict__ y, long long ystride,
                                        int n_head, int head_dim, int nsplit) {
    int h = blockIdx.x, b = blockIdx.y, i = threadIdx.x;
    const float* pp = part + ((size_t)b * n_head + h) * nsplit * (head_dim + 2);
    float M = -INFINITY;
    for (int s = 0; s < nsplit; s++)
        if (pp[s * (head_dim + 2) + 1] > 0.f) M = fmaxf(M, pp[s * (head_dim + 2)]);
    float L = 0.f, o = 0.f;
    for (int s = 0; s < nsplit; s++) {
        const float* ps = pp + s * (head_dim + 2);
        if (ps[1] == 0.f) continue;
        float f = __expf(ps[0] - M);
        L += ps[1] * f;
        o += ps[2 + i] * f;
    }
    y[b * ystride + h * head_dim + i] = L > 0.f ? o / L : 0.f;
}
