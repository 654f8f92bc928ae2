// Prefill products of F16 weights on Hopper's warpgroup tensor-core
// instructions: mmtw_f16_<NS> (128 weight rows by 128 batch rows) and
// mmtw64_f16_<NS> (by 64), NS shared-memory stages. Y[b][o] = W[o] . X[b].
//
// Why a second F16 tile beside prefill.cu's mmtc_f16: that one issues
// mma.sync m16n8k16 from registers filled by ldmatrix, and on the H200 it
// stopped at 195-217 TFLOP/s inside the block (kernels/cuda/NOTES.md,
// hpre's call): every 16-step each warp loads its fragments, then waits on
// them, and the issue slots for ldmatrix, mma and address arithmetic are
// shared by 8 warps. wgmma.mma_async reads both operands straight from
// shared memory, a warpgroup of 4 warps asks for a 64 x BN x 16 product in
// one instruction, and the product runs while the warps go on to the next
// copies and barrier. llama.cpp's own F16 prefill reaches its 16,878 tok/s
// (8B, pp512) through a library GEMM built on these instructions.
//
// wgmma exists only on sm_90a (not on later GPUs, not in compute_90 PTX),
// so this file is built apart into ptx/sm90a (gen.sh) and the backend loads
// it only on compute capability 9.0; everything else keeps prefill.cu.
//
// Layout: each stage holds the weight tile (128 rows of 64 halves) and the
// activation tile (BN rows of 64 halves), rows of 128 bytes in the 128-byte
// swizzle wgmma reads: the 16-byte piece c of row r sits at piece c ^ (r%8),
// so the 8 rows of a core matrix fall in distinct banks. cp.async writes
// them in that order; a stage starts at a multiple of 1024 bytes (the
// swizzle's period). Both operands are K-major (the inner dimension
// contiguous), as the weights and the F16 activation copy already are.
//
// Pipeline: 256 threads, two warpgroups each computing 64 weight rows x BN.
// Step s waits for its stage, fences the copies into the async proxy that
// wgmma reads through, meets the other warpgroup at one barrier, issues the
// copy of stage s+NS-2 into the slot of step s-2 (whose products every
// thread has waited for at the end of step s-1), then the four k16
// products of the step, and waits for those of step s-1 only: one group of
// products stays in flight across the barrier.
#include "../common.cuh"

#define MMTW_BM 128 // weight rows a block
#define MMTW_BK 64  // inner dimension a step: one 128-byte swizzled row

// mmtw_desc is the wgmma shared-memory descriptor of a K-major operand
// whose rows of 128 bytes start at shared address addr, 128-byte swizzle:
// start address, leading byte offset (unused for this layout, 1), stride
// byte offset 1024 (8 rows, one core matrix to the next), swizzle mode 1.
__device__ __forceinline__ unsigned long long mmtw_desc(unsigned addr) {
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | (1ull << 16) | ((unsigned long long)(1024 >> 4) << 32) |
           (1ull << 62);
}

// mmtw_mma adds A (64 x 16, descriptor da) times B (BN x 16, db) to the
// warpgroup's accumulators d (BN/2 a thread).
template <int BN> __device__ __forceinline__ void mmtw_mma(float* d, unsigned long long da, unsigned long long db);

template <> __device__ __forceinline__ void mmtw_mma<64>(float* d, unsigned long long da, unsigned long long db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
        :
          "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(da), "l"(db), "r"(1));
}

template <> __device__ __forceinline__ void mmtw_mma<128>(float* d, unsigned long long da, unsigned long long db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
        :
          "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(da), "l"(db), "r"(1));
}

// mmtw_hold keeps the compiler from moving reads or writes of the
// accumulators across the asynchronous products.
template <int N> __device__ __forceinline__ void mmtw_hold(float* d) {
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+f"(d[i])::"memory");
}

