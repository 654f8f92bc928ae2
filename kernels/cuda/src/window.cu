// Sliding-window attention (kernels.Attention with Window > 0: Gemma's
// local layers). Query row b at position p attends cache rows
// max(0, p-window+1) .. p, read from the positions on the device, so one
// captured graph serves every step. One block of 4 warps per (query head,
// row): the warps take the window's keys in turn, each keeping a running
// maximum, total and value sums (online softmax), merged at the end. A
// window holds at most a few thousand keys, so this simple kernel is
// enough; the causal kernels of attention.cu stay untouched.
#include "common.cuh"

#define WIN_WARPS 4

template <typename KT> __device__ __forceinline__ float kv_at(const KT* p);
template <> __device__ __forceinline__ float kv_at<float>(const float* p) { return *p; }
template <> __device__ __forceinline__ float kv_at<u16>(const u16* p) { return h2f(*p); }

// head_dim is a multiple of 32 up to 256: a lane holds elements lane + 32i.
template <typename KT, typename VT>
__device__ void attn_window(const float* __restrict__ q, long long qstride, const KT* __restrict__ k,
                            long long kstride, const VT* __restrict__ v, long long vstride,
                            const int* __restrict__ pos, float* __restrict__ y, long long ystride, int heads,
                            int kv_heads, int head_dim, float scale, int window) {
    __shared__ float sm[WIN_WARPS], sl[WIN_WARPS], sacc[WIN_WARPS][256];
    int h = blockIdx.x, r = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int kvh = h / (heads / kv_heads), per = head_dim >> 5;
    int p = pos[r], start = max(0, p - window + 1);
    float qv[8], acc[8];
#pragma unroll
    for (int i = 0; i < 8; i++) {
        qv[i] = i < per ? q[r * qstride + h * head_dim + lane + 32 * i] * scale : 0.f;
        acc[i] = 0.f;
    }
    float m = -INFINITY, l = 0.f;
    for (int t = start + warp; t <= p; t += WIN_WARPS) {
        const KT* kr = k + (size_t)t * kstride + kvh * head_dim + lane;
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < 8; i++)
            if (i < per) s += qv[i] * kv_at<KT>(kr + 32 * i);
        s = warp_sum(s);
        float mn = fmaxf(m, s), c = expf(m - mn), e = expf(s - mn);
        l = l * c + e;
        const VT* vr = v + (size_t)t * vstride + kvh * head_dim + lane;
#pragma unroll
        for (int i = 0; i < 8; i++)
            if (i < per) acc[i] = acc[i] * c + e * kv_at<VT>(vr + 32 * i);
        m = mn;
    }
    if (lane == 0) sm[warp] = m, sl[warp] = l;
#pragma unroll
    for (int i = 0; i < 8; i++)
        if (i < per) sacc[warp][lane + 32 * i] = acc[i];
    __syncthreads();
    float M = -INFINITY;
    for (int w = 0; w < WIN_WARPS; w++) M = fmaxf(M, sm[w]);
    float L = 0.f;
    for (int w = 0; w < WIN_WARPS; w++)
        if (sl[w] > 0.f) L += sl[w] * expf(sm[w] - M);
    for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
        float o = 0.f;
        for (int w = 0; w < WIN_WARPS; w++)
            if (sl[w] > 0.f) o += sacc[w][d] * expf(sm[w] - M);
        y[r * ystride + h * head_dim + d] = o / L;
    }
}

#define WIN_KERNEL(KT, VT, kn, vn)                                                                        \
    extern "C" __global__ void __launch_bounds__(32 * WIN_WARPS) attention_window_##kn##_##vn(              \
        const float* q, long long qstride, const KT* k, long long kstride, const VT* v, long long vstride,  \
        const int* pos, float* y, long long ystride, int heads, int kv_heads, int head_dim, float scale,    \
        int window) {                                                                                     \
        grid_dep_begin();                                                                                 \
        attn_window<KT, VT>(q, qstride, k, kstride, v, vstride, pos, y, ystride, heads, kv_heads, head_dim, \
                            scale, window);                                                               \
    }

WIN_KERNEL(float, float, f32, f32)
WIN_KERNEL(u16, u16, f16, f16)
WIN_KERNEL(float, u16, f32, f16)
WIN_KERNEL(u16, float, f16, f32)
