// Elementwise ops on [rows, n] F32 views (strides in elements): add and mul
// with an optional broadcast row, the SwiGLU gate, F32/F16 copies and RoPE.
// Grids are (ceil(n/256), rows).
#include "common.cuh"

// bstride 0 broadcasts b's first row over all rows.
extern "C" __global__ void add_f32(const float* a, long long astride, const float* b, long long bstride,
                                   float* y, long long ystride, int n) {
    grid_dep_begin();
    int i = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
    if (i < n) y[r * ystride + i] = a[r * astride + i] + b[r * bstride + i];
}
extern "C" __global__ void mul_f32(const float* a, long long astride, const float* b, long long bstride,
                                   float* y, long long ystride, int n) {
    grid_dep_begin();
    int i = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
    if (i < n) y[r * ystride + i] = a[r * astride + i] * b[r * bstride + i];
}
extern "C" __global__ void swiglu_f32(const float* g, long long gstride, const float* u, long long ustride,
                                      float* y, long long ystride, int n) {
    grid_dep_begin();
    int i = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
    if (i < n) {
        float x = g[r * gstride + i];
        y[r * ystride + i] = x / (1.f + __expf(-x)) * u[r * ustride + i];
    }
}
extern "C" __global__ void copy_f32_f32(const float* x, long long xstride, float* y, long long ystride, int n) {
    grid_dep_begin();
    int i = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
    if (i < n) y[r * ystride + i] = x[r * xstride + i];
}
extern "C" __global__ void copy_f32_f16(const float* x, long long xstride, u16* y, long long ystride, int n) {
    grid_dep_begin();
    int i = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
    if (i < n) y[r * ystride + i] = f2h(x[r * xstride + i]);
}
extern "C" __global__ void copy_f16_f32(const u16* x, long long xstride, float* y, long long ystride, int n) {
    grid_dep_begin();
    int i = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
    if (i < n) y[r * ystride + i] = h2f(x[r * xstride + i]);
}
extern "C" __global__ void copy_f16_f16(const u16* x, long long xstride, u16* y, long long ystride, int n) {
    grid_dep_begin();
    int i = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
    if (i < n) y[r * ystride + i] = x[r * xstride + i];
}

// rope: one thread per rotated pair; grid (ceil(threads/256), rows, jobs).
// Two rotations with the same positions and parameters (Q and K) run as
// one launch, blockIdx.z choosing the job. factors may be null.
extern "C" __global__ void rope_f32(const float* x0, long long xs0, float* y0, long long ys0, int heads0,
                                    const float* x1, long long xs1, float* y1, long long ys1, int heads1,
                                    const int* pos, const float* factors, int head_dim,
                                    int dims, float base, float scale, int neox) {
    grid_dep_begin();
    bool j1 = blockIdx.z == 1;
    const float* x = j1 ? x1 : x0;
    float* y = j1 ? y1 : y0;
    long long xstride = j1 ? xs1 : xs0, ystride = j1 ? ys1 : ys0;
    int heads = j1 ? heads1 : heads0;
    int half = dims >> 1;
    int t = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
    if (t >= heads * half) {
        // copy the unrotated tail of each head when rotating out of place
        int tail = head_dim - dims, u = t - heads * half;
        if (tail > 0 && x != y && u < heads * tail) {
            int h = u / tail, e = dims + u % tail;
            y[r * ystride + h * head_dim + e] = x[r * xstride + h * head_dim + e];
        }
        return;
    }
    int h = t / half, j = t % half;
    float theta = (float)pos[r] * scale * powf(base, -2.f * j / dims);
    if (factors) theta /= factors[j];
    float c, s;
    sincosf(theta, &s, &c);
    int i0 = neox ? j : 2 * j, i1 = neox ? j + half : 2 * j + 1;
    const float* xr = x + r * xstride + h * head_dim;
    float* yr = y + r * ystride + h * head_dim;
    float a = xr[i0], b = xr[i1];
    yr[i0] = a * c - b * s;
    yr[i1] = a * s + b * c;
}

// spin holds the stream for ns nanoseconds: the profiler queues a
// program's launches behind it, so its timings are kernel time rather than
// the host's launch rate.
extern "C" __global__ void spin(long long ns) {
    grid_dep_begin();
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        __nanosleep(1000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < (unsigned long long)ns);
}
