// Attention over KV caches of any cache type, K and V independently: F32,
// F16, Q8_0 or Q4_0 (llama.cpp's -ctk/-ctv). attention.cu keeps the tuned
// kernels for F32 or F16 K and V alike; these take every other pair. The
// quantized caches are read as they are stored and dequantized in
// registers: no dequantized copy of the cache is ever made.
//
// A Q8_0 or Q4_0 head row is a run of 34- or 18-byte blocks, 2-byte
// aligned at best, so it cannot be read with 16-byte loads of its own. A
// tile's rows are staged instead as the 16-byte-aligned chunks of global
// memory that cover them (never a chunk past the one holding the row's
// last byte, so no read leaves the allocation), stored into shared rows
// of 16*nc+4 bytes with 4-byte stores; a row's bytes start there at the
// offset its address has modulo 16. The odd word count of a shared row
// puts the rows of a tile in distinct banks for the lane-per-key reads.
// Readers take 4-byte words at any even offset as two aligned words
// joined by a funnel shift.
//
// As llama.cpp's flash attention does, and the CPU backend with it, a
// quantized K multiplies a query quantized to Q8_0 per 32 values
// (d = amax/127 as f16, q = round(x*127/amax)) with integer dot products:
// the score of a group is d_k*d_q*sum(k*q). F32 and F16 K multiply the
// F32 query. V is dequantized (d*q) and accumulated in F32.
#include "attention.cuh"

// kvt describes a cache type: bytes per 32 elements, whether its rows are
// 16-byte aligned (F32 and F16: Compile checks), whether a query for it is
// quantized, and the 16-byte loads a thread makes per tile of the decode
// (LD1) and the several-row (LDR) kernels, at most: the host picks tiles
// that need no more (ops_attention.go, kvLoads), so the registers for
// in-flight loads are no more than the type's widest heads need.
template <int T> struct kvt;
template <> struct kvt<T_F32> { enum { GB = 128, ALIGNED = 1, QUANT = 0, LD1 = 8, LDR = 4 }; };
template <> struct kvt<T_F16> { enum { GB = 64, ALIGNED = 1, QUANT = 0, LD1 = 8, LDR = 4 }; };
template <> struct kvt<T_Q8_0> { enum { GB = 34, ALIGNED = 0, QUANT = 1, LD1 = 5, LDR = 3 }; };
template <> struct kvt<T_Q4_0> { enum { GB = 18, ALIGNED = 0, QUANT = 1, LD1 = 5, LDR = 2 }; };

// kv_chunks is the 16-byte chunks a shared row of a head of D elements
// holds: the head's bytes plus up to 14 of misalignment before them,
// rounded up. ops_attention.go (kvChunks) mirrors it.
template <int T> __device__ __forceinline__ int kv_chunks(int D) {
    int hb = kvt<T>::GB * (D >> 5);
    return kvt<T>::ALIGNED ? hb >> 4 : (hb + 14 + 15) >> 4;
}
__device__ __forceinline__ int kv_srow(int nc) { return 16 * nc + 4; }

// kv_off is where key's row of a head starts in its shared row: the
// offset of its global address modulo 16 (32-bit arithmetic suffices).
__device__ __forceinline__ int kv_off(const u8* head, long long stride, int key) {
    return (int)(((unsigned)(size_t)head + (unsigned)key * (unsigned)stride) & 15u);
}

// kv_fetch loads this thread's share (NT threads, LD loads each) of a
// tile of T rows of one head, starting at key tile0, into registers:
// row r is chunk c = 0..nc-1 of the 16-byte-aligned run covering the hb
// bytes at head + (tile0+r)*stride. Chunks past the row's last byte and
// rows at or past t1 are zeros (finite values for the readers to skip).
template <int NT, int LD>
__device__ __forceinline__ void kv_fetch(const u8* __restrict__ head, long long stride, int hb, int nc, int T,
                                         int tile0, int t1, uint4 (&reg)[LD]) {
#pragma unroll
    for (int i = 0; i < LD; i++) {
        int idx = threadIdx.x + NT * i, r = idx / nc, c = idx - r * nc;
        reg[i] = make_uint4(0, 0, 0, 0);
        if (idx < T * nc && tile0 + r < t1) {
            const u8* a = head + (size_t)(tile0 + r) * stride;
            int off = (int)((size_t)a & 15);
            if (16 * c < off + hb) reg[i] = __ldg((const uint4*)(a - off) + c);
        }
    }
}

