// Matrix products on tensor cores (mma.sync) for every batch above one row:
// verification passes of a few rows and prefill alike. Y[b][o] = W[o] . X[b].
//
// A block owns 16*MT weight rows and 8*NT activation rows (the batch);
// its warps (blockDim.x/32, up to 16 for the few-row shapes, so that a
// matrix of few rows and a long inner dimension still has enough loads in
// flight) split the inner dimension in units of 256 weights and add their
// tiles through shared memory at the end. Each weight byte is read once
// per block, so a pass of up to 8*NT rows reads each weight once, as
// decode does, and prefill re-reads a weight row once per 8*NT batch rows
// (mostly from L2). Weights go straight into the registers where the
// tensor-core fragments want them, but for Q8_0, whose 34-byte blocks
// allow only 2-byte loads there: a warp first copies its rows' next 4
// blocks into shared memory with 8-byte loads.
//
// Integer weights (Q8_0, Q4_K, Q6_K) multiply the q8 activations of
// common.cuh with 8-bit mma (m16n8k32, or m16n8k16 where Q6_K's scales
// change every 16 weights), one mma per group of 32 activations, whose
// integer result is scaled by the weight and activation scales of that
// group. F16 weights multiply F32 activations rounded to F16 with m16n8k16,
// accumulating in F32.
//
// A fragment lane (g = lane/4, t = lane%4) holds rows g and g+8 of the A
// tile and column g of the B tile. The order of the k index inside one mma
// is free as long as A and B agree, so where the weights allow it a lane
// holds 8 consecutive bytes of a row (one 8-byte load) rather than the two
// 4-byte pieces of the PTX layout; the activations are read in the same
// order.
//
// sm_80 and later have the m16n8k32/m16n8k16 shapes; the compute_75 build
// (Turing) composes them from m8n8k16 (int8) and m16n8k8 (f16).
#include "common.cuh"

// Launch bounds: the few-row shapes take up to 16 warps, the others 4.
#define MMQ_MAXW(MT, NT) (((MT) == 1 && (NT) <= 4) ? 16 : 4)
// Q8_0 staging: a row's 4 blocks (136 bytes) in Q8_STAGE bytes.
#define Q8_STAGE 144

// mma_s8_k16 is mma_s8 for k 16 (A 16x16: a0 rows 0-7, a1 rows 8-15).
__device__ __forceinline__ void mma_s8_k16(int (&c)[4], unsigned a0, unsigned a1, unsigned b0) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a0), "r"(a1), "r"(b0));
#else
    asm volatile("mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%0,%1}, {%2}, {%3}, {%0,%1};"
                 : "+r"(c[0]), "+r"(c[1]) : "r"(a0), "r"(b0));
    asm volatile("mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%0,%1}, {%2}, {%3}, {%0,%1};"
                 : "+r"(c[2]), "+r"(c[3]) : "r"(a1), "r"(b0));
#endif
}

// The tile a warp accumulates: acc[m][j][2h+e] is weight row
// 16m + g + 8h, batch row 8j + 2t + e (the mma C layout).
template <int MT, int NT> struct tile {
    float acc[MT][NT][4];
};

// act is what a lane reads of the q8 activations for one group of 32 and
// NT column tiles: its 8 bytes of column g (B fragment) and the scale
// pairs of columns 2t and 2t+1 (as one float4: d0, s0, d1, s1).
template <int NT> struct act {
    uint2 b[NT];
    float4 s[NT];
};

// load_act reads group grp for the lane's columns (clamped into the batch:
// columns past it read real rows and are never stored). native: the PTX
// order (bytes 4t and 16+4t) instead of 8 consecutive bytes at 8t.
template <int NT, bool native>
__device__ __forceinline__ void load_act(act<NT>& a, const signed char* __restrict__ xq, const float2* __restrict__ xd,
                                         int grp, int P, const int (&bcol)[NT], const int (&scol)[NT]) {
    int t = threadIdx.x & 3;
#pragma unroll
    for (int j = 0; j < NT; j++) {
        const signed char* p = xq + q8_off(grp, bcol[j], P);
        if (native) {
            a.b[j].x = __ldg((const unsigned*)(p + 4 * t));
            a.b[j].y = __ldg((const unsigned*)(p + 16 + 4 * t));
        } else {
            a.b[j] = __ldg((const uint2*)(p + 8 * t));
        }
        a.s[j] = __ldg((const float4*)(xd + q8_sc(grp, scol[j], P)));
    }
}

