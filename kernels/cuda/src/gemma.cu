// Gemma's elementwise ops on [rows, n] F32 views (strides in elements),
// grids (ceil(n/256), rows): the GELU-tanh gate (GeGLU) and a constant
// scale (the embedding's sqrt(n_embd)).
#include "common.cuh"

// gelu(x) = x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))), as
// transformers' gelu_pytorch_tanh writes it.
extern "C" __global__ void geglu_f32(const float* g, long long gstride, const float* u, long long ustride,
                                     float* y, long long ystride, int n) {
    grid_dep_begin();
    int i = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
    if (i < n) {
        float x = g[r * gstride + i];
        float t = tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x));
        y[r * ystride + i] = 0.5f * x * (1.f + t) * u[r * ustride + i];
    }
}

extern "C" __global__ void scale_f32(const float* x, long long xstride, float* y, long long ystride, int n,
                                     float c) {
    grid_dep_begin();
    int i = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
    if (i < n) y[r * ystride + i] = x[r * xstride + i] * c;
}
