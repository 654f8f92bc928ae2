// Causal attention over a KV cache for few queries (decode), split over the
// keys: each (head, query, split) block takes a slice of keys 0..pos and
// leaves an unnormalised partial (max, sum, acc[head_dim]); the last block
// of a (head, query) to finish merges the splits, so one launch does it
// all. The number of splits is fixed when the program is compiled and each
// block sizes its slice from the position it reads at run time, so a
// captured graph stays valid as the context grows.
#include "common.cuh"

#define ATT_THREADS 128
#define ATT_LOADS 8 // 16-byte K and V loads per thread per tile

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

// axpy16 adds p times the 16 bytes of a V row to acc.
template <typename KT> __device__ __forceinline__ void axpy16(float p, uint4 v, float* acc);
template <> __device__ __forceinline__ void axpy16<float>(float p, uint4 v, float* acc) {
    acc[0] += p * __uint_as_float(v.x);
    acc[1] += p * __uint_as_float(v.y);
    acc[2] += p * __uint_as_float(v.z);
    acc[3] += p * __uint_as_float(v.w);
}
template <> __device__ __forceinline__ void axpy16<u16>(float p, uint4 v, float* acc) {
    const __half2* h = (const __half2*)&v;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 f = __half22float2(h[i]);
        acc[2 * i] += p * f.x;
        acc[2 * i + 1] += p * f.y;
    }
}

// Tiles: a row is C 16-byte chunks (C <= 64); a tile is T keys, T*C <= 1024
// chunks, so that 128 threads load a tile's K and V in ATT_LOADS loads each,
// all in flight at once. G = 128/T threads score one key together. K rows
// in shared memory are padded by G chunks so that the G-thread groups of a
// warp read different banks. attnSharedBytes in ops_attention.go mirrors
// this layout.
__device__ __forceinline__ int att_tile(int c) { return c <= 16 ? 64 : (c <= 32 ? 32 : 16); }

// att_load reads this thread's share of the K and V rows of the tile at
// tile0 into registers (zeros past t1).
__device__ __forceinline__ void att_load(const uint4* __restrict__ kb, long long ks16, const uint4* __restrict__ vb,
                                         long long vs16, int tile0, int t1, int C, int T, uint4 (&kr)[ATT_LOADS],
                                         uint4 (&vr)[ATT_LOADS]) {
#pragma unroll
    for (int i = 0; i < ATT_LOADS; i++) {
        int idx = threadIdx.x + ATT_THREADS * i, r = idx / C, c = idx - r * C;
        if (idx < T * C && tile0 + r < t1) {
            kr[i] = __ldg(kb + (size_t)(tile0 + r) * ks16 + c);
            vr[i] = __ldg(vb + (size_t)(tile0 + r) * vs16 + c);
        } else {
            kr[i] = make_uint4(0, 0, 0, 0);
            vr[i] = kr[i];
        }
    }
}