// Q8_0: 8 blocks of 34 bytes per unit, staged 4 at a time: the warp copies
// its 16*MT rows' 136 bytes (8-byte aligned: rows of whole units are) into
// stage with 8-byte loads, then each lane reads its two rows' scales and
// 8 quants at 2+8t as halves from shared memory.
template <int MT, int NT>
__device__ __forceinline__ void mmq_unit_q8_0(tile<MT, NT>& T, const u8* __restrict__ w, long long wstride, int row0,
                                              int rows, u8* stage, int u, const signed char* __restrict__ xq,
                                              const float2* __restrict__ xd, int P, const int (&bcol)[NT],
                                              const int (&scol)[NT]) {
    int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll 1
    for (int half = 0; half < 2; half++) {
        // 17 8-byte pieces a row, all of the warp's loads in flight at once
        const int PIECES = 16 * MT * 17, PER = (PIECES + 31) / 32;
        uint2 v[PER];
#pragma unroll
        for (int k = 0; k < PER; k++) {
            int i = lane + 32 * k, r = i / 17, c = i - r * 17;
            if (i < PIECES)
                v[k] = __ldg((const uint2*)(w + (size_t)min(row0 + r, rows - 1) * wstride + 272 * (size_t)u + 136 * half +
                                            8 * c));
        }
        __syncwarp(); // the last half's reads are done
#pragma unroll
        for (int k = 0; k < PER; k++) {
            int i = lane + 32 * k, r = i / 17, c = i - r * 17;
            if (i < PIECES) *(uint2*)(stage + r * Q8_STAGE + 8 * c) = v[k];
        }
        __syncwarp();
#pragma unroll
        for (int k = 0; k < 4; k++) {
            int kb = 8 * u + 4 * half + k;
            float d[MT][2];
            unsigned q[MT][2][2];
#pragma unroll
            for (int m = 0; m < MT; m++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const u8* b = stage + (16 * m + 8 * h + g) * Q8_STAGE + 34 * k;
                    d[m][h] = ldh(b);
                    q[m][h][0] = ld32(b + 2 + 8 * t);
                    q[m][h][1] = ld32(b + 6 + 8 * t);
                }
            act<NT> a;
            load_act<NT, false>(a, xq, xd, kb, P, bcol, scol);
#pragma unroll
            for (int m = 0; m < MT; m++)
#pragma unroll
                for (int j = 0; j < NT; j++) {
                    int c[4] = {0, 0, 0, 0};
                    mma_s8(c, q[m][0][0], q[m][1][0], q[m][0][1], q[m][1][1], a.b[j].x, a.b[j].y);
                    T.acc[m][j][0] += d[m][0] * a.s[j].x * (float)c[0];
                    T.acc[m][j][1] += d[m][0] * a.s[j].z * (float)c[1];
                    T.acc[m][j][2] += d[m][1] * a.s[j].x * (float)c[2];
                    T.acc[m][j][3] += d[m][1] * a.s[j].z * (float)c[3];
                }
        }
    }
}

// Q4_K: one 144-byte block per 256; a lane reads the 16-byte header of its
// rows and 8 bytes of each 32-byte chunk p of nibbles, whose low nibbles
// are group 2p and high nibbles group 2p+1 (rows 16-byte aligned).
template <int MT, int NT>
__device__ __forceinline__ void mmq_unit_q4_k(tile<MT, NT>& T, const u8* const (&wr)[MT][2], int u,
                                              const signed char* __restrict__ xq, const float2* __restrict__ xd,
                                              int P, const int (&bcol)[NT], const int (&scol)[NT]) {
    int t = threadIdx.x & 3;
    uint4 hdr[MT][2];
    uint2 q[MT][2][4];
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const u8* b = wr[m][h] + 144 * (size_t)u;
            hdr[m][h] = __ldg((const uint4*)b);
#pragma unroll
            for (int p = 0; p < 4; p++) q[m][h][p] = __ldg((const uint2*)(b + 16 + 32 * p + 8 * t));
        }
    // the eight 6-bit scales and mins of each row as bytes: scales 0-3 are
    // the low 6 bits of header bytes 4-7, mins 0-3 of bytes 8-11; scales
    // and mins 4-7 take 4 bits from bytes 12-15 and their top 2 bits from
    // the top of bytes 4-7 and 8-11 (k4_scale)
    unsigned scw[MT][2][2], mnw[MT][2][2];
    float dd[MT][2], dmin[MT][2];
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            uint4 hd = hdr[m][h];
            scw[m][h][0] = hd.y & 0x3F3F3F3F;
            mnw[m][h][0] = hd.z & 0x3F3F3F3F;
            scw[m][h][1] = (hd.w & 0x0F0F0F0F) | ((hd.y >> 2) & 0x30303030);
            mnw[m][h][1] = ((hd.w >> 4) & 0x0F0F0F0F) | ((hd.z >> 2) & 0x30303030);
            dd[m][h] = h2f(hd.x & 0xFFFF);
            dmin[m][h] = h2f(hd.x >> 16);
        }
