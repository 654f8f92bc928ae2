// Causal attention over a KV cache for few queries (decode), split over the
// keys: each (head, query, split) block takes a slice of keys 0..pos and
// leaves an unnormalised partial (max, sum, acc[head_dim]); the last block
// of a (head, query) to finish merges the splits, so one launch does it
// all. The grid's splits are fixed when the program is compiled, for the
// cache's capacity; each block reads the position at run time, and from it
// how many splits take keys (active_splits) and its own slice, so a
// captured graph stays valid as the context grows.
#include "attention.cuh"

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
//
// SEQS: the query rows are of several sequences, each in its own slot of
// n_ctx rows of the caches; row b's own key is cache row rows[b], so its
// slot starts rows[b]-pos[b] rows in, and it is cut and attended as a
// lone sequence on that slot would be (attention_seqs_<type>).
template <typename KT, bool SEQS>
__device__ void attention_t(const float* __restrict__ q, long long qstride, const KT* __restrict__ k,
                            long long kstride, const KT* __restrict__ v, long long vstride,
                            const int* __restrict__ pos, const int* __restrict__ rows, float* __restrict__ part,
                            int* __restrict__ done, float* __restrict__ y, long long ystride,
                            signed char* __restrict__ xq, float2* __restrict__ xd, int n_head, int n_kv_head,
                            int head_dim, float scale, int n_ctx) {
    extern __shared__ uint4 smem[];
    const int per16 = 16 / sizeof(KT);
    const int C = head_dim / per16, T = att_tile(C), G = ATT_THREADS / T;
    float* qs = (float*)smem;              // head_dim floats (256 at most), later the output
    uint4* ks = smem + 64;                 // T rows of C+G chunks
    uint4* vs = ks + T * (C + G);          // T rows of C chunks
    float* es = (float*)(vs + T * C);      // T scores
    float* pe = es + 64;                   // T weights

    int h = blockIdx.x, b = blockIdx.y, split = blockIdx.z;
    int tid = threadIdx.x;
    int kvh = h / (n_head / n_kv_head);
    int p = pos[b];
    int nkeys = min(p + 1, n_ctx);
    int nsplit = active_splits(nkeys);
    if (split >= nsplit) return;
    int chunk = (nkeys + nsplit - 1) / nsplit;
    int t0 = split * chunk, t1 = min(nkeys, t0 + chunk);
    const uint4* kb = (const uint4*)(k + kvh * head_dim);
    const uint4* vb = (const uint4*)(v + kvh * head_dim);
    const long long ks16 = kstride / per16, vs16 = vstride / per16; // strides in chunks
    if (SEQS) {
        long long slot0 = rows[b] - p;
        kb += slot0 * ks16;
        vb += slot0 * vs16;
    }

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

        float corr = tile_softmax(es, pe, T, m, l);
#pragma unroll
        for (int i = 0; i < 8; i++) acc[i] *= corr;
        __syncthreads();

        if (vg < groups) {
#pragma unroll 4
            for (int jj = vg; jj < n; jj += groups) axpy16<KT>(pe[jj], vs[jj * C + vc], acc);
        }
        __syncthreads();
    }

    // Sum the key classes over the K tile's space, then merge and write.
    sum_classes<ATT_THREADS, per16>(acc, (float*)ks, qs, vg, groups, vc * per16, head_dim);
    decode_finish<ATT_THREADS>(qs, m, l, part, done, y, ystride, xq, xd, b, h, n_head, head_dim, split, nsplit);
}

#define ATTENTION(KT, name)                                                                                     \
    extern "C" __global__ void __launch_bounds__(ATT_THREADS)                                                  \
        attention_##name(const float* q, long long qstride, const KT* k, long long kstride, const KT* v,      \
                         long long vstride, const int* pos, float* part, int* done, float* y,                 \
                         long long ystride, signed char* xq, float2* xd, int n_head, int n_kv_head,            \
                         int head_dim, float scale, int n_ctx) {                                               \
        grid_dep_begin();                                                                                      \
        attention_t<KT, false>(q, qstride, k, kstride, v, vstride, pos, nullptr, part, done, y, ystride, xq,   \
                               xd, n_head, n_kv_head, head_dim, scale, n_ctx);                                 \
    }                                                                                                          \
    extern "C" __global__ void __launch_bounds__(ATT_THREADS)                                                  \
        attention_seqs_##name(const float* q, long long qstride, const KT* k, long long kstride, const KT* v, \
                              long long vstride, const int* pos, const int* rows, float* part, int* done,      \
                              float* y, long long ystride, signed char* xq, float2* xd, int n_head,            \
                              int n_kv_head, int head_dim, float scale, int n_ctx) {                           \
        grid_dep_begin();                                                                                      \
        attention_t<KT, true>(q, qstride, k, kstride, v, vstride, pos, rows, part, done, y, ystride, xq, xd,   \
                              n_head, n_kv_head, head_dim, scale, n_ctx);                                      \
    }
