// The parts of attention that do not depend on how the cache is stored,
// shared by attention.cu (F32 and F16 caches) and attention_kv.cu (every
// other pair of K and V types): the running softmax of the decode and the
// several-row kernels, and their ends, where a block sums its partial
// output, and the key slices of a unit are merged by the last block to
// finish and written out (quantized on the way when a product reads them
// next).
#pragma once
#include "common.cuh"

// tile_softmax folds a tile's T scores es (-inf past its keys) into the
// running max m and sum l of a decode block, and leaves the keys' weights
// in pe; it returns the factor for what was summed so far. Every warp finds
// the tile's max and sum itself (same inputs, same result), so no further
// exchange is needed.
__device__ __forceinline__ float tile_softmax(const float* es, float* pe, int T, float& m, float& l) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    float mt = -INFINITY;
    for (int i = lane; i < T; i += 32) mt = fmaxf(mt, es[i]);
    mt = warp_max(mt);
    float mn = fmaxf(m, mt);
    float corr = __expf(m - mn), sum = 0.f;
    for (int i = lane; i < T; i += 32) {
        float e = __expf(es[i] - mn);
        sum += e;
        if (w == 0) pe[i] = e;
    }
    l = l * corr + warp_sum(sum);
    m = mn;
    return corr;
}

// key_softmax folds a several-row unit's scores of a tile, one key a
// lane (sc, -inf where the unit does not see the key: ok false), into its
// running max m and sum l, scales its output sums acc to the new max, and
// returns the lane's key weight. Where several lanes score one key, only
// the one with count set adds the weight to l.
__device__ __forceinline__ float key_softmax(float sc, bool ok, bool count, float& m, float& l, float (&acc)[8]) {
    float mt = warp_max(sc);
    float mn = fmaxf(m, mt);
    float corr = __expf(m - mn);
    float e = ok ? __expf(sc - mn) : 0.f;
    l = l * corr + warp_sum(count ? e : 0.f);
    m = mn;
#pragma unroll
    for (int d = 0; d < 8; d++) acc[d] *= corr;
    return e;
}

// sum_classes adds up the partial outputs of a decode block's n key
// classes: a thread of class c < n holds in acc its E output elements
// from col on (threads of c >= n hold none). red is shared memory for n
// rows of D floats; o (D floats, shared) gets the block's sums. NT is the
// block's threads.
template <int NT, int E>
__device__ __forceinline__ void sum_classes(const float (&acc)[8], float* red, float* o, int c, int n, int col,
                                            int D) {
    int tid = threadIdx.x;
    if (c < n) {
#pragma unroll
        for (int i = 0; i < 8; i++)
            if (i < E) red[c * D + col + i] = acc[i];
    }
    __syncthreads();
    for (int i = tid; i < D; i += NT) {
        float s = 0.f;
        for (int k = 0; k < n; k++) s += red[k * D + i];
        o[i] = s;
    }
}

// last_slice counts the calling block done with the slices of its units
// (cnt); it is true in the whole of the last block to finish, which resets
// the count for the next run and then reads the others' partials. Every
// thread calls it after writing its partials.
__device__ __forceinline__ bool last_slice(int* cnt, int nsplit) {
    __shared__ int last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        last = atomicAdd(cnt, 1) == nsplit - 1;
        if (last) *cnt = 0; // ready for the next run
    }
    __syncthreads();
    if (!last) return false;
    __threadfence();
    return true;
}

// decode_finish ends a decode block of NT threads for head h of row b,
// whose sums over its slice of keys are o[D] (shared) with running max m
// and sum l: with several slices it leaves them in part and returns unless
// it is the last block of (b, h) to finish, which merges all slices'
// (other blocks' partials are read from L2). The normalised head goes to
// y, and quantized to xq/xd when a product reads it next (xq non-null;
// row width n_head*D, gridDim.y rows).
template <int NT>
__device__ __forceinline__ void decode_finish(float* o, float m, float l, float* __restrict__ part,
                                              int* __restrict__ done, float* __restrict__ y, long long ystride,
                                              signed char* __restrict__ xq, float2* __restrict__ xd, int b, int h,
                                              int n_head, int D, int split, int nsplit) {
    int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    if (nsplit > 1) {
        float* out = part + (((size_t)b * n_head + h) * gridDim.z + split) * (D + 2);
        if (tid == 0) {
            out[0] = m;
            out[1] = l;
        }
        for (int i = tid; i < D; i += NT) out[2 + i] = o[i];
        if (!last_slice(done + b * n_head + h, nsplit)) return;
        const float* pp = part + ((size_t)b * n_head + h) * gridDim.z * (D + 2);
        for (int i = tid; i < D; i += NT) {
            float M = -INFINITY, L = 0.f, s = 0.f;
#pragma unroll 2
            for (int sp = 0; sp < nsplit; sp++) {
                const float* ps = pp + sp * (D + 2);
                float ms = __ldcg(ps), ls = __ldcg(ps + 1), a = __ldcg(ps + 2 + i), c, f;
                merge_step(M, ms, c, f);
                L = L * c + ls * f;
                s = s * c + a * f;
            }
            o[i] = L > 0.f ? s / L : 0.f;
        }
    } else {
        for (int i = tid; i < D; i += NT) o[i] = l > 0.f ? o[i] / l : 0.f;
    }
    __syncthreads();

    for (int g = w; g < (D >> 5); g += NT / 32) {
        int i = h * D + 32 * g + lane;
        float v = o[32 * g + lane];
        y[b * ystride + i] = v;
        if (xq) quantize_group(v, xq + q8_off(i >> 5, b, q8_pitch(gridDim.y)), xd + q8_sc(i >> 5, b, q8_pitch(gridDim.y)));
    }
}