#pragma unroll
    for (int p = 0; p < 4; p++) {
#pragma unroll
        for (int hi = 0; hi < 2; hi++) {
            int grp = 8 * u + 2 * p + hi, j = 2 * p + hi;
            act<NT> a;
            load_act<NT, false>(a, xq, xd, grp, P, bcol, scol);
#pragma unroll
            for (int m = 0; m < MT; m++) {
                float ds[2], dm[2];
                unsigned w[2][2];
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    ds[h] = dd[m][h] * (float)((scw[m][h][j >> 2] >> (8 * (j & 3))) & 0xFF);
                    dm[h] = dmin[m][h] * (float)((mnw[m][h][j >> 2] >> (8 * (j & 3))) & 0xFF);
                    w[h][0] = (q[m][h][p].x >> (4 * hi)) & 0x0F0F0F0F;
                    w[h][1] = (q[m][h][p].y >> (4 * hi)) & 0x0F0F0F0F;
                }
#pragma unroll
                for (int j = 0; j < NT; j++) {
                    int c[4] = {0, 0, 0, 0};
                    mma_s8(c, w[0][0], w[1][0], w[0][1], w[1][1], a.b[j].x, a.b[j].y);
                    T.acc[m][j][0] += ds[0] * a.s[j].x * (float)c[0] - dm[0] * a.s[j].y;
                    T.acc[m][j][1] += ds[0] * a.s[j].z * (float)c[1] - dm[0] * a.s[j].w;
                    T.acc[m][j][2] += ds[1] * a.s[j].x * (float)c[2] - dm[1] * a.s[j].y;
                    T.acc[m][j][3] += ds[1] * a.s[j].z * (float)c[3] - dm[1] * a.s[j].w;
                }
            }
        }
    }
}

// Q6_K: one 210-byte block per 256 (2-byte aligned), two halves of 128;
// group r of a half takes low (r < 2) or high nibbles of ql bytes
// 32*(r&1)..+32 and bits 2r of the 32 qh bytes, with one 8-bit scale per
// 16 weights, so each group is two k16 mmas in the PTX order (a lane holds
// weights 4t..4t+3 and 16+4t..16+4t+3 of the group).
template <int MT, int NT>
__device__ __forceinline__ void mmq_unit_q6_k(tile<MT, NT>& T, const u8* const (&wr)[MT][2], int u,
                                              const signed char* __restrict__ xq, const float2* __restrict__ xd,
                                              int P, const int (&bcol)[NT], const int (&scol)[NT]) {
    int t = threadIdx.x & 3;
    float d[MT][2];
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int h = 0; h < 2; h++) d[m][h] = ldh(wr[m][h] + 210 * (size_t)u + 208);
#pragma unroll 1
    for (int half = 0; half < 2; half++) {
        unsigned ql[MT][2][4], qh[MT][2][2], sc[MT][2][2];
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const u8* b = wr[m][h] + 210 * (size_t)u;
#pragma unroll
                for (int i = 0; i < 4; i++) ql[m][h][i] = ld32(b + 64 * half + 16 * i + 4 * t);
                qh[m][h][0] = ld32(b + 128 + 32 * half + 4 * t);
                qh[m][h][1] = ld32(b + 128 + 32 * half + 16 + 4 * t);
                sc[m][h][0] = ld32(b + 192 + 8 * half);
                sc[m][h][1] = ld32(b + 196 + 8 * half);
            }
#pragma unroll
        for (int r = 0; r < 4; r++) {
            int grp = 8 * u + 4 * half + r;
            act<NT> a;
            load_act<NT, true>(a, xq, xd, grp, P, bcol, scol);
#pragma unroll
            for (int m = 0; m < MT; m++) {
                unsigned w[2][2]; // [row half h][k16 step]
                float s[2][2];
#pragma unroll
                for (int h = 0; h < 2; h++) {
#pragma unroll
                    for (int k = 0; k < 2; k++) {
                        unsigned lo = ql[m][h][2 * (r & 1) + k];
                        lo = (r >> 1) ? (lo >> 4) & 0x0F0F0F0F : lo & 0x0F0F0F0F;
                        unsigned hb = ((qh[m][h][k] >> (2 * r)) & 0x03030303) << 4;
                        w[h][k] = __vsubss4(lo | hb, 0x20202020);
                        int si = 2 * r + k; // scale byte of this 16 within the half's 8
                        int sv = (signed char)((sc[m][h][si >> 2] >> (8 * (si & 3))) & 0xFF);
                        s[h][k] = d[m][h] * (float)sv;
                    }
                }
#pragma unroll
                for (int j = 0; j < NT; j++) {
                    int c0[4] = {0, 0, 0, 0}, c1[4] = {0, 0, 0, 0};
                    mma_s8_k16(c0, w[0][0], w[1][0], a.b[j].x);
                    mma_s8_k16(c1, w[0][1], w[1][1], a.b[j].y);
                    T.acc[m][j][0] += a.s[j].x * (s[0][0] * (float)c0[0] + s[0][1] * (float)c1[0]);
                    T.acc[m][j][1] += a.s[j].z * (s[0][0] * (float)c0[1] + s[0][1] * (float)c1[1]);
                    T.acc[m][j][2] += a.s[j].x * (s[1][0] * (float)c0[2] + s[1][1] * (float)c1[2]);
                    T.acc[m][j][3] += a.s[j].z * (s[1][0] * (float)c0[3] + s[1][1] * (float)c1[3]);
                }
            }
        }
    }
}