// kv_put stores what kv_fetch loaded into the tile's shared rows.
template <int NT, int LD>
__device__ __forceinline__ void kv_put(u8* sm, int nc, int T, const uint4 (&reg)[LD]) {
    const int sr = kv_srow(nc);
#pragma unroll
    for (int i = 0; i < LD; i++) {
        int idx = threadIdx.x + NT * i, r = idx / nc, c = idx - r * nc;
        if (idx < T * nc) {
            unsigned* p = (unsigned*)(sm + r * sr + 16 * c);
            p[0] = reg[i].x;
            p[1] = reg[i].y;
            p[2] = reg[i].z;
            p[3] = reg[i].w;
        }
    }
}

// ld_words reads N 4-byte words at the even byte offset p of sm (a
// 4-byte-aligned shared pointer): N+1 aligned words, shifted together.
template <int N> __device__ __forceinline__ void ld_words(const u8* sm, int p, unsigned (&w)[N]) {
    const unsigned* a = (const unsigned*)(sm + (p & ~3));
    unsigned sh = (unsigned)(p & 2) * 8u, x[N + 1];
#pragma unroll
    for (int i = 0; i <= N; i++) x[i] = a[i];
#pragma unroll
    for (int i = 0; i < N; i++) w[i] = __funnelshift_r(x[i], x[i + 1], sh);
}
__device__ __forceinline__ float ld_half(const u8* sm, int p) { return h2f(*(const u16*)(sm + p)); }

// qref is a query head as the K type reads it: F32 values (f), or Q8_0
// groups: 32 quants a group as words (w), the group scales (d, f16
// values) and the sums of each group's quants (s, for Q4_0's offset).
struct qref {
    const float* f;
    const int* w;
    const float* d;
    const int* s;
};

// kv_dot is group g's part of q . k for a K row whose bytes start at the
// shared offset p.
template <int KT> __device__ __forceinline__ float kv_dot(const u8* sm, int p, int g, const qref& q);
template <> __device__ __forceinline__ float kv_dot<T_Q8_0>(const u8* sm, int p, int g, const qref& q) {
    int b = p + 34 * g;
    unsigned w[8];
    ld_words<8>(sm, b + 2, w);
    const int* qw = q.w + 8 * g;
    int s0 = 0, s1 = 0;
#pragma unroll
    for (int k = 0; k < 8; k += 2) {
        s0 = __dp4a((int)w[k], qw[k], s0);
        s1 = __dp4a((int)w[k + 1], qw[k + 1], s1);
    }
    return ld_half(sm, b) * q.d[g] * (float)(s0 + s1);
}
template <> __device__ __forceinline__ float kv_dot<T_Q4_0>(const u8* sm, int p, int g, const qref& q) {
    int b = p + 18 * g;
    unsigned w[4];
    ld_words<4>(sm, b + 2, w);
    const int* qw = q.w + 8 * g;
    int s0 = 0, s1 = 0;
#pragma unroll
    for (int k = 0; k < 4; k++) { // low nibbles: elements 0-15, high: 16-31
        s0 = __dp4a((int)(w[k] & 0x0F0F0F0Fu), qw[k], s0);
        s1 = __dp4a((int)((w[k] >> 4) & 0x0F0F0F0Fu), qw[4 + k], s1);
    }
    return ld_half(sm, b) * q.d[g] * (float)(s0 + s1 - 8 * q.s[g]);
}
template <> __device__ __forceinline__ float kv_dot<T_F16>(const u8* sm, int p, int g, const qref& q) {
    const unsigned* a = (const unsigned*)(sm + p + 64 * g);
    const float2* qf = (const float2*)(q.f + 32 * g);
    float s0 = 0.f, s1 = 0.f;
#pragma unroll
    for (int k = 0; k < 16; k++) {
        unsigned u = a[k];
        float2 f = __half22float2(*(const __half2*)&u), x = qf[k];
        s0 = fmaf(f.x, x.x, s0);
        s1 = fmaf(f.y, x.y, s1);
    }
    return s0 + s1;
}
template <> __device__ __forceinline__ float kv_dot<T_F32>(const u8* sm, int p, int g, const qref& q) {
    const float* a = (const float*)(sm + p + 128 * g);
    const float* x = q.f + 32 * g;
    float s0 = 0.f, s1 = 0.f;
#pragma unroll
    for (int k = 0; k < 32; k += 2) {
        s0 = fmaf(a[k], x[k], s0);
        s1 = fmaf(a[k + 1], x[k + 1], s1);
    }
    return s0 + s1;
}

