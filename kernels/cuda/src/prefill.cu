// Prefill products through a ring of shared-memory stages filled by
// cp.async: mmtc_<type>_<NS> and mmtc64_<type>_<NS> (F16, Q4_K, Q6_K
// weights; NS 3 or 4 stages). Y[b][o] = W[o] . X[b] for a tile of 128
// weight rows by 128 (or 64) batch rows.
//
// Why not the register tiles of mma.cu (mmt, mmth, mmtq): those load the
// next 2-4 steps into registers and store them to a double buffer, so
// every step of lookahead costs registers, and at one block of 8 warps a
// multiprocessor they ran the 8B shapes at 110-190 TFLOP/s, waiting on the
// latency of L2 (kernels/cuda/NOTES.md, hpp's calls). cp.async copies global
// memory straight into shared memory without registers, so NS-1 steps of
// 64 can be in flight while the tensor cores work on the current one.
//
// The activations are always the F16 copy of x (copy_f32_f16), copied as
// they are. F16 weights are copied as they are too; the mmas read both
// operands of a stage in place with ldmatrix. Q4_K and Q6_K weights are
// copied raw (each row's bytes of the step in whole aligned 16-byte
// pieces, rows 16-byte aligned), and one step ahead of the mmas the block
// dequantizes a stage to F16 into one of two further buffers. Each step
// of 64 then costs one barrier.
//
// sm_80 and later have cp.async; the compute_75 build copies through
// registers at the same places (correct, without the overlap), so the PTX
// still loads on Turing; the backend picks these tiles from sm_80 on. On
// compute capability 9.0 the F16 products take the wgmma tiles of
// src/sm90a/prefill_wgmma.cu instead (1.6-1.9x these; NOTES.md, hf16).
#include "common.cuh"

#define MMTC_BM 128  // weight rows a block
#define MMTC_BK 64   // inner dimension a step
#define MMTC_P 72    // halves a shared row of an F16 tile (144 bytes: ldmatrix rows in distinct banks)

// Raw bytes a weight row keeps in a stage: F16 a 64-half row of the tile
// layout; Q4_K the block's 16-byte header and the 32 bytes of nibbles of
// the step's two groups; Q6_K, whose 210-byte blocks sit at any even
// offset, the aligned 16-byte pieces covering the half's 64 ql bytes (5),
// its 32 qh bytes (3) and the scales with d (2): 160 bytes, each region at
// offset delta = (210*block) % 16 inside its pieces.
template <int T> struct mmtc_raw;
template <> struct mmtc_raw<T_F16> { static constexpr int row = MMTC_P * 2, pieces = 8; };
template <> struct mmtc_raw<T_Q4_K> { static constexpr int row = 48, pieces = 3; };
template <> struct mmtc_raw<T_Q6_K> { static constexpr int row = 160, pieces = 10; };

// mmtc_copy_a issues the copies of the weight tile at k0 into raw.
template <int T>
__device__ __forceinline__ void mmtc_copy_a(u8* raw, const u8* __restrict__ w, long long wstride, int row0, int rows,
                                            int k0) {
    constexpr int PC = mmtc_raw<T>::pieces, N = MMTC_BM * PC;
#pragma unroll
    for (int i = 0; i < (N + 255) / 256; i++) {
        int idx = threadIdx.x + 256 * i;
        if (N % 256 != 0 && idx >= N) break;
        int r = idx / PC, c = idx - r * PC;
        const u8* src = w + (size_t)min(row0 + r, rows - 1) * wstride;
        u8* dst;
        if constexpr (T == T_F16) {
            src += 2 * (size_t)(k0 + 8 * c);
            dst = raw + r * (MMTC_P * 2) + 16 * c;
        } else if constexpr (T == T_Q4_K) {
            size_t b = 144 * (size_t)(k0 >> 8);
            src += c == 0 ? b : b + 16 + 32 * ((k0 >> 6) & 3) + 16 * (c - 1);
            dst = raw + r * 48 + 16 * c;
        } else {
            static_assert(T == T_Q6_K, "no ring tile for this weight type");
            size_t b = 210 * (size_t)(k0 >> 8);
            int hf = (k0 >> 7) & 1;
            size_t off = c < 5 ? b + 64 * hf + 16 * c : (c < 8 ? b + 128 + 32 * hf + 16 * (c - 5) : b + 192 + 16 * (c - 8));
            // the piece holding the first byte, and those after it
            size_t first = c < 5 ? b + 64 * hf : (c < 8 ? b + 128 + 32 * hf : b + 192);
            src += (first & ~(size_t)15) + (off - first);
            dst = raw + r * 160 + 16 * c;
        }
        cp_async16(dst, src);
    }
}