// store_tile adds the warps' tiles (warp 0 sums, through shared memory) and
// writes the block's outputs, or adds them to y (accumulate).
// The shared memory (red) holds (warps-1)*MT*NT*4*32 floats; it may be the
// Q8_0 staging area, no longer read.
template <int MT, int NT>
__device__ __forceinline__ void store_tile(tile<MT, NT>& T, float* red, float* __restrict__ y, long long ystride,
                                           int rows, int nb, int row0, int col0, int accumulate) {
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, nw = blockDim.x >> 5;
    float* flat = &T.acc[0][0][0];
    const int E = MT * NT * 4;
    __syncthreads(); // every warp is past its last unit
    if (warp > 0) {
#pragma unroll
        for (int i = 0; i < E; i++) red[((warp - 1) * E + i) * 32 + lane] = flat[i];
    }
    __syncthreads();
    if (warp > 0) return;
    for (int w = 0; w < nw - 1; w++)
#pragma unroll
        for (int i = 0; i < E; i++) flat[i] += red[(w * E + i) * 32 + lane];
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                int r = row0 + 16 * m + g + 8 * (i >> 1), b = col0 + 8 * j + 2 * t + (i & 1);
                if (r < rows && b < nb) {
                    float* out = y + b * ystride + r;
                    *out = accumulate ? *out + T.acc[m][j][i] : T.acc[m][j][i];
                }
            }
}

// mmq: an integer weight type T against q8 activations (n a multiple of
// 256). grid (row blocks, jobs, column blocks).
template <int T, int MT, int NT>
__device__ void mmq(const u8* __restrict__ w, long long wstride, float* __restrict__ y, long long ystride, int rows,
                    const signed char* __restrict__ xq, const float2* __restrict__ xd, int n, int nb, int accumulate) {
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int row0 = blockIdx.x * 16 * MT, col0 = blockIdx.z * 8 * NT, P = q8_pitch(nb);
    if (row0 >= rows) return; // this job has fewer rows than the grid
    const u8* wr[MT][2];
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int h = 0; h < 2; h++) wr[m][h] = w + (size_t)min(row0 + 16 * m + g + 8 * h, rows - 1) * wstride;
    int bcol[NT], scol[NT];
#pragma unroll
    for (int j = 0; j < NT; j++) {
        bcol[j] = min(col0 + 8 * j + g, nb - 1);
        scol[j] = min(col0 + 8 * j + 2 * t, P - 2 > 0 ? P - 2 : 0);
    }
    tile<MT, NT> acc;
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int i = 0; i < 4; i++) acc.acc[m][j][i] = 0.f;
    extern __shared__ uint4 mma_smem[];
    int units = n >> 8, nw = blockDim.x >> 5;
    for (int u = warp; u < units; u += nw) {
        if constexpr (T == T_Q8_0) {
            mmq_unit_q8_0<MT, NT>(acc, w, wstride, row0, rows, (u8*)mma_smem + warp * 16 * MT * Q8_STAGE, u, xq, xd, P,
                                  bcol, scol);
        } else if constexpr (T == T_Q4_K) {
            mmq_unit_q4_k<MT, NT>(acc, wr, u, xq, xd, P, bcol, scol);
        } else {
            static_assert(T == T_Q6_K, "no tensor-core kernel for this weight type");
            mmq_unit_q6_k<MT, NT>(acc, wr, u, xq, xd, P, bcol, scol);
        }
    }
    store_tile<MT, NT>(acc, (float*)mma_smem, y, ystride, rows, nb, row0, col0, accumulate);
}

// mmf16: F16 weights (rows 16-byte aligned) against F32 activations (rows
// 16-byte aligned), n a multiple of 32. A lane reads 8 halves of its two
// rows per 32 columns (two k16 mmas: halves 0-3 then 4-7) and the same 8
// activations of its column, rounded to F16.
template <int MT, int NT>
__device__ void mmf16(const u8* __restrict__ w, long long wstride, float* __restrict__ y, long long ystride, int rows,
                      const float* __restrict__ x, long long xstride, int n, int nb, int accumulate) {
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int row0 = blockIdx.x * 16 * MT, col0 = blockIdx.z * 8 * NT;
    if (row0 >= rows) return;
    const u8* wr[MT][2];
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int h = 0; h < 2; h++) wr[m][h] = w + (size_t)min(row0 + 16 * m + g + 8 * h, rows - 1) * wstride;
    const float* xr[NT];
#pragma unroll
    for (int j = 0; j < NT; j++) xr[j] = x + (size_t)min(col0 + 8 * j + g, nb - 1) * xstride;
    tile<MT, NT> acc;
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int i = 0; i < 4; i++) acc.acc[m][j][i] = 0.f;
    extern __shared__ uint4 mma_smem[];
    int spans = n >> 5, nw = blockDim.x >> 5;
#pragma unroll 2
    for (int s = warp; s < spans; s += nw) {
        uint4 a[MT][2];
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int h = 0; h < 2; h++) a[m][h] = __ldg((const uint4*)(wr[m][h] + 64 * (size_t)s + 16 * t));
        unsigned b[NT][4];