// kv_v8 adds pw times elements 8u..8u+7 of a V row (bytes at the shared
// offset p) to acc; quantized values are dequantized to d*q first, as
// the CPU does.
template <int VT> __device__ __forceinline__ void kv_v8(const u8* sm, int p, int u, float pw, float (&acc)[8]);
template <> __device__ __forceinline__ void kv_v8<T_Q8_0>(const u8* sm, int p, int u, float pw, float (&acc)[8]) {
    int b = p + 34 * (u >> 2);
    float d = ld_half(sm, b);
    unsigned w[2];
    ld_words<2>(sm, b + 2 + 8 * (u & 3), w);
#pragma unroll
    for (int e = 0; e < 8; e++) {
        int q = (int)(signed char)(w[e >> 2] >> (8 * (e & 3)));
        acc[e] = fmaf(d * (float)q, pw, acc[e]);
    }
}
template <> __device__ __forceinline__ void kv_v8<T_Q4_0>(const u8* sm, int p, int u, float pw, float (&acc)[8]) {
    // elements 8u..8u+7 of a block: bytes 0-7 or 8-15, low nibbles for
    // elements 0-15, high for 16-31
    int b = p + 18 * (u >> 2), sub = u & 3;
    float d = ld_half(sm, b);
    unsigned w[2];
    ld_words<2>(sm, b + 2 + 8 * (sub & 1), w);
    int sh = 4 * (sub >> 1);
#pragma unroll
    for (int e = 0; e < 8; e++) {
        int q = (int)((w[e >> 2] >> (8 * (e & 3) + sh)) & 15u) - 8;
        acc[e] = fmaf(d * (float)q, pw, acc[e]);
    }
}
template <> __device__ __forceinline__ void kv_v8<T_F16>(const u8* sm, int p, int u, float pw, float (&acc)[8]) {
    const unsigned* a = (const unsigned*)(sm + p + 16 * u);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        unsigned x = a[i];
        float2 f = __half22float2(*(const __half2*)&x);
        acc[2 * i] = fmaf(f.x, pw, acc[2 * i]);
        acc[2 * i + 1] = fmaf(f.y, pw, acc[2 * i + 1]);
    }
}
template <> __device__ __forceinline__ void kv_v8<T_F32>(const u8* sm, int p, int u, float pw, float (&acc)[8]) {
    const float* a = (const float*)(sm + p + 32 * u);
#pragma unroll
    for (int e = 0; e < 8; e++) acc[e] = fmaf(a[e], pw, acc[e]);
}

// kv_v1 is element 32*dd + lane of a V row at the shared offset p.
template <int VT> __device__ __forceinline__ float kv_v1(const u8* sm, int p, int dd, int lane);
template <> __device__ __forceinline__ float kv_v1<T_Q8_0>(const u8* sm, int p, int dd, int lane) {
    int b = p + 34 * dd;
    return ld_half(sm, b) * (float)(signed char)sm[b + 2 + lane];
}
template <> __device__ __forceinline__ float kv_v1<T_Q4_0>(const u8* sm, int p, int dd, int lane) {
    int b = p + 18 * dd;
    int q = ((sm[b + 2 + (lane & 15)] >> (4 * (lane >> 4))) & 15) - 8;
    return ld_half(sm, b) * (float)q;
}
template <> __device__ __forceinline__ float kv_v1<T_F16>(const u8* sm, int p, int dd, int lane) {
    return ld_half(sm, p + 64 * dd + 2 * lane);
}
template <> __device__ __forceinline__ float kv_v1<T_F32>(const u8* sm, int p, int dd, int lane) {
    return *(const float*)(sm + p + 128 * dd + 4 * lane);
}