ATTENTION(float, f32)
ATTENTION(u16, f16)

// Attention for several query rows (verification and prefill), flash
// style: a block takes one KV head, a slice of the keys, and up to
// ATR_UNITS_MAX (query row, query head) units of that KV head: the query heads
// of a GQA group and as many query rows as fit. Every K/V tile goes through
// shared memory once for all of them, so the group's heads and the batch's
// rows share each cache read. A warp owns its units; for each tile it
// scores the keys (lane j key j, or two lanes a key for 16-key tiles),
// updates its running max and sum, and adds the weighted V rows, each lane
// owning head_dim/32 output elements. Causal: a unit sees keys up to its
// own position. The slices of a unit are merged by the last block of its
// (head group, row tile) to finish, as attention_t does.
#define ATR_THREADS 256
#define ATR_WARPS (ATR_THREADS / 32)
#define ATR_UNITS_MAX 16 // units a block takes at most (ops_attention.go: attnRowUnits)

template <typename KT> __device__ __forceinline__ float kv_at(const KT* p, int i);
template <> __device__ __forceinline__ float kv_at<float>(const float* p, int i) { return p[i]; }
template <> __device__ __forceinline__ float kv_at<u16>(const u16* p, int i) { return h2f(p[i]); }

// dot16q adds the products of a 16-byte chunk of a K row and the matching
// query values to two partial sums (two dependency chains, not one).
template <typename KT> __device__ __forceinline__ void dot16q(uint4 v, const float* q, float& s0, float& s1) {
    if constexpr (sizeof(KT) == 4) {
        float4 a = *(const float4*)q;
        s0 = fmaf(__uint_as_float(v.x), a.x, s0);
        s1 = fmaf(__uint_as_float(v.y), a.y, s1);
        s0 = fmaf(__uint_as_float(v.z), a.z, s0);
        s1 = fmaf(__uint_as_float(v.w), a.w, s1);
    } else {
        const __half2* h = (const __half2*)&v;
        float4 a = *(const float4*)q, b = *(const float4*)(q + 4);
        float2 f0 = __half22float2(h[0]), f1 = __half22float2(h[1]), f2 = __half22float2(h[2]),
               f3 = __half22float2(h[3]);
        s0 = fmaf(f0.x, a.x, s0);
        s1 = fmaf(f0.y, a.y, s1);
        s0 = fmaf(f1.x, a.z, s0);
        s1 = fmaf(f1.y, a.w, s1);
        s0 = fmaf(f2.x, b.x, s0);
        s1 = fmaf(f2.y, b.y, s1);
        s0 = fmaf(f3.x, b.z, s0);
        s1 = fmaf(f3.y, b.w, s1);
    }
}