// rows_finish ends a several-row block of WARPS warps, each owning up to
// UPW units (unit u = warp + WARPS*i is row b0 + u/gh, head h0 + u%gh;
// upos[i] < 0: none), a unit's lane holding output elements lane + 32*d
// (d < D/32) in acc with running max m and sum l. With several slices the
// partials go to part and only the last block of (head group, row tile) to
// finish goes on, merging every unit's slices. The normalised rows go to
// y, and quantized to xq/xd (nb rows) when a product reads them next.
template <int WARPS, int UPW>
__device__ __forceinline__ void rows_finish(const float (&m)[UPW], const float (&l)[UPW], const float (&acc)[UPW][8],
                                            const int (&upos)[UPW], float* __restrict__ part, int* __restrict__ done,
                                            float* __restrict__ y, long long ystride, signed char* __restrict__ xq,
                                            float2* __restrict__ xd, int n_head, int D, int nb, int b0, int h0,
                                            int gh, int split, int nsplit) {
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int DP = D >> 5; // output elements per lane
    // Unnormalised partials per slice, or the result at once.
    int finalize = 1;
    if (nsplit > 1) {
#pragma unroll
        for (int i = 0; i < UPW; i++) {
            if (upos[i] < 0) continue;
            int u = warp + WARPS * i, b = b0 + u / gh, h = h0 + u % gh;
            float* out = part + (((size_t)b * n_head + h) * gridDim.z + split) * (D + 2);
            if (lane == 0) {
                out[0] = m[i];
                out[1] = l[i];
            }
#pragma unroll
            for (int d = 0; d < 8; d++)
                if (d < DP) out[2 + lane + 32 * d] = acc[i][d];
        }
        if (!last_slice(done + blockIdx.y * gridDim.x + blockIdx.x, nsplit)) return;
        finalize = 0;
    }
    int P = q8_pitch(nb);
#pragma unroll
    for (int i = 0; i < UPW; i++) {
        if (upos[i] < 0) continue;
        int u = warp + WARPS * i, b = b0 + u / gh, h = h0 + u % gh;
        float o[8], L = l[i];
        if (finalize) {
#pragma unroll
            for (int d = 0; d < 8; d++) o[d] = acc[i][d];
        } else {
            // merge the slices (other blocks' partials are read from L2)
            const float* pp = part + ((size_t)b * n_head + h) * gridDim.z * (D + 2);
            float M = -INFINITY;
            L = 0.f;
#pragma unroll
            for (int d = 0; d < 8; d++) o[d] = 0.f;
#pragma unroll 2
            for (int sp = 0; sp < nsplit; sp++) {
                const float* ps = pp + sp * (D + 2);
                float ms = __ldcg(ps), ls = __ldcg(ps + 1), a[8], c, f;
#pragma unroll
                for (int d = 0; d < 8; d++) a[d] = d < DP ? __ldcg(ps + 2 + lane + 32 * d) : 0.f;
                merge_step(M, ms, c, f);
                L = L * c + ls * f;
#pragma unroll
                for (int d = 0; d < 8; d++) o[d] = o[d] * c + a[d] * f;
            }
        }
#pragma unroll
        for (int d = 0; d < 8; d++) {
            if (d >= DP) break;
            float val = L > 0.f ? o[d] / L : 0.f;
            int col = h * D + lane + 32 * d;
            y[(size_t)b * ystride + col] = val;
            // a warp's 32 lanes hold one whole group of 32 columns
            if (xq) quantize_group(val, xq + q8_off(col >> 5, b, P), xd + q8_sc(col >> 5, b, P));
        }
    }
}