// quantize_query quantizes one group of a query head (lane i holds x[i])
// as kernels/quant's Q8_0 quantizer does: d = amax/127 stored as f16,
// q = round-to-even(x*(127/amax)) with the product rounded first. It
// writes the quants, the f16-rounded scale and the quants' sum.
__device__ __forceinline__ void quantize_query(float x, signed char* qb, float* qd, int* qs) {
    int lane = threadIdx.x & 31;
    float amax = warp_max(fabsf(x));
    float id = amax != 0.f ? __fdiv_rn(127.f, amax) : 0.f;
    int qi = __float2int_rn(__fmul_rn(x, id));
    qb[lane] = (signed char)qi;
    int s = qi;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) {
        *qd = h2f(f2h(__fdiv_rn(amax, 127.f)));
        *qs = s;
    }
}

// ---------------------------------------------------------------------
// Decode: one query row per (head, query, key slice) block of 128
// threads, as attention_t of attention.cu: tiles of T keys (64, 32 or 16,
// the most whose chunks of K and of V take at most LD1 loads a thread
// each; the next tile's in flight while this one is used), G = 128/T threads a
// key for the scores, and for the weighted sum of V each thread owns 8
// output elements for one residue class of keys; the last slice of a
// (head, query) to finish merges the slices.
#define AKV_THREADS 128
// Shared layout: query (1024 bytes: D floats, or D quants), its group
// scales (32 bytes) and sums (32 bytes), then the K and V tiles, then T
// scores and T weights. ops_attention.go (kvSharedBytes) mirrors it.
#define AKV_Q 1088

