// Shared device helpers: loads of ggml blocks at their natural (2-byte)
// alignment, half/bf16 conversion, warp reductions, and dequantization of any
// supported weight type, 32 elements at a time.
#pragma once
#include <cuda_fp16.h>
#include <stdint.h>

typedef unsigned char u8;
typedef unsigned short u16;

// ggml type numbers (kernels/quant).
enum {
    T_F32 = 0, T_F16 = 1, T_Q4_0 = 2, T_Q4_1 = 3, T_Q5_0 = 6, T_Q5_1 = 7,
    T_Q8_0 = 8, T_Q2_K = 10, T_Q3_K = 11, T_Q4_K = 12, T_Q5_K = 13,
    T_Q6_K = 14, T_IQ4_NL = 20, T_IQ4_XS = 23, T_BF16 = 30,
};

// grid_dep_begin opens every kernel. On sm_90 and later the backend
// launches kernels with programmatic dependent launch, so the driver
// prepares a kernel's launch while the kernel before it in the stream still
// runs; each kernel therefore first waits for its predecessor to finish and
// its writes to be visible (griddepcontrol.wait). Nothing may touch global
// memory before this call. A kernel does not signal its successor early
// (griddepcontrol.launch_dependents): on the H200 that put the successor's
// blocks on the multiprocessors to wait there, and decode lost 1-16%
// against this (kernels/cuda/NOTES.md, call 12). Older targets order
// launches as usual and compile this to nothing.
__device__ __forceinline__ void grid_dep_begin() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// cp_async16 copies 16 bytes from global to shared memory; cp_async_commit
// closes a group of copies; cp_async_wait<N> waits until at most N of the
// thread's groups are still in flight.
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned a = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(a), "l"(src) : "memory");
#else
    *(uint4*)dst = __ldg((const uint4*)src);
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
template <int N> __device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

__device__ __forceinline__ float h2f(u16 h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ float bf2f(u16 h) { return __uint_as_float(((unsigned)h) << 16); }
__device__ __forceinline__ u16 f2h(float f) { return __half_as_ushort(__float2half_rn(f)); }

__device__ __forceinline__ u16 ld16(const u8* p) { return *(const u16*)p; }
// Jobs: up to three products that share their activations (Q, K and V;
// gate and up) run as one launch, blockIdx.y choosing the job (the
// products of matvec.cu and the tiles of mma.cu).
#define JOBS_PARAMS                                                                             \
    const u8 *w0, long long ws0, float *y0, long long ys0, int r0, const u8 *w1, long long ws1, \
        float *y1, long long ys1, int r1, const u8 *w2, long long ws2, float *y2, long long ys2, int r2
#define PICK_JOB_AT(job)                                             \
    const u8* w = (job) == 0 ? w0 : ((job) == 1 ? w1 : w2);          \
    long long wstride = (job) == 0 ? ws0 : ((job) == 1 ? ws1 : ws2); \
    float* y = (job) == 0 ? y0 : ((job) == 1 ? y1 : y2);             \
    long long ystride = (job) == 0 ? ys0 : ((job) == 1 ? ys1 : ys2); \
    int rows = (job) == 0 ? r0 : ((job) == 1 ? r1 : r2);
#define PICK_JOB PICK_JOB_AT(blockIdx.y)
// PICK_TILE_JOB: the prefill tiles' block order (prefill.cu, sm90a). The
// grid is (row blocks, jobs, batch blocks), but blocks start in the order
// of their linear index with the batch blocks fastest, so that the blocks
// of one weight tile run side by side and read it from memory once. It
// declares the tile's bx (row block) and bz (batch block) and picks the job.
#define PICK_TILE_JOB                                                                                 \
    unsigned lin = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);                    \
    int bz = lin % gridDim.z, rest = lin / gridDim.z, bx = rest % gridDim.x, job = rest / gridDim.x;  \
    PICK_JOB_AT(job)

