/* SPDX-License-Identifier: BSD-3-Clause */
// One-shot kernels for small messages between the GPUs of one host (backends/nccl/small.c): each rank pushes its
// blocks into its peers' staging areas over NVLink or PCIe peer access, raises a flag in each peer, waits for its
// peers' flags in its own memory, then reduces or copies out of its own staging area. One kernel launch per call
// costs the host less than NCCL's launch path, which is the whole point at these sizes. Built by nvcc into a
// fatbin that small.c embeds and loads with cudaLibraryLoadData.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "small_args.h"

namespace {

__device__ uint64_t load_acquire(const uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

// Relaxed: the caller's one fence orders the data before all its flags. A release store per flag would wait for
// the previous flag to reach its peer, an NVLink round trip per peer (4 x H200: 8.6-11.1 us a call, not 5.9-7.1).
__device__ void store_relaxed(uint64_t *p, uint64_t v)
{
    asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ uint64_t now_ns()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Bytes [lo, hi) of src to dst, 16 bytes at a time where all three allow it.
__device__ void copy_bytes(char *dst, const char *src, size_t lo, size_t hi)
{
    if (((uintptr_t)(dst + lo) | (uintptr_t)(src + lo) | (hi - lo)) % 16 == 0) {
        for (size_t i = lo + threadIdx.x * 16; i < hi; i += blockDim.x * 16)
            *reinterpret_cast<uint4 *>(dst + i) = *reinterpret_cast<const uint4 *>(src + i);
    } else {
        for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x)
            dst[i] = src[i];
    }
}

// Accumulation type: half types in float, integers and floats as themselves.
template <typename T> struct acc { typedef T type; };
template <> struct acc<__half> { typedef float type; };
template <> struct acc<__nv_bfloat16> { typedef float type; };

template <typename T> __device__ typename acc<T>::type widen(T v) { return v; }
template <> __device__ float widen<__half>(__half v) { return __half2float(v); }
template <> __device__ float widen<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ T narrow(typename acc<T>::type v) { return v; }
template <> __device__ __half narrow<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __nv_bfloat16 narrow<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// Elements [lo, hi) of the senders' blocks in `stage` (one every `slot` bytes, in rank order, so every rank adds
// in the same order and gets the same bits), reduced into out.
template <typename T>
__device__ void reduce(T *out, const char *stage, size_t slot, int n, int op, size_t lo, size_t hi)
{
    typedef typename acc<T>::type A;
    for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        A v = widen(reinterpret_cast<const T *>(stage)[i]);
        for (int s = 1; s < n; s++) {
            A w = widen(reinterpret_cast<const T *>(stage + s * slot)[i]);
            switch (op) {
            case TCN_SMALL_PROD: v = v * w; break;
            case TCN_SMALL_MIN: v = w < v ? w : v; break;
            case TCN_SMALL_MAX: v = w > v ? w : v; break;
            default: v = v + w; break;
            }
        }
        if (op == TCN_SMALL_AVG)
            v = v / static_cast<A>(n);
        out[i] = narrow<T>(v);
    }
}

__device__ void reduce_any(const tcn_small_args_t &a, void *out, const char *stage, size_t lo, size_t hi)
{
    switch (a.dtype) {
    case TCN_SMALL_I8: reduce(static_cast<int8_t *>(out), stage, a.slot, a.size, a.op, lo, hi); break;
    case TCN_SMALL_U8: reduce(static_cast<uint8_t *>(out), stage, a.slot, a.size, a.op, lo, hi); break;
    case TCN_SMALL_I32: reduce(static_cast<int32_t *>(out), stage, a.slot, a.size, a.op, lo, hi); break;
    case TCN_SMALL_I64: reduce(static_cast<int64_t *>(out), stage, a.slot, a.size, a.op, lo, hi); break;
    case TCN_SMALL_F16: reduce(static_cast<__half *>(out), stage, a.slot, a.size, a.op, lo, hi); break;
    case TCN_SMALL_BF16: reduce(static_cast<__nv_bfloat16 *>(out), stage, a.slot, a.size, a.op, lo, hi); break;
    case TCN_SMALL_F32: reduce(static_cast<float *>(out), stage, a.slot, a.size, a.op, lo, hi); break;
    default: reduce(static_cast<double *>(out), stage, a.slot, a.size, a.op, lo, hi); break;
    }
}

} // namespace

// Block b handles elements [b * per, (b + 1) * per) of every rank's block, in three steps: push them to every
// rank (itself included), raise its flag in every rank, wait for every rank's flag in its own memory. The flags
// carry the call's epoch, which every rank counts alike; the staging areas alternate by its parity, so a rank
// can push call e + 1 while a slower peer still reads call e (it cannot reach e + 2 before that peer raised its
// flag for e + 1, after finishing e). A wait ends early when the host raises `abort` (the communicator failed).
extern "C" __global__ void tc_nccl_small(tcn_small_args_t a)
{
    const size_t es = a.elem_size, per = a.per_block;
    const size_t lo = blockIdx.x * per, hi = lo + per < a.count ? lo + per : a.count;
    const int par = static_cast<int>(a.epoch & 1);
    const int scatter = a.type == TCN_SMALL_REDUCE_SCATTER || a.type == TCN_SMALL_ALL_TO_ALL;
    __shared__ int quit;
    if (threadIdx.x == 0)
        quit = 0;
    for (int p = 0; p < a.size; p++) {
        const char *src = static_cast<const char *>(a.send) + (scatter ? p * a.count * es : 0);
        char *dst = static_cast<char *>(a.stage[p]) + (static_cast<size_t>(par) * a.size + a.rank) * a.slot;
        copy_bytes(dst, src, lo * es, hi * es);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence_system();
        for (int p = 0; p < a.size; p++)
            store_relaxed(a.flags[p] + a.rank * TCN_SMALL_MAX_BLOCKS + blockIdx.x, a.epoch);
    }
    if (threadIdx.x < a.size) {
        const uint64_t *f = a.flags[a.rank] + threadIdx.x * TCN_SMALL_MAX_BLOCKS + blockIdx.x;
        const uint64_t start = now_ns();
        for (unsigned spin = 0; load_acquire(f) < a.epoch; spin++) {
            // the host flag is read over PCIe, so only now and then; the backstop outlives any watchdog
            if ((spin & 1023) == 1023 && (*a.abort || now_ns() - start > a.backstop_ns)) {
                quit = 1;
                break;
            }
        }
    }
    __syncthreads();
    if (quit)
        return; // the output stays as it was; the host has failed the operation
    const char *stage = static_cast<const char *>(a.stage[a.rank]) + static_cast<size_t>(par) * a.size * a.slot;
    if (a.type == TCN_SMALL_ALL_REDUCE || a.type == TCN_SMALL_REDUCE_SCATTER) {
        reduce_any(a, a.recv, stage, lo, hi);
        return;
    }
    for (int s = 0; s < a.size; s++) // all_gather, all_to_all: rank s's block to its place
        copy_bytes(static_cast<char *>(a.recv) + s * a.count * es, stage + s * a.slot, lo * es, hi * es);
}
