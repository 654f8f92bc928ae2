// One-shot all-reduce of a tensor split's shares across the devices of a
// group (kernels.AllReduce). Every member runs this kernel on its own
// stream; the members meet through flags in device memory, not through the
// host or the copy engine: each block tells the others its share is ready,
// waits until theirs are, reads them where they lie (another GPU's memory
// over NVLink, or the same GPU's for virtual devices), writes
// dst = a + (s0 + s1 + ...) in member order, so every member gets the same
// bits, and then waits until the others have read its share, which the
// kernels after it may overwrite.
//
// Flags of one member, 32-bit words: arrive[AR_BLOCKS][AR_MEMBERS] and
// done[AR_BLOCKS][AR_MEMBERS], written by the other members (slot [b][m]:
// member m's block b has reached that point of its epoch), then
// epoch[AR_BLOCKS], this member's count of the reduces each block slot
// has run, then gave_up, set when this member has given a round up (see
// below). Every member runs the same reduces with the same grid, so the
// counts agree without being exchanged; a member at epoch e+1 may already
// have raised an arrive flag to e+1 while another still waits for e, so
// waits are for "at least e". A block of one kernel touches only its own
// slots, so the blocks need not wait for each other.
//
// A wait is bounded: a member whose peer has not come after timeout_ns
// gives the round up. It writes why into stuck, words in the member's
// page-locked host memory (set, then block, wait phase, epoch, peer and
// the peer's flag seen: reduceStuckWords in allreduce.go), and sets gave_up, after which
// every reduce of the member returns at once, leaving dst as it was, so
// that its stream drains instead of the kernel trapping (a trap would end
// the whole CUDA context). gave_up lies in device memory because every
// reduce reads it; stuck is read by the host, which reports the group
// stuck and zeroes the flags and stuck on every member, and so starts the
// epochs anew (kernels/cuda/allreduce.go).
#include "common.cuh"

#define AR_MEMBERS 8
#define AR_BLOCKS 64
#define AR_ARRIVE 0
#define AR_DONE (AR_BLOCKS * AR_MEMBERS)
#define AR_EPOCH (2 * AR_BLOCKS * AR_MEMBERS)
#define AR_GAVE_UP (AR_EPOCH + AR_BLOCKS)
// How often a wait looks at gave_up (ns): once one block of a member has
// given up, the member's other waiting blocks stop too.
#define AR_STUCK_POLL_NS 1000000ull

__device__ __forceinline__ void st_release_sys(unsigned* p, unsigned v) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ unsigned ld_acquire_sys(const unsigned* p) {
    unsigned v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// meet raises this block's flag at slot base on every other member and
// waits until every other member has raised its own here to epoch e. The
// full system fence before the raise is what the kernel was tested with
// (kernels/cuda/NOTES.md, htp's calls); a variant with the release store
// alone did not finish TestAllReduce's three-member case in 12 s, and
// whether that was a hang was not settled, so the fence stays. It returns
// false, having written why into stuck, when a peer has not come within
// timeout ns, or when the member has given up already.
__device__ __forceinline__ bool meet(unsigned* const* flags, int rank, int members, int base, unsigned e,
                                     volatile unsigned* stuck, unsigned long long timeout) {
    volatile unsigned* gave_up = flags[rank] + AR_GAVE_UP;
    __threadfence_system();
    int slot = base + blockIdx.x * AR_MEMBERS;
#pragma unroll
    for (int m = 0; m < AR_MEMBERS; m++)
        if (m < members && m != rank) st_release_sys(flags[m] + slot + rank, e);
    const unsigned* own = flags[rank] + slot;
    unsigned long long start = now_ns(), polled = start;
#pragma unroll
    for (int m = 0; m < AR_MEMBERS; m++) {
        if (m >= members || m == rank) continue;
        unsigned seen;
        while ((int)((seen = ld_acquire_sys(own + m)) - e) < 0) {
            unsigned long long t = now_ns();
            if (t - polled > AR_STUCK_POLL_NS) {
                polled = t;
                if (*gave_up) return false;
            }
            if (t - start > timeout) {
                if (!*gave_up) {
                    *gave_up = 1;
                    stuck[1] = blockIdx.x;
                    stuck[2] = base == AR_ARRIVE ? 0 : 1;
                    stuck[3] = e;
                    stuck[4] = m;
                    stuck[5] = seen;
                    __threadfence_system();
                    stuck[0] = 1;
                    __threadfence_system();
                }
                return false;
            }
        }
    }
    return true;
}

// all_reduce_f32: n elements; s0..s7 the members' shares (mask: the
// members that add one), f0..f7 their flags; a may be null. vec: every
// pointer is 16-byte aligned, so n/4 float4 are read, then the tail.
extern "C" __global__ void __launch_bounds__(256) all_reduce_f32(
    float* dst, const float* a, const float* s0, const float* s1, const float* s2, const float* s3,
    const float* s4, const float* s5, const float* s6, const float* s7, unsigned mask, unsigned* f0,
    unsigned* f1, unsigned* f2, unsigned* f3, unsigned* f4, unsigned* f5, unsigned* f6, unsigned* f7, int rank,
    int members, long long n, int vec, unsigned* stuck_words, unsigned long long timeout) {
    grid_dep_begin();
    const float* s[AR_MEMBERS] = {s0, s1, s2, s3, s4, s5, s6, s7};
    unsigned* const flags[AR_MEMBERS] = {f0, f1, f2, f3, f4, f5, f6, f7};
    volatile unsigned* stuck = stuck_words;
    __shared__ unsigned epoch;
    __shared__ bool met;
    if (threadIdx.x == 0) {
        unsigned* mine = flags[rank] + AR_EPOCH + blockIdx.x;
        unsigned e = *mine + 1;
        *mine = e;
        epoch = e;
        met = !*(volatile unsigned*)(flags[rank] + AR_GAVE_UP) && meet(flags, rank, members, AR_ARRIVE, e, stuck, timeout);
    }
    __syncthreads();
    if (!met) return;
    long long stride = (long long)gridDim.x * blockDim.x, first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long head = 0;
    if (vec) {
        head = n / 4;
        for (long long i = first; i < head; i += stride) {
            float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
            bool any = false;
#pragma unroll
            for (int m = 0; m < AR_MEMBERS; m++) {
                if (m >= members || !(mask >> m & 1)) continue;
                float4 w = __ldcg((const float4*)s[m] + i);
                if (any) {
                    v.x += w.x, v.y += w.y, v.z += w.z, v.w += w.w;
                } else {
                    v = w, any = true;
                }
            }
            if (a) {
                float4 r = ((const float4*)a)[i];
                v = make_float4(r.x + v.x, r.y + v.y, r.z + v.z, r.w + v.w);
            }
            ((float4*)dst)[i] = v;
        }
        head *= 4;
    }
    for (long long i = head + first; i < n; i += stride) {
        float v = 0.f;
        bool any = false;
#pragma unroll
        for (int m = 0; m < AR_MEMBERS; m++) {
            if (m >= members || !(mask >> m & 1)) continue;
            float w = __ldcg(s[m] + i);
            v = any ? v + w : w;
            any = true;
        }
        dst[i] = a ? a[i] + v : v;
    }
    __syncthreads();
    if (threadIdx.x == 0) meet(flags, rank, members, AR_DONE, epoch, stuck, timeout);
}