// ld32 reads 4 bytes that are only 2-byte aligned (ggml blocks are).
__device__ __forceinline__ unsigned ld32(const u8* p) {
    const u16* q = (const u16*)p;
    return (unsigned)q[0] | ((unsigned)q[1] << 16);
}
__device__ __forceinline__ float ldh(const u8* p) { return h2f(ld16(p)); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// block_sum reduces over a whole block (blockDim.x a multiple of 32, at
// most 1024); every thread gets the sum. scratch holds 32 floats.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    v = warp_sum(v);
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) scratch[w] = v;
    __syncthreads();
    int nw = blockDim.x >> 5;
    v = lane < nw ? scratch[lane] : 0.f;
    return warp_sum(v);
}

// A grid of attention is cut in gridDim.z key slices, as many as the
// cache's capacity may want (workspace.AttentionSplits and
// AttentionRowSplits); at run time only the first active_splits of them
// take keys, slices of at least SLICE_KEYS (one tile of 64 keys of an F16
// head of 128), and the others exit at once. A short context in a large
// cache is then not spread thin over slices that each pay a partial write
// and a share of the merge: at a capacity of 4096, decode of the 1.7B
// Q4_K_M shape ran at 0.925x of its tok/s at 512, and now at 0.98-1.0x
// (kernels/cuda/NOTES.md, hcuda2's call). The count depends only on the
// block's key count, which every block of a (head, query), or of a
// several-row block's units, computes alike, so the blocks that count
// themselves done and the merge agree on it; and a captured graph stays
// valid as the context grows. A unit's partials keep a stride of gridDim.z
// slices: units of other blocks may have other counts.
#define SLICE_KEYS 64
__device__ __forceinline__ int active_splits(int nkeys) {
    return max(1, min((int)gridDim.z, (nkeys + SLICE_KEYS - 1) / SLICE_KEYS));
}

// Attention over several key slices leaves per slice s a running maximum
// m_s, a weight total l_s and unnormalised sums acc_s (-inf, 0 and zeros
// for a slice that saw no key); the last block of a (head, query) to finish
// merges them. merge_step folds one slice into the running (M, L): it
// returns in c the factor of what was summed so far and in f the slice's.
// Taking values already loaded, it lets the merge issue every slice's loads
// at once: read slice by slice, behind a test of l_s, the merge cost one
// round trip to L2 a slice (kernels/cuda/NOTES.md, calls 22-23).
__device__ __forceinline__ void merge_step(float& M, float ms, float& c, float& f) {
    float mn = fmaxf(M, ms);
    c = M == mn ? 1.f : __expf(M - mn);
    f = ms == mn ? 1.f : __expf(ms - mn);
    M = mn;
}

// Activations quantized to 8 bits (the integer products' input) are laid
// out group-major: for each group g of 32 columns, the rows' 32-byte groups
// one after another, P (q8_pitch) of them, then the scales likewise: row b's
// group g is at xq + q8_off(g, b, P) and its (d, d*sum(q)) pair at
// xd[g*P + b]. A tensor-core tile of 8 rows then reads one group of all its
// rows in one contiguous 256-byte load, and a lane's two neighbouring
// rows' scales in one 16-byte load (P is even above one row).
// workspace.Q8Pitch in Go is the same formula.
__device__ __forceinline__ int q8_pitch(int rows) { return rows <= 1 ? 1 : (rows + 1) & ~1; }
__device__ __forceinline__ size_t q8_off(int g, int b, int P) { return ((size_t)g * P + b) * 32; }
__device__ __forceinline__ size_t q8_sc(int g, int b, int P) { return (size_t)g * P + b; }

// quantize_group quantizes one group of 32 values, one per lane, into
// its place of the q8 layout (xq and xd point at the group's values and
// scale pair).
__device__ __forceinline__ void quantize_group(float v, signed char* xq, float2* xd) {
    int lane = threadIdx.x & 31;
    float amax = warp_max(fabsf(v));
    float d = amax / 127.f;
    int q = amax == 0.f ? 0 : __float2int_rn(v / d);
    xq[lane] = (signed char)q;
    float s = warp_sum((float)q);
    if (lane == 0) *xd = make_float2(d, d * s);
}