// Grid: x = n_kv_head * head chunks (gh query heads of the group each),
// y = row tiles of qr rows, z = key slices. ucap = gh * qr <= the units the
// shared memory holds. Shared: ucap*head_dim query floats, then the K tile
// (T rows of head_dim elements + 16 bytes), then the V tile.
template <typename KT, int T>
__device__ void attention_rows_t(const float* __restrict__ q, long long qstride, const KT* __restrict__ k,
                                 long long kstride, const KT* __restrict__ v, long long vstride,
                                 const int* __restrict__ pos, float* __restrict__ part, int* __restrict__ done,
                                 float* __restrict__ y, long long ystride, signed char* __restrict__ xq,
                                 float2* __restrict__ xd, int n_head, int n_kv_head, int D, float scale, int n_ctx,
                                 int nb, int gh, int qr) {
    extern __shared__ uint4 smem[];
    const int LPK = 32 / T; // lanes per key
    const int ucap = gh * qr;
    float* qs = (float*)smem;
    const int krow = D * (int)sizeof(KT) + 16; // padded K row, bytes
    u8* ks = (u8*)(qs + ucap * D);
    const KT* vs = (const KT*)(ks + T * krow);

    int G = n_head / n_kv_head, hchunks = (G + gh - 1) / gh;
    int kvh = blockIdx.x / hchunks, h0 = kvh * G + (blockIdx.x % hchunks) * gh;
    int hend = kvh * G + G;
    int b0 = blockIdx.y * qr, split = blockIdx.z;
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

    // the block's key range: up to its last row's position
    int maxp = 0;
    for (int i = 0; i < qr && b0 + i < nb; i++) maxp = max(maxp, pos[b0 + i]);
    int nkeys = min(maxp + 1, n_ctx);
    int nsplit = active_splits(nkeys);
    if (split >= nsplit) return;
    int chunk = (nkeys + nsplit - 1) / nsplit;
    int t0 = split * chunk, t1 = min(nkeys, t0 + chunk);

    // queries, pre-scaled; unit u is row b0 + u/gh, head h0 + u%gh
    for (int i = tid; i < ucap * D; i += ATR_THREADS) {
        int u = i / D, d = i - u * D, b = b0 + u / gh, h = h0 + u % gh;
        qs[i] = (b < nb && h < hend) ? q[(size_t)b * qstride + h * D + d] * scale : 0.f;
    }

    const int UPW = (ATR_UNITS_MAX + ATR_WARPS - 1) / ATR_WARPS; // units per warp, at most
    const int DP = D >> 5;                                       // output elements per lane
    float m[UPW], l[UPW], acc[UPW][8];
    int upos[UPW];
#pragma unroll
    for (int i = 0; i < UPW; i++) {
        m[i] = -INFINITY;
        l[i] = 0.f;
        int u = warp + ATR_WARPS * i, b = b0 + u / gh, h = h0 + u % gh;
        upos[i] = (u < ucap && b < nb && h < hend) ? pos[b] : -1; // -1: no unit
#pragma unroll
        for (int e = 0; e < 8; e++) acc[i][e] = 0.f;
    }

    const int C = D * (int)sizeof(KT) / 16; // 16-byte chunks a row
    const uint4* kb = (const uint4*)(k + (size_t)kvh * D);
    const uint4* vb = (const uint4*)(v + (size_t)kvh * D);
    const long long ks16 = kstride * (long long)sizeof(KT) / 16, vs16 = vstride * (long long)sizeof(KT) / 16;
    for (int tile0 = t0; tile0 < t1; tile0 += T) {
        __syncthreads(); // the previous tile is no longer read
        for (int i = tid; i < T * C; i += ATR_THREADS) {
            int r = i / C, c = i - r * C;
            uint4 kv = make_uint4(0, 0, 0, 0), vv = kv;
            if (tile0 + r < t1) {
                kv = __ldg(kb + (size_t)(tile0 + r) * ks16 + c);
                vv = __ldg(vb + (size_t)(tile0 + r) * vs16 + c);
            }
            *(uint4*)(ks + r * krow + 16 * c) = kv;
            ((uint4*)vs)[i] = vv;
        }
        __syncthreads();
        int j = lane / LPK, s = lane - j * LPK, key = tile0 + j;
        const uint4* krp = (const uint4*)(ks + j * krow);
#pragma unroll
        for (int i = 0; i < UPW; i++) {
            int p = upos[i];
            if (p < tile0) continue; // warp-uniform: no key of this tile is visible (or no unit)
            int u = warp + ATR_WARPS * i;
            const float* qu = qs + u * D;
            const int per16 = 16 / sizeof(KT);
            float p0 = 0.f, p1 = 0.f, p2 = 0.f, p3 = 0.f;
            int c = s;
            for (; c + LPK < C; c += 2 * LPK) {
                dot16q<KT>(krp[c], qu + c * per16, p0, p1);
                dot16q<KT>(krp[c + LPK], qu + (c + LPK) * per16, p2, p3);
            }
            if (c < C) dot16q<KT>(krp[c], qu + c * per16, p0, p1);
            float a = (p0 + p1) + (p2 + p3);
            if (LPK == 2) a += __shfl_xor_sync(0xffffffffu, a, 1);
            bool ok = key < t1 && key <= p;
            float e = key_softmax(ok ? a : -INFINITY, ok, s == 0, m[i], l[i], acc[i]);
            // four keys at a time: their weights and V loads are independent
            int nk = min(T, min(t1, p + 1) - tile0);
            for (int j0 = 0; j0 < nk; j0 += 4) {
                float pj[4];
#pragma unroll
                for (int q4 = 0; q4 < 4; q4++) pj[q4] = __shfl_sync(0xffffffffu, e, ((j0 + q4) & (T - 1)) * LPK);
#pragma unroll
                for (int q4 = 0; q4 < 4; q4++)
                    if (j0 + q4 >= nk) pj[q4] = 0.f; // keys past the tile's visible ones (rows there are finite)
#pragma unroll
                for (int d = 0; d < 8; d++) {
                    if (d < DP) {
                        float v0 = kv_at<KT>(vs + (j0 + 0) * D, lane + 32 * d);
                        float v1 = kv_at<KT>(vs + ((j0 + 1) & (T - 1)) * D, lane + 32 * d);
                        float v2 = kv_at<KT>(vs + ((j0 + 2) & (T - 1)) * D, lane + 32 * d);
                        float v3 = kv_at<KT>(vs + ((j0 + 3) & (T - 1)) * D, lane + 32 * d);
                        acc[i][d] += (pj[0] * v0 + pj[1] * v1) + (pj[2] * v2 + pj[3] * v3);
                    }
                }
            }
        }
    }

    rows_finish<ATR_WARPS, UPW>(m, l, acc, upos, part, done, y, ystride, xq, xd, n_head, D, nb, b0, h0, gh, split,
                                nsplit);
}

