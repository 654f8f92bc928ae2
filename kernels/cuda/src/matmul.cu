// Matrix-matrix products for prefill and large verification batches:
// Y[b][o] = W[o] . X[b]. A 64x64 output tile per block: each step
// dequantizes a 64x32 slice of W and loads a 64x32 slice of X into shared
// memory, then every thread accumulates a 4x4 patch in registers.
#include "common.cuh"

#define MM_TILE 64
#define MM_K 32

template <int T>
__device__ void mm_tile(const u8* __restrict__ w, long long wstride, const float* __restrict__ x,
                        long long xstride, float* __restrict__ y, long long ystride, int rows, int n,
                        int nb, int accumulate) {
    __shared__ float ws[MM_K][MM_TILE + 1];
    __shared__ float xs[MM_K][MM_TILE + 1];
    int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4; // 256 threads
    int row0 = blockIdx.x * MM_TILE, b0 = blockIdx.y * MM_TILE;
    float acc[4][4] = {};
    for (int g = 0; g < (n >> 5); g++) {
        // W slice: threads 0..63 each dequantize one row's 32 elements.
        if (tid < MM_TILE) {
            int r = row0 + tid;
            float v[32];
            if (r < rows) {
                dequant32<T>(w + (size_t)r * wstride, g, v);
            } else {
#pragma unroll
                for (int i = 0; i < 32; i++) v[i] = 0.f;
            }
#pragma unroll
            for (int i = 0; i < 32; i++) ws[i][tid] = v[i];
        }
        // X slice: 64 rows x 32 floats, 8 per thread.
#pragma unroll
        for (int i = 0; i < 8; i++) {
            int e = tid + 256 * i, rb = e >> 5, k = e & 31;
            int b = b0 + rb;
            xs[k][rb] = b < nb ? x[b * xstride + 32 * g + k] : 0.f;
        }
        __syncthreads();
#pragma unroll 8
        for (int k = 0; k < MM_K; k++) {
            float a[4], c[4];
#pragma unroll
            for (int i = 0; i < 4; i++) { a[i] = ws[k][ty * 4 + i]; c[i] = xs[k][tx * 4 + i]; }
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[i][j] += a[i] * c[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int j = 0; j < 4; j++) {
        int b = b0 + tx * 4 + j;
        if (b >= nb) continue;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int r = row0 + ty * 4 + i;
            if (r < rows) {
                float* out = y + b * ystride + r;
                *out = accumulate ? *out + acc[i][j] : acc[i][j];
            }
        }
    }
}

#define MM(T, name)                                                                             \
    extern "C" __global__ void __launch_bounds__(256)                                           \
        mm_##name(const u8* w, long long wstride, const float* x, long long xstride, float* y, \
                  long long ystride, int rows, int n, int nb, int accumulate) {               \
        grid_dep_begin();                                                                     \
        mm_tile<T>(w, wstride, x, xstride, y, ystride, rows, n, nb, accumulate);              \
    }
FOR_EACH_WEIGHT_TYPE(MM)