#pragma unroll
        for (int j = 0; j < NT; j++) {
            const float4* xv = (const float4*)(xr[j] + 32 * s + 8 * t);
            float4 lo = __ldg(xv), hi = __ldg(xv + 1);
            __half2 h0 = __floats2half2_rn(lo.x, lo.y), h1 = __floats2half2_rn(lo.z, lo.w);
            __half2 h2 = __floats2half2_rn(hi.x, hi.y), h3 = __floats2half2_rn(hi.z, hi.w);
            b[j][0] = *(unsigned*)&h0;
            b[j][1] = *(unsigned*)&h1;
            b[j][2] = *(unsigned*)&h2;
            b[j][3] = *(unsigned*)&h3;
        }
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int j = 0; j < NT; j++) {
                mma_f16(acc.acc[m][j], a[m][0].x, a[m][1].x, a[m][0].y, a[m][1].y, b[j][0], b[j][1]);
                mma_f16(acc.acc[m][j], a[m][0].z, a[m][1].z, a[m][0].w, a[m][1].w, b[j][2], b[j][3]);
            }
    }
    store_tile<MT, NT>(acc, (float*)mma_smem, y, ystride, rows, nb, row0, col0, accumulate);
}

// Entry points, with the job parameters of common.cuh (up to three products
// sharing their activations, blockIdx.y choosing one):
// mmq_<type>_<MT>x<NT> and mmf16_<MT>x<NT>.

#define MMQ(T, name, MT, NT)                                                                              \
    extern "C" __global__ void __launch_bounds__(32 * MMQ_MAXW(MT, NT)) mmq_##name##_##MT##x##NT(                  \
        JOBS_PARAMS, const signed char* xq, const float2* xd, int n, int nb, int accumulate) {              \
        grid_dep_begin();                                                                                   \
        PICK_JOB                                                                                            \
        mmq<T, MT, NT>(w, wstride, y, ystride, rows, xq, xd, n, nb, accumulate);                            \
    }
#define MMF16(MT, NT)                                                                                     \
    extern "C" __global__ void __launch_bounds__(32 * MMQ_MAXW(MT, NT)) mmf16_##MT##x##NT(                         \
        JOBS_PARAMS, const float* x, long long xstride, int n, int nb, int accumulate) {                    \
        grid_dep_begin();                                                                                   \
        PICK_JOB                                                                                            \
        mmf16<MT, NT>(w, wstride, y, ystride, rows, x, xstride, n, nb, accumulate);                         \
    }
// Shapes (ops_matmul.go: mmaShape, mmaShapes): 1x1 and 1x2 for
// verification batches (8 and 16 rows, every weight row read once), 1x4
// up to 32 rows, 1x8, 2x4 and 2x8 for prefill.
#define MMQ_SHAPES(T, name) \
    MMQ(T, name, 1, 1) MMQ(T, name, 1, 2) MMQ(T, name, 1, 4) MMQ(T, name, 1, 8) MMQ(T, name, 2, 4) MMQ(T, name, 2, 8)
MMQ_SHAPES(T_Q8_0, q8_0) MMQ_SHAPES(T_Q4_K, q4_k) MMQ_SHAPES(T_Q6_K, q6_k)
MMF16(1, 1) MMF16(1, 2) MMF16(1, 4) MMF16(1, 8) MMF16(2, 4) MMF16(2, 8)

// Prefill tiles (mmt_<type> and mmt_<type>_128): a block of 8 warps
// computes a 128 x BN tile of weight rows by batch rows (BN 64 or 128) in
// steps of 32 along the inner dimension, both operands staged through
// shared memory as F16: the weights as they are (F16) or dequantized there
// (Q4_K, Q6_K, Q8_0: one 32-weight group a step, two threads a row, 16
// weights each), the activations converted from F32 on the way. Warps (4
// along the rows by 2 along the batch at BN 64, 2 by 4 at 128) read their
// fragments with ldmatrix, so a staged value serves several mmas instead
// of being loaded for each; the next 2-4 steps' loads (register sets) are
// in flight while this one's mmas run: at two, the tiles ran at 110-160
// TFLOP/s whatever their size or activation bytes (latency-bound); four
// gave F16 165-193. The wider tile halves how often each weight tile is
// re-read from L2 and does 16 mmas per 6 ldmatrix (8 per 4 at 64), at one
// block a multiprocessor rather than two. Shared rows are padded to 80
// bytes so ldmatrix's eight rows fall in distinct banks.
#define MMT_BM 128
#define MMT_BK 32
#define MMT_S 40 // halves a shared row

// mmt_a loads this thread's share of the weight tile at k0 into registers
// (two 16-byte chunks of F16, or a row half of one quantized group: its 16
// quants and what scales them), mmt_a_store writes it to shared memory as
// F16.
template <int T> struct mmt_areg;
template <> struct mmt_areg<T_F16> { uint4 c[2]; };
template <> struct mmt_areg<T_Q4_K> { uint4 q, hdr; };
template <> struct mmt_areg<T_Q6_K> { unsigned ql[4], qh[4]; float d; };
template <> struct mmt_areg<T_Q8_0> { unsigned q[4]; float d; };