// mmtw: the tile of weight rows 128*bx and batch rows BN*bz.
template <int NS, int BN>
__device__ void mmtw(const u8* __restrict__ w, long long wstride, float* __restrict__ y, long long ystride, int rows,
                     const u16* __restrict__ xh, long long xstride, int n, int nb, int accumulate, int bx, int bz) {
    constexpr int ATILE = MMTW_BM * 128, STAGE = ATILE + BN * 128, NA = BN / 2;
    static_assert(NS >= 3, "the copies run NS-2 steps ahead");
    extern __shared__ uint4 mmtw_smem[];
    unsigned base = (unsigned)__cvta_generic_to_shared(mmtw_smem);
    unsigned pad = ((base + 1023) & ~1023u) - base; // the backend asks for 1024 bytes more
    u8* ring = (u8*)mmtw_smem + pad;
    unsigned sring = base + pad;
    int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2, t = lane & 3;
    int row0 = bx * MMTW_BM, col0 = bz * BN;
    if (row0 >= rows) return;

    auto copy = [&](int slot, int k0) {
        u8* st = ring + slot * STAGE;
#pragma unroll
        for (int i = 0; i < MMTW_BM / 32; i++) {
            int idx = tid + 256 * i, r = idx >> 3, c = idx & 7;
            cp_async16(st + r * 128 + ((c ^ (r & 7)) << 4),
                       w + (size_t)min(row0 + r, rows - 1) * wstride + 2 * (size_t)(k0 + 8 * c));
        }
#pragma unroll
        for (int i = 0; i < BN / 32; i++) {
            int idx = tid + 256 * i, r = idx >> 3, c = idx & 7;
            cp_async16(st + ATILE + r * 128 + ((c ^ (r & 7)) << 4),
                       xh + (size_t)min(col0 + r, nb - 1) * xstride + k0 + 8 * c);
        }
    };
    float d[NA];
#pragma unroll
    for (int i = 0; i < NA; i++) d[i] = 0.f;
    mmtw_hold<NA>(d);

    int steps = n / MMTW_BK;
#pragma unroll
    for (int i = 0; i < NS - 2; i++) {
        if (i < steps) copy(i, i * MMTW_BK);
        cp_async_commit();
    }
#pragma unroll 1
    for (int s = 0; s < steps; s++) {
        cp_async_wait<NS - 3>();
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        __syncthreads();
        if (s + NS - 2 < steps) copy((s + NS - 2) % NS, (s + NS - 2) * MMTW_BK);
        cp_async_commit();
        unsigned st = sring + (s % NS) * STAGE;
        unsigned sa = st + wg * 64 * 128, sb = st + ATILE;
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
        for (int ks = 0; ks < MMTW_BK / 16; ks++) mmtw_mma<BN>(d, mmtw_desc(sa + 32 * ks), mmtw_desc(sb + 32 * ks));
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    mmtw_hold<NA>(d);
    // the accumulator of a thread: d[4j+e] is weight row 16*warp + g +
    // 8*(e/2) of its warpgroup's 64, batch row 8j + 2t + e%2
#pragma unroll
    for (int j = 0; j < BN / 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            int r = row0 + 64 * wg + 16 * warp + g + 8 * (e >> 1), b = col0 + 8 * j + 2 * t + (e & 1);
            if (r < rows && b < nb) {
                float* out = y + (size_t)b * ystride + r;
                *out = accumulate ? *out + d[4 * j + e] : d[4 * j + e];
            }
        }
}

// Entry points with the job parameters and block order of prefill.cu's
// mmtc (common.cuh's JOBS_PARAMS and PICK_TILE_JOB: batch blocks fastest,
// so the blocks of one weight tile run side by side).
#define MMTW_ONE(kname, NS, BN)                                                                         \
    extern "C" __global__ void __launch_bounds__(256, 1) kname(                                         \
        JOBS_PARAMS, const u16* x, long long xstride, int n, int nb, int accumulate) {                    \
        grid_dep_begin();                                                                                 \
        PICK_TILE_JOB                                                                                     \
        mmtw<NS, BN>(w, wstride, y, ystride, rows, x, xstride, n, nb, accumulate, bx, bz);                \
    }
MMTW_ONE(mmtw_f16_4, 4, 128) MMTW_ONE(mmtw_f16_5, 5, 128) MMTW_ONE(mmtw_f16_6, 6, 128)
MMTW_ONE(mmtw64_f16_4, 4, 64) MMTW_ONE(mmtw64_f16_5, 5, 64) MMTW_ONE(mmtw64_f16_6, 6, 64)