template <int KT, int VT>
__device__ void attention_kv_t(const float* __restrict__ q, long long qstride, const u8* __restrict__ k,
                               long long kstride, const u8* __restrict__ v, long long vstride,
                               const int* __restrict__ pos, float* __restrict__ part, int* __restrict__ done,
                               float* __restrict__ y, long long ystride, signed char* __restrict__ xq,
                               float2* __restrict__ xd, int n_head, int n_kv_head, int D, float scale, int n_ctx,
                               int T) {
    extern __shared__ uint4 smem[];
    u8* base = (u8*)smem;
    const int ng = D >> 5;
    const int nck = kv_chunks<KT>(D), ncv = kv_chunks<VT>(D);
    const int srk = kv_srow(nck), srv = kv_srow(ncv);
    const int G = AKV_THREADS / T;
    float* qf = (float*)base;
    float* qd = (float*)(base + 1024);
    int* qsum = (int*)(base + 1056);
    u8* ks = base + AKV_Q;
    u8* vs = ks + T * srk;
    float* es = (float*)(vs + T * srv);
    float* pe = es + T;

    int h = blockIdx.x, b = blockIdx.y, split = blockIdx.z;
    int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    int kvh = h / (n_head / n_kv_head);
    int p = pos[b];
    int nkeys = min(p + 1, n_ctx);
    int nsplit = active_splits(nkeys);
    if (split >= nsplit) return;
    int chunk = (nkeys + nsplit - 1) / nsplit;
    int t0 = split * chunk, t1 = min(nkeys, t0 + chunk);
    const int hbk = kvt<KT>::GB * ng, hbv = kvt<VT>::GB * ng;
    const u8* kh = k + (size_t)kvh * hbk;
    const u8* vh = v + (size_t)kvh * hbv;

    uint4 kr[kvt<KT>::LD1], vr[kvt<VT>::LD1];
    if (t0 < t1) {
        kv_fetch<AKV_THREADS>(kh, kstride, hbk, nck, T, t0, t1, kr);
        kv_fetch<AKV_THREADS>(vh, vstride, hbv, ncv, T, t0, t1, vr);
    }
    const float* qh = q + b * qstride + h * D;
    if (kvt<KT>::QUANT) {
        for (int g = w; g < ng; g += AKV_THREADS / 32)
            quantize_query(qh[32 * g + lane], (signed char*)qf + 32 * g, qd + g, qsum + g);
    } else {
        for (int i = tid; i < D; i += AKV_THREADS) qf[i] = qh[i];
    }
    const qref qr = {qf, (const int*)qf, qd, qsum};

    // The V pass: thread (vg, vu) adds elements 8vu..8vu+7 of keys vg,
    // vg+classes, ...
    const int NU = D >> 3, classes = AKV_THREADS / NU, vg = tid / NU, vu = tid - vg * NU;
    float acc[8];
#pragma unroll
    for (int i = 0; i < 8; i++) acc[i] = 0.f;
    float m = -INFINITY, l = 0.f;
    for (int tile0 = t0; tile0 < t1; tile0 += T) {
        int n = min(T, t1 - tile0);
        kv_put<AKV_THREADS>(ks, nck, T, kr);
        kv_put<AKV_THREADS>(vs, ncv, T, vr);
        __syncthreads();
        if (tile0 + T < t1) {
            kv_fetch<AKV_THREADS>(kh, kstride, hbk, nck, T, tile0 + T, t1, kr);
            kv_fetch<AKV_THREADS>(vh, vstride, hbv, ncv, T, tile0 + T, t1, vr);
        }

        int j = tid / G, s = tid - j * G;
        float a = 0.f;
        if (j < n) {
            int rp = j * srk + kv_off(kh, kstride, tile0 + j);
            for (int g = s; g < ng; g += G) a += kv_dot<KT>(ks, rp, g, qr);
        }
        for (int o = G >> 1; o > 0; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
        if (s == 0) es[j] = j < n ? a * scale : -INFINITY;
        __syncthreads();

        float corr = tile_softmax(es, pe, T, m, l);
#pragma unroll
        for (int i = 0; i < 8; i++) acc[i] *= corr;
        __syncthreads();

        if (vg < classes) {
#pragma unroll 2
            for (int jj = vg; jj < n; jj += classes)
                kv_v8<VT>(vs, jj * srv + kv_off(vh, vstride, tile0 + jj), vu, pe[jj], acc);
        }
        __syncthreads();
    }

    // Sum the key classes (red: at most 4096 bytes, within the tiles:
    // T*(srk+srv) >= 64*72), then merge and write.
    sum_classes<AKV_THREADS, 8>(acc, (float*)ks, qf, vg, classes, 8 * vu, D);
    decode_finish<AKV_THREADS>(qf, m, l, part, done, y, ystride, xq, xd, b, h, n_head, D, split, nsplit);
}

// ---------------------------------------------------------------------
// Several query rows (verification, prefill), as attention_rows_t of
// attention.cu: a block takes one KV head, a slice of the keys, and up to
// ARK_UNITS_MAX (query row, query head) units of that KV head (gh heads
// of the group by qr rows), so each K/V tile is read once for all of
// them. A warp owns its units: lane j scores key j of a tile of T (32,
// or 16 where a larger tile would not fit in shared memory or need more
// than LDR loads a thread: lanes 16-31 then idle while scoring), and each
// lane owns elements lane + 32*dd of
// the output. The next tile's loads are in flight while this one is used.
#define ARK_THREADS 256
#define ARK_WARPS (ARK_THREADS / 32)
#define ARK_UNITS_MAX 16

// Shared layout: the queries (qbytes: ucap*D floats, or ucap*D quants
// then ucap*ng scales and ucap*ng sums), then the K and V tiles.
// ops_attention.go (planRowAttention) computes qbytes and T.
template <int KT, int VT>
__device__ void attention_rows_kv_t(const float* __restrict__ q, long long qstride, const u8* __restrict__ k,
                                    long long kstride, const u8* __restrict__ v, long long vstride,
                                    const int* __restrict__ pos, float* __restrict__ part, int* __restrict__ done,
                                    float* __restrict__ y, long long ystride, signed char* __restrict__ xq,
                                    float2* __restrict__ xd, int n_head, int n_kv_head, int D, float scale,
                                    int n_ctx, int nb, int gh, int qr, int T, int qbytes) {
    extern __shared__ uint4 smem[];
    u8* base = (u8*)smem;
    const int ng = D >> 5, ucap = gh * qr;
    const int nck = kv_chunks<KT>(D), ncv = kv_chunks<VT>(D);
    const int srk = kv_srow(nck), srv = kv_srow(ncv);
    float* qf = (float*)base;
    signed char* qb = (signed char*)base;
    float* qd = (float*)(base + ucap * D);
    int* qsum = (int*)(qd + ucap * ng);
    u8* ks = base + qbytes;
    u8* vs = ks + T * srk;

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
    const int hbk = kvt<KT>::GB * ng, hbv = kvt<VT>::GB * ng;
    const u8* kh = k + (size_t)kvh * hbk;
    const u8* vh = v + (size_t)kvh * hbv;

    uint4 kr[kvt<KT>::LDR], vr[kvt<VT>::LDR];
    if (t0 < t1) {
        kv_fetch<ARK_THREADS>(kh, kstride, hbk, nck, T, t0, t1, kr);
        kv_fetch<ARK_THREADS>(vh, vstride, hbv, ncv, T, t0, t1, vr);
    }

    // queries; unit u is row b0 + u/gh, head h0 + u%gh (zeros past the
    // batch or the group)
    if (kvt<KT>::QUANT) {
        for (int pr = warp; pr < ucap * ng; pr += ARK_WARPS) {
            int u = pr / ng, g = pr - u * ng, b = b0 + u / gh, h = h0 + u % gh;
            float x = (b < nb && h < hend) ? q[(size_t)b * qstride + h * D + 32 * g + lane] : 0.f;
            quantize_query(x, qb + u * D + 32 * g, qd + u * ng + g, qsum + u * ng + g);
        }
    } else {
        for (int i = tid; i < ucap * D; i += ARK_THREADS) {
            int u = i / D, d = i - u * D, b = b0 + u / gh, h = h0 + u % gh;
            qf[i] = (b < nb && h < hend) ? q[(size_t)b * qstride + h * D + d] : 0.f;
        }
    }

    const int UPW = ARK_UNITS_MAX / ARK_WARPS; // units per warp, at most
    const int DP = D >> 5;                     // output elements per lane
    float m[UPW], l[UPW], acc[UPW][8];
    int upos[UPW];
#pragma unroll
    for (int i = 0; i < UPW; i++) {
        m[i] = -INFINITY;
        l[i] = 0.f;
        int u = warp + ARK_WARPS * i, b = b0 + u / gh, h = h0 + u % gh;
        upos[i] = (u < ucap && b < nb && h < hend) ? pos[b] : -1; // -1: no unit
#pragma unroll
        for (int e = 0; e < 8; e++) acc[i][e] = 0.f;
    }

    for (int tile0 = t0; tile0 < t1; tile0 += T) {
        __syncthreads(); // the previous tile is no longer read (and the queries are in place)
        kv_put<ARK_THREADS>(ks, nck, T, kr);
        kv_put<ARK_THREADS>(vs, ncv, T, vr);
        __syncthreads();
        if (tile0 + T < t1) {
            kv_fetch<ARK_THREADS>(kh, kstride, hbk, nck, T, tile0 + T, t1, kr);
            kv_fetch<ARK_THREADS>(vh, vstride, hbv, ncv, T, tile0 + T, t1, vr);
        }
        int key = tile0 + lane;
        int krp = lane < T ? lane * srk + kv_off(kh, kstride, key) : 0;
#pragma unroll
        for (int i = 0; i < UPW; i++) {
            int p = upos[i];
            if (p < tile0) continue; // warp-uniform: no key of this tile is visible (or no unit)
            int u = warp + ARK_WARPS * i;
            const qref qu = {qf + u * D, (const int*)(qb + u * D), qd + u * ng, qsum + u * ng};
            float a = 0.f;
            if (lane < T)
                for (int g = 0; g < ng; g++) a += kv_dot<KT>(ks, krp, g, qu);
            bool ok = lane < T && key < t1 && key <= p;
            float e = key_softmax(ok ? a * scale : -INFINITY, ok, true, m[i], l[i], acc[i]);
            // four keys at a time: their weights and V reads are independent
            int nk = min(T, min(t1, p + 1) - tile0);
            for (int j0 = 0; j0 < nk; j0 += 4) {
                float pj[4];
                int vp[4];
#pragma unroll
                for (int q4 = 0; q4 < 4; q4++) {
                    int jr = (j0 + q4) & (T - 1); // a row of the tile; its weight is 0 past nk
                    pj[q4] = __shfl_sync(0xffffffffu, e, jr);
                    if (j0 + q4 >= nk) pj[q4] = 0.f;
                    vp[q4] = jr * srv + kv_off(vh, vstride, tile0 + jr);
                }
#pragma unroll
                for (int d = 0; d < 8; d++) {
                    if (d < DP) {
                        float v0 = kv_v1<VT>(vs, vp[0], d, lane), v1 = kv_v1<VT>(vs, vp[1], d, lane);
                        float v2 = kv_v1<VT>(vs, vp[2], d, lane), v3 = kv_v1<VT>(vs, vp[3], d, lane);
                        acc[i][d] += (pj[0] * v0 + pj[1] * v1) + (pj[2] * v2 + pj[3] * v3);
                    }
                }
            }
        }
    }

    rows_finish<ARK_WARPS, UPW>(m, l, acc, upos, part, done, y, ystride, xq, xd, n_head, D, nb, b0, h0, gh, split,
                                nsplit);
}

// Entry points: attention_kv_<K>_<V> (one query row a block) and
// attention_rows_kv_<K>_<V>, for every pair but F32/F32 and F16/F16.
#define ATTENTION_KV(KT, VT, name)                                                                            \
    extern "C" __global__ void __launch_bounds__(AKV_THREADS) attention_kv_##name(                           \
        const float* q, long long qstride, const u8* k, long long kstride, const u8* v, long long vstride,    \
        const int* pos, float* part, int* done, float* y, long long ystride, signed char* xq, float2* xd,    \
        int n_head, int n_kv_head, int head_dim, float scale, int n_ctx, int T) {                            \
        grid_dep_begin();                                                                                    \
        attention_kv_t<KT, VT>(q, qstride, k, kstride, v, vstride, pos, part, done, y, ystride, xq, xd,      \
                               n_head, n_kv_head, head_dim, scale, n_ctx, T);                                \
    }                                                                                                        \
    extern "C" __global__ void __launch_bounds__(ARK_THREADS) attention_rows_kv_##name(                      \
        const float* q, long long qstride, const u8* k, long long kstride, const u8* v, long long vstride,    \
        const int* pos, float* part, int* done, float* y, long long ystride, signed char* xq, float2* xd,    \
        int n_head, int n_kv_head, int head_dim, float scale, int n_ctx, int nb, int gh, int qr, int T,      \
        int qbytes) {                                                                                        \
        grid_dep_begin();                                                                                    \
        attention_rows_kv_t<KT, VT>(q, qstride, k, kstride, v, vstride, pos, part, done, y, ystride, xq, xd, \
                                    n_head, n_kv_head, head_dim, scale, n_ctx, nb, gh, qr, T, qbytes);       \
    }
ATTENTION_KV(T_F32, T_F16, f32_f16)
ATTENTION_KV(T_F32, T_Q8_0, f32_q8_0)
ATTENTION_KV(T_F32, T_Q4_0, f32_q4_0)
ATTENTION_KV(T_F16, T_F32, f16_f32)
ATTENTION_KV(T_F16, T_Q8_0, f16_q8_0)
ATTENTION_KV(T_F16, T_Q4_0, f16_q4_0)
ATTENTION_KV(T_Q8_0, T_F32, q8_0_f32)
ATTENTION_KV(T_Q8_0, T_F16, q8_0_f16)
ATTENTION_KV(T_Q8_0, T_Q8_0, q8_0_q8_0)
ATTENTION_KV(T_Q8_0, T_Q4_0, q8_0_q4_0)
ATTENTION_KV(T_Q4_0, T_F32, q4_0_f32)
ATTENTION_KV(T_Q4_0, T_F16, q4_0_f16)
ATTENTION_KV(T_Q4_0, T_Q8_0, q4_0_q8_0)
ATTENTION_KV(T_Q4_0, T_Q4_0, q4_0_q4_0)