template <int T>
__device__ __forceinline__ void mmt_a_load(mmt_areg<T>& a, const u8* __restrict__ w, long long wstride, int row0,
                                           int rows, int k0) {
    int tid = threadIdx.x;
    if constexpr (T == T_F16) {
#pragma unroll
        for (int i = 0; i < 2; i++) {
            int idx = tid + 256 * i, r = idx >> 2, c = idx & 3;
            a.c[i] = __ldg((const uint4*)(w + (size_t)min(row0 + r, rows - 1) * wstride + 2 * (k0 + 8 * c)));
        }
    } else if constexpr (T == T_Q4_K) {
        int r = tid >> 1, half = tid & 1, j = (k0 >> 5) & 7;
        const u8* b = w + (size_t)min(row0 + r, rows - 1) * wstride + 144 * (size_t)(k0 >> 8);
        a.hdr = __ldg((const uint4*)b);
        a.q = __ldg((const uint4*)(b + 16 + 32 * (j >> 1) + 16 * half));
    } else if constexpr (T == T_Q6_K) {
        // group j of a 256-block: 128-weight half hf = j/4, r = j%4 takes
        // the low (r < 2) or high nibbles of ql bytes 32*(r&1).., bits 2r of
        // the half's qh bytes and scale byte 2r + (weight / 16); blocks are
        // only 2-byte aligned
        int r = tid >> 1, hh = tid & 1, j = (k0 >> 5) & 7, hf = j >> 2, rr = j & 3;
        const u8* b = w + (size_t)min(row0 + r, rows - 1) * wstride + 210 * (size_t)(k0 >> 8);
        const u8* ql = b + 64 * hf + 32 * (rr & 1) + 16 * hh;
        const u8* qh = b + 128 + 32 * hf + 16 * hh;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            a.ql[i] = ld32(ql + 4 * i);
            a.qh[i] = ld32(qh + 4 * i);
        }
        a.d = ldh(b + 208) * (float)(signed char)b[192 + 8 * hf + 2 * rr + hh];
    } else {
        static_assert(T == T_Q8_0, "no prefill tile for this weight type");
        int r = tid >> 1, hh = tid & 1;
        const u8* b = w + (size_t)min(row0 + r, rows - 1) * wstride + 34 * (size_t)(k0 >> 5);
#pragma unroll
        for (int i = 0; i < 4; i++) a.q[i] = ld32(b + 2 + 16 * hh + 4 * i);
        a.d = ldh(b);
    }
}

// mmt_s8_store writes 16 signed bytes (four words) times d as F16.
__device__ __forceinline__ void mmt_s8_store(const unsigned (&q)[4], float d, u16* dst) {
    unsigned out[8];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        unsigned v = q[i];
        out[2 * i] = pack_half2(d * (float)(signed char)(v & 0xFF), d * (float)(signed char)((v >> 8) & 0xFF));
        out[2 * i + 1] =
            pack_half2(d * (float)(signed char)((v >> 16) & 0xFF), d * (float)(signed char)(v >> 24));
    }
    *(uint4*)dst = make_uint4(out[0], out[1], out[2], out[3]);
    *(uint4*)(dst + 8) = make_uint4(out[4], out[5], out[6], out[7]);
}

template <int T>
__device__ __forceinline__ void mmt_a_store(const mmt_areg<T>& a, u16* As, int k0) {
    int tid = threadIdx.x;
    if constexpr (T == T_F16) {
#pragma unroll
        for (int i = 0; i < 2; i++) {
            int idx = tid + 256 * i, r = idx >> 2, c = idx & 3;
            *(uint4*)(As + r * MMT_S + 8 * c) = a.c[i];
        }
    } else if constexpr (T == T_Q4_K) {
        int r = tid >> 1, half = tid & 1, j = (k0 >> 5) & 7;
        float sc, mn;
        k4_scale_hdr(a.hdr, j, &sc, &mn);
        float dl = h2f(a.hdr.x & 0xFFFF) * sc, ml = h2f(a.hdr.x >> 16) * mn;
        int sh = 4 * (j & 1);
        unsigned qw[4] = {a.q.x, a.q.y, a.q.z, a.q.w};
        unsigned out[8];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            unsigned v = qw[i] >> sh;
            out[2 * i] = pack_half2(dl * (float)(v & 0xF) - ml, dl * (float)((v >> 8) & 0xF) - ml);
            out[2 * i + 1] = pack_half2(dl * (float)((v >> 16) & 0xF) - ml, dl * (float)((v >> 24) & 0xF) - ml);
        }
        u16* dst = As + r * MMT_S + 16 * half;
        *(uint4*)dst = make_uint4(out[0], out[1], out[2], out[3]);
        *(uint4*)(dst + 8) = make_uint4(out[4], out[5], out[6], out[7]);
    } else if constexpr (T == T_Q6_K) {
        int r = tid >> 1, hh = tid & 1, rr = (k0 >> 5) & 3;
        unsigned q[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            unsigned lo = (a.ql[i] >> (4 * (rr >> 1))) & 0x0F0F0F0F;
            unsigned hb = ((a.qh[i] >> (2 * rr)) & 0x03030303) << 4;
            q[i] = __vsubss4(lo | hb, 0x20202020); // 6-bit values less 32, as signed bytes
        }
        mmt_s8_store(q, a.d, As + r * MMT_S + 16 * hh);
    } else {
        int r = tid >> 1, hh = tid & 1;
        mmt_s8_store(a.q, a.d, As + r * MMT_S + 16 * hh);
    }
}