// mmtc_dequant writes the F16 tile of the raw weights of step k0: thread
// tid takes row tid/2 and the step's group tid%2 (32 weights).
template <int T>
__device__ __forceinline__ void mmtc_dequant(u16* A, const u8* raw, int k0) {
    int r = threadIdx.x >> 1, hh = threadIdx.x & 1;
    unsigned out[16];
    if constexpr (T == T_Q4_K) {
        const u8* b = raw + r * 48;
        uint4 hdr = *(const uint4*)b;
        int j = 2 * ((k0 >> 6) & 3) + hh; // group in the 256-block: low nibbles even, high odd
        float sc, mn;
        k4_scale_hdr(hdr, j, &sc, &mn);
        float dl = h2f(hdr.x & 0xFFFF) * sc, ml = h2f(hdr.x >> 16) * mn;
        const uint4* q = (const uint4*)(b + 16);
#pragma unroll
        for (int p = 0; p < 2; p++) {
            uint4 v = q[p];
            unsigned qw[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int i = 0; i < 4; i++) {
                unsigned x = qw[i] >> (4 * hh);
                out[8 * p + 2 * i] = pack_half2(dl * (float)(x & 0xF) - ml, dl * (float)((x >> 8) & 0xF) - ml);
                out[8 * p + 2 * i + 1] =
                    pack_half2(dl * (float)((x >> 16) & 0xF) - ml, dl * (float)((x >> 24) & 0xF) - ml);
            }
        }
    } else {
        static_assert(T == T_Q6_K, "no ring tile for this weight type");
        int u = k0 >> 8, hf = (k0 >> 7) & 1, rr = 2 * ((k0 >> 6) & 1) + hh; // group rr of the half
        int delta = (210 * u) & 15;
        const u8* b = raw + r * 160 + delta;
        const u8* ql = b + 32 * (rr & 1);
        const u8* qh = b + 80;
        const u8* sc = b + 128 + 8 * hf + 2 * rr; // the pieces from byte 192 of the block
        float d = ldh(b + 128 + 16);
        float s0 = d * (float)(signed char)sc[0], s1 = d * (float)(signed char)sc[1];
        int ls = 4 * (rr >> 1), hs = 2 * rr;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            unsigned lo = (ld32(ql + 4 * i) >> ls) & 0x0F0F0F0F;
            unsigned hb = ((ld32(qh + 4 * i) >> hs) & 0x03030303) << 4;
            unsigned q = __vsubss4(lo | hb, 0x20202020); // 6-bit values less 32, as signed bytes
            float s = i < 4 ? s0 : s1;
            out[2 * i] = pack_half2(s * (float)(signed char)(q & 0xFF), s * (float)(signed char)((q >> 8) & 0xFF));
            out[2 * i + 1] = pack_half2(s * (float)(signed char)((q >> 16) & 0xFF), s * (float)(signed char)(q >> 24));
        }
    }
    uint4* dst = (uint4*)(A + r * MMTC_P + 32 * hh);
#pragma unroll
    for (int i = 0; i < 4; i++) dst[i] = make_uint4(out[4 * i], out[4 * i + 1], out[4 * i + 2], out[4 * i + 3]);
}