#define ATTENTION_ROWS(KT, name, T)                                                                           \
    extern "C" __global__ void __launch_bounds__(ATR_THREADS) attention_rows_##name(                        \
        const float* q, long long qstride, const KT* k, long long kstride, const KT* v, long long vstride,   \
        const int* pos, float* part, int* done, float* y, long long ystride, signed char* xq, float2* xd,    \
        int n_head, int n_kv_head, int head_dim, float scale, int n_ctx, int nb, int gh, int qr) {           \
        grid_dep_begin();                                                                                    \
        attention_rows_t<KT, T>(q, qstride, k, kstride, v, vstride, pos, part, done, y, ystride, xq, xd,     \
                                n_head, n_kv_head, head_dim, scale, n_ctx, nb, gh, qr);                      \
    }
ATTENTION_ROWS(float, f32, 32)
ATTENTION_ROWS(float, f32_t16, 16)
ATTENTION_ROWS(u16, f16, 32)

// Flash attention on tensor cores, for F16 caches and heads of D = 64 or
// 128 (the SIMT attention_rows takes the rest). A block takes one KV head
// and up to FA_UNITS (query row, query head) units of it, 16 a warp (the
// rows of its mma tiles), and a slice of the keys in tiles of FA_T keys,
// each loaded once into shared memory for all of them (the next tile's
// loads in flight while this one is used). A warp computes its 16 x 32
// scores with m16n8k16 mmas (queries, rounded to F16 and pre-scaled, as A;
// keys as B through ldmatrix), updates each row's running max and sum on
// the score fragments (a row's values live in the four lanes of a quad),
// and adds P V with the score fragments, rounded to F16, as the A operand
// and V through ldmatrix.trans as B, into F32 accumulators. Slices are
// merged by the last block of a (head group, row tile) as attention_t
// does; the output is quantized on the way when a product reads it next.
#define FA_WARPS 4
#define FA_UNITS (16 * FA_WARPS)
#define FA_T 32