// mmt: the 128 x BN tile of block (blockIdx.x, blockIdx.z); WGM warps
// along the weight rows, 8/WGM along the batch.
// Activations of the prefill tiles: F32, the 8-bit copy, or an F16 copy.
#define MMT_XF32 0
#define MMT_XQ8 1
#define MMT_XF16 2

template <int T, int BN, int WGM, int XK, int NS>
__device__ void mmt(const u8* __restrict__ w, long long wstride, float* __restrict__ y, long long ystride, int rows,
                    const void* __restrict__ xv, long long xstride, const signed char* __restrict__ xq,
                    const float2* __restrict__ xd, int n, int nb, int accumulate) {
    constexpr int WGN = 8 / WGM, WTM = MMT_BM / WGM, WTN = BN / WGN; // a warp's tile
    constexpr int MI = WTM / 16, NJ = WTN / 8, BV = BN / 32;        // fragments; float4 of x a thread a step
    static_assert(NJ % 2 == 0 && MI >= 1, "warp tile");
    extern __shared__ uint4 mma_smem[];
    u16* As = (u16*)mma_smem;           // 2 buffers of MMT_BM rows
    u16* Bs = As + 2 * MMT_BM * MMT_S;  // 2 buffers of BN rows
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
    int wm = warp % WGM, wn = warp / WGM;
    int row0 = blockIdx.x * MMT_BM, col0 = blockIdx.z * BN;
    if (row0 >= rows) return;

    // NS register sets: a step's loads are issued NS steps before its
    // mmas (one step of mmas hides too little of a load from L2).
    mmt_areg<T> ar[NS];
    const float* x = (const float*)xv;
    const u16* xh = (const u16*)xv;
    float4 br[NS][BV]; // F32 activations
    unsigned bq[NS][4]; // or 8-bit ones: 16 bytes of row tid/2 of the group (threads below 2*BN)
    float bd[NS];
    uint4 bh[NS][BN / 64]; // or F16 ones: 8 halves
    int P = XK == MMT_XQ8 ? q8_pitch(nb) : 0;
    auto load = [&](int set, int k0) {
        mmt_a_load<T>(ar[set], w, wstride, row0, rows, k0);
        if constexpr (XK == MMT_XF16) {
#pragma unroll
            for (int i = 0; i < BN / 64; i++) {
                int idx = tid + 256 * i, r = idx >> 2, c = idx & 3;
                bh[set][i] = __ldg((const uint4*)(xh + (size_t)min(col0 + r, nb - 1) * xstride + k0 + 8 * c));
            }
        } else if constexpr (XK == MMT_XQ8) {
            if (tid < 2 * BN) {
                int b = min(col0 + (tid >> 1), nb - 1), grp = k0 >> 5;
                uint4 v = __ldg((const uint4*)(xq + q8_off(grp, b, P) + 16 * (tid & 1)));
                bq[set][0] = v.x, bq[set][1] = v.y, bq[set][2] = v.z, bq[set][3] = v.w;
                bd[set] = __ldg(xd + q8_sc(grp, b, P)).x;
            }
        } else {
#pragma unroll
            for (int i = 0; i < BV; i++) {
                int idx = tid + 256 * i, r = idx >> 3, c = idx & 7;
                br[set][i] = __ldg((const float4*)(x + (size_t)min(col0 + r, nb - 1) * xstride + k0 + 4 * c));
            }
        }
    };
    auto store = [&](int set, int buf, int k0) {
        mmt_a_store<T>(ar[set], As + buf * MMT_BM * MMT_S, k0);
        if constexpr (XK == MMT_XF16) {
#pragma unroll
            for (int i = 0; i < BN / 64; i++) {
                int idx = tid + 256 * i, r = idx >> 2, c = idx & 3;
                *(uint4*)(Bs + buf * BN * MMT_S + r * MMT_S + 8 * c) = bh[set][i];
            }
        } else if constexpr (XK == MMT_XQ8) {
            if (tid < 2 * BN) mmt_s8_store(bq[set], bd[set], Bs + buf * BN * MMT_S + (tid >> 1) * MMT_S + 16 * (tid & 1));
        } else {
#pragma unroll
            for (int i = 0; i < BV; i++) {
                int idx = tid + 256 * i, r = idx >> 3, c = idx & 7;
                *(uint2*)(Bs + buf * BN * MMT_S + r * MMT_S + 4 * c) =
                    make_uint2(pack_half2(br[set][i].x, br[set][i].y), pack_half2(br[set][i].z, br[set][i].w));
            }
        }
    };

    float acc[MI][NJ][4];
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < NJ; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.f;

    // Step s computes from buffer s&1, which register set s%NS filled;
    // set s%NS is then free and loads step s+NS, and set (s+1)%NS (loaded
    // NS-1 steps before) fills buffer (s+1)&1, last read in step s-1.
    int steps = n / MMT_BK;
#pragma unroll
    for (int i = 0; i < NS; i++)
        if (i < steps) load(i, i * MMT_BK);
    store(0, 0, 0);
    __syncthreads();
    // set and buf are constants at each call below, so the register sets
    // stay in registers
    auto step = [&](int s, int set, int buf) {
        if (s + NS < steps) load(set, (s + NS) * MMT_BK);
        const u16* A = As + buf * MMT_BM * MMT_S;
        const u16* B = Bs + buf * BN * MMT_S;
#pragma unroll
        for (int ks = 0; ks < 2; ks++)
            warp_tile_k16<MI, NJ, MMT_S>(acc, A, B, WTM * wm, WTN * wn, 16 * ks, lane);
        if (s + 1 < steps) store((set + 1) % NS, buf ^ 1, (s + 1) * MMT_BK);
        __syncthreads();
    };
    constexpr int L = NS % 2 ? 2 * NS : NS; // steps until set and buf repeat
    for (int s0 = 0; s0 < steps; s0 += L) {
#pragma unroll
        for (int i = 0; i < L; i++)
            if (s0 + i < steps) step(s0 + i, i % NS, i & 1);
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

// mmt_<name> (128 x 64, two blocks a multiprocessor) and mmt_<name>_128
// (128 x 128, one) read F32 activations; mmtq_<name>[_128], for the integer
// weight types, the 8-bit copy of common.cuh that their other kernels read
// (a quarter of the bytes, so the tile's loads from L2 shrink by more than
// half), dequantized to F16 on the way into shared memory; mmth_f16[_128]
// an F16 copy of the activations (copy_f32_f16 into the workspace).
#define MMT_ONE(T, kname, BN, WGM, MINB)                                                                  \
    extern "C" __global__ void __launch_bounds__(256, MINB) kname(                                        \
        JOBS_PARAMS, const float* x, long long xstride, int n, int nb, int accumulate) {                    \
        grid_dep_begin();                                                                                   \
        PICK_JOB                                                                                            \
        mmt<T, BN, WGM, MMT_XF32, 2>(w, wstride, y, ystride, rows, x, xstride, nullptr, nullptr, n, nb, accumulate); \
    }
#define MMTQ_ONE(T, kname, BN, WGM, MINB, NS)                                                             \
    extern "C" __global__ void __launch_bounds__(256, MINB) kname(                                        \
        JOBS_PARAMS, const signed char* xq, const float2* xd, int n, int nb, int accumulate) {              \
        grid_dep_begin();                                                                                   \
        PICK_JOB                                                                                            \
        mmt<T, BN, WGM, MMT_XQ8, NS>(w, wstride, y, ystride, rows, nullptr, 0, xq, xd, n, nb, accumulate);  \
    }
#define MMTH_ONE(kname, BN, WGM, MINB, NS)                                                                \
    extern "C" __global__ void __launch_bounds__(256, MINB) kname(                                        \
        JOBS_PARAMS, const u16* x, long long xstride, int n, int nb, int accumulate) {                      \
        grid_dep_begin();                                                                                   \
        PICK_JOB                                                                                            \
        mmt<T_F16, BN, WGM, MMT_XF16, NS>(w, wstride, y, ystride, rows, x, xstride, nullptr, nullptr, n, nb, \
                                          accumulate);                                                      \
    }
#define MMT(T, name) MMT_ONE(T, mmt_##name, 64, 4, 2) MMT_ONE(T, mmt_##name##_128, 128, 2, 1)
// The 8-bit and F16 ones come with loads 2, 3 or 4 steps ahead (suffix
// _3, _4 for the deeper ones).
#define MMTQ(T, name)                                                                                      \
    MMTQ_ONE(T, mmtq_##name, 64, 4, 2, 2) MMTQ_ONE(T, mmtq_##name##_128, 128, 2, 1, 2)                     \
    MMTQ_ONE(T, mmtq_##name##_3, 64, 4, 2, 3) MMTQ_ONE(T, mmtq_##name##_128_3, 128, 2, 1, 3)               \
    MMTQ_ONE(T, mmtq_##name##_4, 64, 4, 2, 4) MMTQ_ONE(T, mmtq_##name##_128_4, 128, 2, 1, 4)
MMT(T_F16, f16) MMT(T_Q4_K, q4_k) MMT(T_Q6_K, q6_k) MMT(T_Q8_0, q8_0)
MMTQ(T_Q4_K, q4_k) MMTQ(T_Q6_K, q6_k) MMTQ(T_Q8_0, q8_0)
MMTH_ONE(mmth_f16, 64, 4, 2, 2) MMTH_ONE(mmth_f16_128, 128, 2, 1, 2)
MMTH_ONE(mmth_f16_3, 64, 4, 2, 3) MMTH_ONE(mmth_f16_128_3, 128, 2, 1, 3)
MMTH_ONE(mmth_f16_4, 64, 4, 2, 4) MMTH_ONE(mmth_f16_128_4, 128, 2, 1, 4)