// mmtc: the tile of weight rows 128*bx and batch rows BN*bz. Shared
// memory: NS stages of [activation tile (F16, BN rows), raw weights], then
// for the quantized types two F16 weight tiles. 8 warps, 2 along the
// weight rows by 4 along the batch: a warp's tile is 64 x BN/4.
template <int T, int NS, int BN>
__device__ void mmtc(const u8* __restrict__ w, long long wstride, float* __restrict__ y, long long ystride, int rows,
                     const u16* __restrict__ xh, long long xstride, int n, int nb, int accumulate, int bx, int bz) {
    constexpr bool Q = T != T_F16;
    constexpr int BTILE = BN * MMTC_P * 2, STAGE = BTILE + MMTC_BM * mmtc_raw<T>::row;
    constexpr int WTM = 64, WTN = BN / 4, MI = WTM / 16, NJ = WTN / 8;
    extern __shared__ uint4 mma_smem[];
    u8* ring = (u8*)mma_smem;
    u16* Ah = (u16*)(ring + NS * STAGE); // quantized: 2 dequantized tiles
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
    int wm = warp & 1, wn = warp >> 1;
    int row0 = bx * MMTC_BM, col0 = bz * BN;
    if (row0 >= rows) return;

    auto copy = [&](int slot, int k0) {
        u8* st = ring + slot * STAGE;
#pragma unroll
        for (int i = 0; i < BN / 32; i++) {
            int idx = tid + 256 * i, r = idx >> 3, c = idx & 7;
            cp_async16(st + r * (MMTC_P * 2) + 16 * c, xh + (size_t)min(col0 + r, nb - 1) * xstride + k0 + 8 * c);
        }
        mmtc_copy_a<T>(st + BTILE, w, wstride, row0, rows, k0);
    };
    float acc[MI][NJ][4];
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < NJ; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.f;

    // Step s reads stage s from slot s%NS; at its start slot (s-1)%NS,
    // whose last reader was step s-1, takes stage s+NS-1. The quantized
    // types dequantize stage s+1 during step s, so their wait at the top of
    // step s covers stage s+1 (one group fewer in flight).
    constexpr int WAIT = Q ? NS - 3 : NS - 2;
    int steps = n / MMTC_BK;
#pragma unroll
    for (int i = 0; i < NS - 1; i++) {
        if (i < steps) copy(i, i * MMTC_BK);
        cp_async_commit();
    }
    if constexpr (Q) {
        cp_async_wait<WAIT>();
        __syncthreads();
        mmtc_dequant<T>(Ah, ring + BTILE, 0);
    }
#pragma unroll 1
    for (int s = 0; s < steps; s++) {
        cp_async_wait<WAIT>();
        __syncthreads();
        if (s + NS - 1 < steps) copy((s + NS - 1) % NS, (s + NS - 1) * MMTC_BK);
        cp_async_commit();
        const u8* st = ring + (s % NS) * STAGE;
        const u16* B = (const u16*)st;
        const u16* A = Q ? Ah + (s & 1) * MMTC_BM * MMTC_P : (const u16*)(st + BTILE);
        if constexpr (Q) {
            if (s + 1 < steps)
                mmtc_dequant<T>(Ah + ((s + 1) & 1) * MMTC_BM * MMTC_P, ring + ((s + 1) % NS) * STAGE + BTILE,
                                (s + 1) * MMTC_BK);
        }
#pragma unroll
        for (int ks = 0; ks < MMTC_BK / 16; ks++)
            warp_tile_k16<MI, NJ, MMTC_P>(acc, A, B, WTM * wm, WTN * wn, 16 * ks, lane);
    }
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < NJ; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int r = row0 + WTM * wm + 16 * i + g + 8 * (e >> 1), b = col0 + WTN * wn + 8 * j + 2 * t + (e & 1);
                if (r < rows && b < nb) {
                    float* out = y + (size_t)b * ystride + r;
                    *out = accumulate ? *out + acc[i][j][e] : acc[i][j][e];
                }
            }
}

// Entry points, with the job parameters and block order of common.cuh
// (JOBS_PARAMS, PICK_TILE_JOB): the batch blocks of a weight tile start
// side by side, since with the row blocks fastest (the grid's own order) a
// product whose weights outgrow L2 (an 8B model's F16 gate and up: 200 MB)
// reads them once per batch block.
#define MMTC_ONE(T, kname, NS, BN)                                                                      \
    extern "C" __global__ void __launch_bounds__(256, 1) kname(                                         \
        JOBS_PARAMS, const u16* x, long long xstride, int n, int nb, int accumulate) {                    \
        grid_dep_begin();                                                                                 \
        PICK_TILE_JOB                                                                                     \
        mmtc<T, NS, BN>(w, wstride, y, ystride, rows, x, xstride, n, nb, accumulate, bx, bz);             \
    }
#define MMTC(T, name)                                                                      \
    MMTC_ONE(T, mmtc_##name##_3, 3, 128) MMTC_ONE(T, mmtc_##name##_4, 4, 128)             \
    MMTC_ONE(T, mmtc64_##name##_3, 3, 64) MMTC_ONE(T, mmtc64_##name##_4, 4, 64)
MMTC(T_F16, f16) MMTC(T_Q4_K, q4_k) MMTC(T_Q6_K, q6_k)