template <int D>
__device__ void attention_fa_t(const float* __restrict__ q, long long qstride, const u16* __restrict__ k,
                               long long kstride, const u16* __restrict__ v, long long vstride,
                               const int* __restrict__ pos, float* __restrict__ part, int* __restrict__ done,
                               float* __restrict__ y, long long ystride, signed char* __restrict__ xq,
                               float2* __restrict__ xd, int n_head, int n_kv_head, float scale, int n_ctx, int nb,
                               int gh, int qr) {
    const int S = D + 8;      // shared row stride in halves (16 bytes of padding: ldmatrix rows in distinct banks)
    const int CH = D / 8;     // 16-byte chunks a row
    const int LPT = FA_T * CH / (32 * FA_WARPS); // chunks of K (and of V) each thread loads a tile
    extern __shared__ uint4 smem[];
    u16* qs = (u16*)smem;
    u16* ks = qs + FA_UNITS * S;
    u16* vs = ks + FA_T * S;

    int G = n_head / n_kv_head, hchunks = (G + gh - 1) / gh;
    int kvh = blockIdx.x / hchunks, h0 = kvh * G + (blockIdx.x % hchunks) * gh, hend = kvh * G + G;
    int b0 = blockIdx.y * qr, split = blockIdx.z;
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
    int ucap = gh * qr;

    int maxp = 0;
    for (int i = 0; i < qr && b0 + i < nb; i++) maxp = max(maxp, pos[b0 + i]);
    int nkeys = min(maxp + 1, n_ctx);
    int nsplit = active_splits(nkeys);
    if (split >= nsplit) return;
    int chunk = (nkeys + nsplit - 1) / nsplit;
    int t0 = split * chunk, t1 = min(nkeys, t0 + chunk);

    // Queries: 16 bytes a load, eight loads in flight a thread; units past
    // the batch or the group are zero.
    const int QV = FA_UNITS * D / 4; // float4 of the tile
#pragma unroll
    for (int i0 = 0; i0 < QV; i0 += 8 * 32 * FA_WARPS) {
        float4 val[8];
#pragma unroll
        for (int k = 0; k < 8; k++) {
            int i = i0 + k * 32 * FA_WARPS + tid, u = i / (D / 4), d = 4 * (i - u * (D / 4));
            int b = b0 + u / gh, h = h0 + u % gh;
            val[k] = make_float4(0.f, 0.f, 0.f, 0.f);
            if (i < QV && u < ucap && b < nb && h < hend) val[k] = *(const float4*)(q + (size_t)b * qstride + h * D + d);
        }
#pragma unroll
        for (int k = 0; k < 8; k++) {
            int i = i0 + k * 32 * FA_WARPS + tid, u = i / (D / 4), d = 4 * (i - u * (D / 4));
            if (i < QV)
                *(uint2*)(qs + u * S + d) =
                    make_uint2(pack_half2(val[k].x * scale, val[k].y * scale), pack_half2(val[k].z * scale, val[k].w * scale));
        }
    }
    // this lane's two rows: units 16*warp + g and + 8
    int upos[2], ub[2], uh[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        int u = 16 * warp + g + 8 * r;
        ub[r] = b0 + u / gh;
        uh[r] = h0 + u % gh;
        upos[r] = (u < ucap && ub[r] < nb && uh[r] < hend) ? pos[ub[r]] : -1;
    }
    bool active = 16 * warp < ucap && b0 + (16 * warp) / gh < nb; // warp-uniform

    const uint4* kb = (const uint4*)(k + (size_t)kvh * D);
    const uint4* vb = (const uint4*)(v + (size_t)kvh * D);
    const long long ks16 = kstride / 8, vs16 = vstride / 8;
    uint4 kr[LPT], vr[LPT];
    auto load = [&](int tile0) {
#pragma unroll
        for (int i = 0; i < LPT; i++) {
            int idx = tid + 32 * FA_WARPS * i, r = idx / CH, c = idx - r * CH;
            kr[i] = make_uint4(0, 0, 0, 0);
            vr[i] = kr[i];
            if (tile0 + r < t1) {
                kr[i] = __ldg(kb + (size_t)(tile0 + r) * ks16 + c);
                vr[i] = __ldg(vb + (size_t)(tile0 + r) * vs16 + c);
            }
        }
    };
    if (t0 < t1) load(t0);
    __syncthreads(); // the queries are in shared memory
    unsigned qf[D / 16][4];
#pragma unroll
    for (int s = 0; s < D / 16; s++)
        ldmatrix_x4(qf[s], qs + (16 * warp + (lane & 7) + 8 * ((lane >> 3) & 1)) * S + 16 * s + 8 * (lane >> 4));

    float o[D / 8][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
    for (int n = 0; n < D / 8; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) o[n][i] = 0.f;

    for (int tile0 = t0; tile0 < t1; tile0 += FA_T) {
        __syncthreads(); // the last tile is no longer read
#pragma unroll
        for (int i = 0; i < LPT; i++) {
            int idx = tid + 32 * FA_WARPS * i, r = idx / CH, c = idx - r * CH;
            *(uint4*)(ks + r * S + 8 * c) = kr[i];
            *(uint4*)(vs + r * S + 8 * c) = vr[i];
        }
        __syncthreads();
        if (tile0 + FA_T < t1) load(tile0 + FA_T);
        if (!active) continue;

        float sc[4][4];
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int i = 0; i < 4; i++) sc[j][i] = 0.f;
#pragma unroll
        for (int s = 0; s < D / 16; s++)
#pragma unroll
            for (int jp = 0; jp < 2; jp++) {
                unsigned kf[4];
                ldmatrix_x4(kf, ks + (16 * jp + 8 * (lane >> 4) + (lane & 7)) * S + 16 * s + 8 * ((lane >> 3) & 1));
                mma_f16(sc[2 * jp], qf[s][0], qf[s][1], qf[s][2], qf[s][3], kf[0], kf[1]);
                mma_f16(sc[2 * jp + 1], qf[s][0], qf[s][1], qf[s][2], qf[s][3], kf[2], kf[3]);
            }
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float mx = -INFINITY;
#pragma unroll
            for (int j = 0; j < 4; j++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    int key = tile0 + 8 * j + 2 * t + e;
                    float s = (key < t1 && key <= upos[r]) ? sc[j][2 * r + e] : -INFINITY;
                    sc[j][2 * r + e] = s;
                    mx = fmaxf(mx, s);
                }
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            float mn = fmaxf(m[r], mx);
            float corr = mn == -INFINITY ? 1.f : __expf(m[r] - mn);
            float sum = 0.f;
#pragma unroll
            for (int j = 0; j < 4; j++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    float s = sc[j][2 * r + e];
                    float p = s == -INFINITY ? 0.f : __expf(s - mn);
                    sc[j][2 * r + e] = p;
                    sum += p;
                }
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            l[r] = l[r] * corr + sum;
            m[r] = mn;
#pragma unroll
            for (int n = 0; n < D / 8; n++) {
                o[n][2 * r] *= corr;
                o[n][2 * r + 1] *= corr;
            }
        }
#pragma unroll
        for (int s = 0; s < 2; s++) {
            unsigned a0 = pack_half2(sc[2 * s][0], sc[2 * s][1]), a1 = pack_half2(sc[2 * s][2], sc[2 * s][3]);
            unsigned a2 = pack_half2(sc[2 * s + 1][0], sc[2 * s + 1][1]);
            unsigned a3 = pack_half2(sc[2 * s + 1][2], sc[2 * s + 1][3]);
#pragma unroll
            for (int np = 0; np < D / 16; np++) {
                unsigned vf[4];
                ldmatrix_x4_trans(vf, vs + (16 * s + 8 * ((lane >> 3) & 1) + (lane & 7)) * S + 8 * (2 * np + (lane >> 4)));
                mma_f16(o[2 * np], a0, a1, a2, a3, vf[0], vf[1]);
                mma_f16(o[2 * np + 1], a0, a1, a2, a3, vf[2], vf[3]);
            }
        }
    }

    if (nsplit > 1) {
#pragma unroll
        for (int r = 0; r < 2; r++) {
            if (upos[r] < 0) continue;
            float* out = part + (((size_t)ub[r] * n_head + uh[r]) * gridDim.z + split) * (D + 2);
            if (t == 0) {
                out[0] = m[r];
                out[1] = l[r];
            }
#pragma unroll
            for (int n = 0; n < D / 8; n++) {
                out[2 + 8 * n + 2 * t] = o[n][2 * r];
                out[3 + 8 * n + 2 * t] = o[n][2 * r + 1];
            }
        }
        if (!last_slice(done + blockIdx.y * gridDim.x + blockIdx.x, nsplit)) return;
#pragma unroll
        for (int r = 0; r < 2; r++) {
            if (upos[r] < 0) continue;
            const float* pp = part + ((size_t)ub[r] * n_head + uh[r]) * gridDim.z * (D + 2);
            float M = -INFINITY, L = 0.f;
#pragma unroll
            for (int n = 0; n < D / 8; n++) o[n][2 * r] = o[n][2 * r + 1] = 0.f;
#pragma unroll 2
            for (int sp = 0; sp < nsplit; sp++) {
                const float* ps = pp + sp * (D + 2);
                float ms = __ldcg(ps), ls = __ldcg(ps + 1), c, f;
                float2 a[D / 8];
#pragma unroll
                for (int n = 0; n < D / 8; n++) a[n] = __ldcg((const float2*)(ps + 2 + 8 * n + 2 * t));
                merge_step(M, ms, c, f);
                L = L * c + ls * f;
#pragma unroll
                for (int n = 0; n < D / 8; n++) {
                    o[n][2 * r] = o[n][2 * r] * c + a[n].x * f;
                    o[n][2 * r + 1] = o[n][2 * r + 1] * c + a[n].y * f;
                }
            }
            l[r] = L;
        }
    }
    if (!active) return;
    // Normalise, write, and quantize each row's groups of 32 (a group is
    // the four lanes of a quad, 8 values each); every lane takes part in
    // the shuffles, only valid rows are stored.
    int P = q8_pitch(nb);