// Each tile: all 128 threads copy its K and V rows to shared memory
// (coalesced 16-byte loads; the next tile's loads are issued before this
// one is used), score the keys (G threads per key), update the running max
// and sum, and add the weighted V rows, each thread owning one 16-byte
// chunk of the output for one residue class of keys; the classes are
// summed at the end. K and V rows must be 16-byte aligned.
template <typename KT>
__device__ void attention_t(const float* __restrict__ q, long long qstride, const KT* __restrict__ k,
                            long long kstride, const KT* __restrict__ v, long long vstride,
                            const int* __restrict__ pos, float* __restrict__ part, int* __restrict__ done,
                            float* __restrict__ y, long long ystride, signed char* __restrict__ xq,
                            float2* __restrict__ xd, int n_head, int n_kv_head, int head_dim, float scale,
                            int n_ctx) {
    extern __shared__ uint4 smem[];
    const int per16 = 16 / sizeof(KT);
    const int C = head_dim / per16, T = att_tile(C), G = ATT_THREADS / T;
    float* qs = (float*)smem;              // head_dim floats (256 at most), later the output
    uint4* ks = smem + 64;                 // T rows of C+G chunks
    uint4* vs = ks + T * (C + G);          // T rows of C chunks
    float* es = (float*)(vs + T * C);      // T scores
    float* pe = es + 64;                   // T weights
    __shared__ int last;

    int h = blockIdx.x, b = blockIdx.y, split = blockIdx.z, nsplit = gridDim.z;
    int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    int kvh = h / (n_head / n_kv_head);
    int p = pos[b];
    int nkeys = min(p + 1, n_ctx);
    int chunk = (nkeys + nsplit - 1) / nsplit;
    int t0 = split * chunk, t1 = min(nkeys, t0 + chunk);
    const uint4* kb = (const uint4*)(k + kvh * head_dim);
    const uint4* vb = (const uint4*)(v + kvh * head_dim);
    const long long ks16 = kstride / per16, vs16 = vstride / per16; // strides in chunks

    uint4 kr[ATT_LOADS], vr[ATT_LOADS];
    if (t0 < t1) att_load(kb, ks16, vb, vs16, t0, t1, C, T, kr, vr);
    for (int i = tid; i < head_dim; i += ATT_THREADS) qs[i] = q[b * qstride + h * head_dim + i] * scale;

    // The V pass: thread (g, c) adds chunk c of keys g, g+groups, ...
    const int groups = ATT_THREADS / C, vg = tid / C, vc = tid - vg * C;
    float acc[8];
#pragma unroll
    for (int i = 0; i < 8; i++) acc[i] = 0.f;
    float m = -INFINITY, l = 0.f;
    for (int tile0 = t0; tile0 < t1; tile0 += T) {
        int n = min(T, t1 - tile0);
#pragma unroll
        for (int i = 0; i < ATT_LOADS; i++) {
            int idx = tid + ATT_THREADS * i, r = idx / C, c = idx - r * C;
            if (idx < T * C) {
                ks[r * (C + G) + c] = kr[i];
                vs[idx] = vr[i];
            }
        }
        __syncthreads();
        if (tile0 + T < t1) att_load(kb, ks16, vb, vs16, tile0 + T, t1, C, T, kr, vr);

        int j = tid / G, s = tid - j * G;
        float a = 0.f;
        for (int c = s; c < C; c += G) a += dot16t<KT>(ks[j * (C + G) + c], qs + c * per16);
        for (int o = G >> 1; o > 0; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
        if (s == 0) es[j] = j < n ? a : -INFINITY;
        __syncthreads();

        // Every warp finds the tile's max and sum itself (same inputs, same
        // result), so no further exchange is needed.
        float mt = -INFINITY;
        for (int i = lane; i < T; i += 32) mt = fmaxf(mt, es[i]);
        mt = warp_max(mt);
        float mn = fmaxf(m, mt);
        float corr = __expf(m - mn), sum = 0.f;
        for (int i = lane; i < T; i += 32) {
            float e = __expf(es[i] - mn);
            sum += e;
            if (w == 0) pe[i] = e;
        }
        l = l * corr + warp_sum(sum);
        m = mn;
#pragma unroll
        for (int i = 0; i < 8; i++) acc[i] *= corr;
        __syncthreads();

        if (vg < groups) {
#pragma unroll 4
            for (int jj = vg; jj < n; jj += groups) axpy16<KT>(pe[jj], vs[jj * C + vc], acc);
        }
        __syncthreads();
    }

    // Sum the key classes: red[g][head_dim] over the K tile's space.
    float* red = (float*)ks;
    if (vg < groups) {
#pragma unroll
        for (int i = 0; i < 8; i++)
            if (i < per16) red[vg * head_dim + vc * per16 + i] = acc[i];
    }
    __syncthreads();
    for (int i = tid; i < head_dim; i += ATT_THREADS) {
        float o = 0.f;
        for (int g = 0; g < groups; g++) o += red[g * head_dim + i];
        qs[i] = o;
    }

    if (nsplit > 1) {
        float* out = part + (((size_t)b * n_head + h) * nsplit + split) * (head_dim + 2);
        if (tid == 0) { out[0] = m; out[1] = l; }
        for (int i = tid; i < head_dim; i += ATT_THREADS) out[2 + i] = qs[i];
        __threadfence();
        __syncthreads();
        if (tid == 0) {
            int* cnt = done + b * n_head + h;
            last = atomicAdd(cnt, 1) == nsplit - 1;
            if (last) *cnt = 0; // ready for the next run
        }
        __syncthreads();
        if (!last) return;
        __threadfence();
        // Merge the splits; other blocks' partials are read from L2.
        const float* pp = part + ((size_t)b * n_head + h) * nsplit * (head_dim + 2);
        float M = -INFINITY;
        for (int s = 0; s < nsplit; s++)
            if (__ldcg(pp + s * (head_dim + 2) + 1) > 0.f) M = fmaxf(M, __ldcg(pp + s * (head_dim + 2)));
        for (int i = tid; i < head_dim; i += ATT_THREADS) {
            float L = 0.f, o = 0.f;
            for (int s = 0; s < nsplit; s++) {
                const float* ps = pp + s * (head_dim + 2);
                float ls = __ldcg(ps + 1);
                if (ls == 0.f) continue;
                float f = __expf(__ldcg(ps) - M);
                L += ls * f;
                o += __ldcg(ps + 2 + i) * f;
            }
            qs[i] = L > 0.f ? o / L : 0.f;
        }
    } else {
        for (int i = tid; i < head_dim; i += ATT_THREADS) qs[i] = l > 0.f ? qs[i] / l : 0.f;
    }
    __syncthreads();

    // The head's output, quantized on the way when a product reads it next
    // (xq non-null; row width n_head*head_dim).
    int n = n_head * head_dim;
    for (int g = w; g < (head_dim >> 5); g += ATT_THREADS / 32) {
        int i = h * head_dim + 32 * g + lane;
        float o = qs[32 * g + lane];
        y[b * ystride + i] = o;
        if (xq) quantize_group(o, xq + (size_t)b * n + (i - lane), xd + (size_t)b * (n >> 5) + (i >> 5));
    }
}

#define ATTENTION(KT, name)                                                                                     \
    extern "C" __global__ void __launch_bounds__(ATT_THREADS)                                                  \
        attention_##name(const float* q, long long qstride, const KT* k, long long kstride, const KT* v,      \
                         long long vstride, const int* pos, float* part, int* done, float* y,                 \
                         long long ystride, signed char* xq, float2* xd, int n_head, int n_kv_head,            \
                         int head_dim, float scale, int n_ctx) {                                               \
        grid_dep_begin();                                                                                      \
        attention_t<KT>(q, qstride, k, kstride, v, vstride, pos, part, done, y, ystride, xq, xd, n_head,       \
                        n_kv_head, head_dim, scale, n_ctx);                                                    \
    }
ATTENTION(float, f32)
ATTENTION(u16, f16)