__constant__ signed char kIQ4NL[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                        1, 13, 25, 38, 53, 69, 89, 113};

// k4_scale unpacks sub-block j's 6-bit scale and min of a Q4_K/Q5_K block.
__device__ __forceinline__ void k4_scale(const u8* s, int j, float* sc, float* m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

// k4_scale_hdr is k4_scale on a Q4_K/Q5_K block's first 16 bytes held in
// registers (d, dmin, then the 12 scale bytes in y, z, w), so no local
// copy is made to index them.
__device__ __forceinline__ unsigned hdr_byte(uint4 h, int i) {
    unsigned w = i < 4 ? h.y : (i < 8 ? h.z : h.w);
    return (w >> (8 * (i & 3))) & 0xFF;
}
__device__ __forceinline__ void k4_scale_hdr(uint4 h, int j, float* sc, float* m) {
    if (j < 4) {
        *sc = hdr_byte(h, j) & 63;
        *m = hdr_byte(h, j + 4) & 63;
    } else {
        *sc = (hdr_byte(h, j + 4) & 0xF) | ((hdr_byte(h, j - 4) >> 6) << 4);
        *m = (hdr_byte(h, j + 4) >> 4) | ((hdr_byte(h, j) >> 6) << 4);
    }
}

// Layout of each type: elements per block and bytes per block.
template <int T> struct blk;
template <> struct blk<T_F32> { enum { QK = 1, BYTES = 4 }; };
template <> struct blk<T_F16> { enum { QK = 1, BYTES = 2 }; };
template <> struct blk<T_BF16> { enum { QK = 1, BYTES = 2 }; };
template <> struct blk<T_Q4_0> { enum { QK = 32, BYTES = 18 }; };
template <> struct blk<T_Q4_1> { enum { QK = 32, BYTES = 20 }; };
template <> struct blk<T_Q5_0> { enum { QK = 32, BYTES = 22 }; };
template <> struct blk<T_Q5_1> { enum { QK = 32, BYTES = 24 }; };
template <> struct blk<T_Q8_0> { enum { QK = 32, BYTES = 34 }; };
template <> struct blk<T_IQ4_NL> { enum { QK = 32, BYTES = 18 }; };
template <> struct blk<T_Q2_K> { enum { QK = 256, BYTES = 84 }; };
template <> struct blk<T_Q3_K> { enum { QK = 256, BYTES = 110 }; };
template <> struct blk<T_Q4_K> { enum { QK = 256, BYTES = 144 }; };
template <> struct blk<T_Q5_K> { enum { QK = 256, BYTES = 176 }; };
template <> struct blk<T_Q6_K> { enum { QK = 256, BYTES = 210 }; };
template <> struct blk<T_IQ4_XS> { enum { QK = 256, BYTES = 136 }; };

// dequant32 writes elements [32g, 32g+32) of a row of type T to out.
template <int T> __device__ void dequant32(const u8* row, int g, float* out);

template <> __device__ __forceinline__ void dequant32<T_F32>(const u8* row, int g, float* out) {
    const float* p = (const float*)(row + 128 * (size_t)g);
#pragma unroll
    for (int i = 0; i < 32; i++) out[i] = p[i];
}
template <> __device__ __forceinline__ void dequant32<T_F16>(const u8* row, int g, float* out) {
    const u8* p = row + 64 * (size_t)g;
#pragma unroll
    for (int i = 0; i < 32; i++) out[i] = ldh(p + 2 * i);
}
template <> __device__ __forceinline__ void dequant32<T_BF16>(const u8* row, int g, float* out) {
    const u8* p = row + 64 * (size_t)g;
#pragma unroll
    for (int i = 0; i < 32; i++) out[i] = bf2f(ld16(p + 2 * i));
}
template <> __device__ __forceinline__ void dequant32<T_Q4_0>(const u8* row, int g, float* out) {
    const u8* b = row + 18 * (size_t)g;
    float d = ldh(b);
#pragma unroll
    for (int i = 0; i < 16; i++) {
        int q = b[2 + i];
        out[i] = ((q & 0xF) - 8) * d;
        out[i + 16] = ((q >> 4) - 8) * d;
    }
}
template <> __device__ __forceinline__ void dequant32<T_Q4_1>(const u8* row, int g, float* out) {
    const u8* b = row + 20 * (size_t)g;
    float d = ldh(b), m = ldh(b + 2);
#pragma unroll
    for (int i = 0; i < 16; i++) {
        int q = b[4 + i];
        out[i] = (q & 0xF) * d + m;
        out[i + 16] = (q >> 4) * d + m;
    }
}
template <> __device__ __forceinline__ void dequant32<T_Q5_0>(const u8* row, int g, float* out) {
    const u8* b = row + 22 * (size_t)g;
    float d = ldh(b);
    unsigned qh = ld32(b + 2);
#pragma unroll
    for (int i = 0; i < 16; i++) {
        int q = b[6 + i];
        int h0 = ((qh >> i) << 4) & 0x10, h1 = (qh >> (i + 12)) & 0x10;
        out[i] = (((q & 0xF) | h0) - 16) * d;
        out[i + 16] = (((q >> 4) | h1) - 16) * d;
    }
}
template <> __device__ __forceinline__ void dequant32<T_Q5_1>(const u8* row, int g, float* out) {
    const u8* b = row + 24 * (size_t)g;
    float d = ldh(b), m = ldh(b + 2);
    unsigned qh = ld32(b + 4);
#pragma unroll
    for (int i = 0; i < 16; i++) {
        int q = b[8 + i];
        int h0 = ((qh >> i) << 4) & 0x10, h1 = (qh >> (i + 12)) & 0x10;
        out[i] = ((q & 0xF) | h0) * d + m;
        out[i + 16] = ((q >> 4) | h1) * d + m;
    }
}
template <> __device__ __forceinline__ void dequant32<T_Q8_0>(const u8* row, int g, float* out) {
    const u8* b = row + 34 * (size_t)g;
    float d = ldh(b);
#pragma unroll
    for (int i = 0; i < 32; i++) out[i] = (signed char)b[2 + i] * d;
}
template <> __device__ __forceinline__ void dequant32<T_IQ4_NL>(const u8* row, int g, float* out) {
    const u8* b = row + 18 * (size_t)g;
    float d = ldh(b);
#pragma unroll
    for (int i = 0; i < 16; i++) {
        int q = b[2 + i];
        out[i] = d * kIQ4NL[q & 0xF];
        out[i + 16] = d * kIQ4NL[q >> 4];
    }
}
template <> __device__ __forceinline__ void dequant32<T_Q2_K>(const u8* row, int g, float* out) {
    const u8* b = row + 84 * (size_t)(g >> 3);
    int j = g & 7, half = j >> 2, s = j & 3, shift = 2 * s;
    float d = ldh(b + 80), dmin = ldh(b + 82);
    const u8* q = b + 16 + 32 * half;
    int is = 8 * half + 2 * s;
#pragma unroll
    for (int k = 0; k < 2; k++) {
        int sc = b[is + k];
        float dl = d * (sc & 0xF), ml = dmin * (sc >> 4);
#pragma unroll
        for (int l = 0; l < 16; l++) out[16 * k + l] = dl * ((q[16 * k + l] >> shift) & 3) - ml;
    }
}
template <> __device__ __forceinline__ void dequant32<T_Q3_K>(const u8* row, int g, float* out) {
    const u8* b = row + 110 * (size_t)(g >> 3);
    int j = g & 7, half = j >> 2, s = j & 3, shift = 2 * s;
    float d = ldh(b + 108);
    const u8* hm = b;
    const u8* q = b + 32 + 32 * half;
    const u8* sc = b + 96;
    int m = 1 << (4 * half + s);
#pragma unroll
    for (int k = 0; k < 2; k++) {
        int is = 8 * half + 2 * s + k;
        int lo = is < 8 ? (sc[is] & 0xF) : (sc[is - 8] >> 4);
        int hi = (sc[8 + (is & 3)] >> (2 * (is >> 2))) & 3;
        float dl = d * ((lo | (hi << 4)) - 32);
#pragma unroll
        for (int l = 0; l < 16; l++) {
            int i = 16 * k + l;
            out[i] = dl * (((q[i] >> shift) & 3) - ((hm[i] & m) ? 0 : 4));
        }
    }
}
template <> __device__ __forceinline__ void dequant32<T_Q4_K>(const u8* row, int g, float* out) {
    const u8* b = row + 144 * (size_t)(g >> 3);
    int j = g & 7;
    float d = ldh(b), dmin = ldh(b + 2), sc, m;
    k4_scale(b + 4, j, &sc, &m);
    float dl = d * sc, ml = dmin * m;
    const u8* q = b + 16 + 32 * (j >> 1);
    int shift = 4 * (j & 1);
#pragma unroll
    for (int l = 0; l < 32; l++) out[l] = dl * ((q[l] >> shift) & 0xF) - ml;
}
template <> __device__ __forceinline__ void dequant32<T_Q5_K>(const u8* row, int g, float* out) {
    const u8* b = row + 176 * (size_t)(g >> 3);
    int j = g & 7;
    float d = ldh(b), dmin = ldh(b + 2), sc, m;
    k4_scale(b + 4, j, &sc, &m);
    float dl = d * sc, ml = dmin * m;
    const u8* qh = b + 16;
    const u8* q = b + 48 + 32 * (j >> 1);
    int shift = 4 * (j & 1), hb = 1 << j;
#pragma unroll
    for (int l = 0; l < 32; l++) out[l] = dl * (((q[l] >> shift) & 0xF) + ((qh[l] & hb) ? 16 : 0)) - ml;
}
template <> __device__ __forceinline__ void dequant32<T_Q6_K>(const u8* row, int g, float* out) {
    const u8* b = row + 210 * (size_t)(g >> 3);
    int j = g & 7, h = j >> 2, r = j & 3;
    float d = ldh(b + 208);
    const u8* ql = b + 64 * h + 32 * (r & 1);
    const u8* qh = b + 128 + 32 * h;
    const signed char* sc = (const signed char*)(b + 192) + 8 * h + 2 * r;
    int lshift = 4 * (r >> 1), hshift = 2 * r;
#pragma unroll
    for (int l = 0; l < 32; l++) {
        int q = ((ql[l] >> lshift) & 0xF) | (((qh[l] >> hshift) & 3) << 4);
        out[l] = d * sc[l >> 4] * (q - 32);
    }
}
template <> __device__ __forceinline__ void dequant32<T_IQ4_XS>(const u8* row, int g, float* out) {
    const u8* b = row + 136 * (size_t)(g >> 3);
    int ib = g & 7;
    float d = ldh(b);
    int sh = ld16(b + 2);
    int ls = ((b[4 + (ib >> 1)] >> (4 * (ib & 1))) & 0xF) | (((sh >> (2 * ib)) & 3) << 4);
    float dl = d * (ls - 32);
    const u8* q = b + 8 + 16 * ib;
#pragma unroll
    for (int l = 0; l < 16; l++) {
        out[l] = dl * kIQ4NL[q[l] & 0xF];
        out[l + 16] = dl * kIQ4NL[q[l] >> 4];
    }
}

// FOR_EACH_WEIGHT_TYPE(M) applies M(T, name) to every weight type with a
// dequant32; kernels that take any weight type are instantiated with it.
#define FOR_EACH_WEIGHT_TYPE(M) \
    M(T_F32, f32) M(T_F16, f16) M(T_BF16, bf16) M(T_Q4_0, q4_0) M(T_Q4_1, q4_1) \
    M(T_Q5_0, q5_0) M(T_Q5_1, q5_1) M(T_Q8_0, q8_0) M(T_IQ4_NL, iq4_nl) \
    M(T_Q2_K, q2_k) M(T_Q3_K, q3_k) M(T_Q4_K, q4_k) M(T_Q5_K, q5_k) \
    M(T_Q6_K, q6_k) M(T_IQ4_XS, iq4_xs)

// mma_f16 adds A (16x16 f16 in four half2 registers: a0 rows 0-7 and a1
// rows 8-15 of k 0-7 (PTX order: k 2t, 2t+1), a2 and a3 the same of k
// 8-15) times B (16x8 f16, b0 k 0-7, b1 k 8-15) to the F32 tile c (rows g
// and g+8, columns 2t and 2t+1). Tensor cores for mma.cu and attention.cu;
// sm_75 composes it from two m16n8k8.
__device__ __forceinline__ void mma_f16(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                        unsigned b0, unsigned b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(b0));
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a2), "r"(a3), "r"(b1));
#endif
}