#pragma unroll
    for (int r = 0; r < 2; r++) {
        bool ok = upos[r] >= 0;
        float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;
        size_t row = (size_t)ub[r] * ystride + uh[r] * D;
#pragma unroll
        for (int n = 0; n < D / 8; n++) {
            o[n][2 * r] *= inv;
            o[n][2 * r + 1] *= inv;
            if (ok) {
                y[row + 8 * n + 2 * t] = o[n][2 * r];
                y[row + 8 * n + 2 * t + 1] = o[n][2 * r + 1];
            }
        }
        if (!xq) continue;
#pragma unroll
        for (int grp = 0; grp < D / 32; grp++) {
            float amax = 0.f;
#pragma unroll
            for (int n = 4 * grp; n < 4 * grp + 4; n++) amax = fmaxf(amax, fmaxf(fabsf(o[n][2 * r]), fabsf(o[n][2 * r + 1])));
            amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
            amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
            float d = amax / 127.f;
            int qsum = 0;
            int col = uh[r] * D + 32 * grp; // the group's first column
            signed char* gq = xq + q8_off(col >> 5, ok ? ub[r] : 0, P);
#pragma unroll
            for (int n = 4 * grp; n < 4 * grp + 4; n++) {
                int q0 = amax == 0.f ? 0 : __float2int_rn(o[n][2 * r] / d);
                int q1 = amax == 0.f ? 0 : __float2int_rn(o[n][2 * r + 1] / d);
                qsum += q0 + q1;
                if (ok) *(u16*)(gq + 8 * (n - 4 * grp) + 2 * t) = (u16)((q0 & 0xFF) | ((q1 & 0xFF) << 8));
            }
            qsum += __shfl_xor_sync(0xffffffffu, qsum, 1);
            qsum += __shfl_xor_sync(0xffffffffu, qsum, 2);
            if (ok && t == 0) xd[q8_sc(col >> 5, ub[r], P)] = make_float2(d, d * (float)qsum);
        }
    }
}

#define ATTENTION_FA(D)                                                                                      \
    extern "C" __global__ void __launch_bounds__(32 * FA_WARPS) attention_fa_f16_##D(                        \
        const float* q, long long qstride, const u16* k, long long kstride, const u16* v, long long vstride,  \
        const int* pos, float* part, int* done, float* y, long long ystride, signed char* xq, float2* xd,    \
        int n_head, int n_kv_head, int head_dim, float scale, int n_ctx, int nb, int gh, int qr) {          \
        grid_dep_begin();                                                                                   \
        attention_fa_t<D>(q, qstride, k, kstride, v, vstride, pos, part, done, y, ystride, xq, xd, n_head,  \
                          n_kv_head, scale, n_ctx, nb, gh, qr);                                             \
    }
ATTENTION_FA(64)
ATTENTION_FA(128)