// mma_s8 adds A (16x32 s8: a0 rows 0-7 k 0-15 part, a1 rows 8-15, a2 and a3
// the same for k 16-31) times B (32x8 s8: b0 k 0-15, b1 k 16-31) to c, for
// mma.cu's integer tiles and matvec.cu's exact multi-row products; sm_75
// composes it from m8n8k16.
__device__ __forceinline__ void mma_s8(int (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                       unsigned b0, unsigned b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
    asm volatile("mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%0,%1}, {%2}, {%3}, {%0,%1};"
                 : "+r"(c[0]), "+r"(c[1]) : "r"(a0), "r"(b0));
    asm volatile("mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%0,%1}, {%2}, {%3}, {%0,%1};"
                 : "+r"(c[2]), "+r"(c[3]) : "r"(a1), "r"(b0));
    asm volatile("mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%0,%1}, {%2}, {%3}, {%0,%1};"
                 : "+r"(c[0]), "+r"(c[1]) : "r"(a2), "r"(b1));
    asm volatile("mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%0,%1}, {%2}, {%3}, {%0,%1};"
                 : "+r"(c[2]), "+r"(c[3]) : "r"(a3), "r"(b1));
#endif
}

// ldmatrix_x4 loads four 8x8 matrices of halves from shared memory, lane
// l giving the address of row l%8 of matrix l/8; trans: each transposed.
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* p) {
    unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* p) {
    unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
// warp_tile_k16 adds the 16-wide k slice at column k of a warp's tile to
// acc (MI 16-row parts by NJ 8-column parts): A's rows from row a0 and B's
// from row b0 of row-major F16 tiles in shared memory, P halves a row,
// loaded with ldmatrix; the prefill tiles of mma.cu and prefill.cu.
template <int MI, int NJ, int P>
__device__ __forceinline__ void warp_tile_k16(float (&acc)[MI][NJ][4], const u16* A, const u16* B, int a0, int b0, int k, int lane) {
    unsigned af[MI][4], bf[NJ / 2][4];
#pragma unroll
    for (int i = 0; i < MI; i++)
        ldmatrix_x4(af[i], A + (a0 + 16 * i + (lane & 7) + 8 * ((lane >> 3) & 1)) * P + k + 8 * (lane >> 4));
#pragma unroll
    for (int jp = 0; jp < NJ / 2; jp++)
        ldmatrix_x4(bf[jp], B + (b0 + 16 * jp + 8 * (lane >> 4) + (lane & 7)) * P + k + 8 * ((lane >> 3) & 1));
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int jp = 0; jp < NJ / 2; jp++) {
            mma_f16(acc[i][2 * jp], af[i][0], af[i][1], af[i][2], af[i][3], bf[jp][0], bf[jp][1]);
            mma_f16(acc[i][2 * jp + 1], af[i][0], af[i][1], af[i][2], af[i][3], bf[jp][2], bf[jp][3]);
        }
}
__device__ __forceinline__ unsigned pack_half2(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *(unsigned*)&h;
}
