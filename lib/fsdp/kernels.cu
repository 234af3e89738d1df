/* SPDX-License-Identifier: BSD-3-Clause */
// FSDP runtime kernels (lib/fsdp/cuda.c): element-wise cast, scale and scaled add over flat bucket memory, grid-stride,
// reading and writing in place (no staging). Built by nvcc into a fatbin that cuda.c embeds and loads with
// cuModuleLoadData, so libtcomms needs no CUDA runtime. Dtype codes: 0 float64, 1 float32, 2 bfloat16, 3 float16.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace {

// As the host path (lib/fsdp/ops.c): through double, and float64 -> bf16/fp16 through float32, rounding to
// nearest even at each step, so host and device give the same bits.
__device__ double load(const void *p, unsigned long long i, int t)
{
    switch (t) {
    case 0: return static_cast<const double *>(p)[i];
    case 1: return static_cast<const float *>(p)[i];
    case 2: return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
    default: return __half2float(static_cast<const __half *>(p)[i]);
    }
}

__device__ void store(void *p, unsigned long long i, int t, double v)
{
    switch (t) {
    case 0: static_cast<double *>(p)[i] = v; break;
    case 1: static_cast<float *>(p)[i] = static_cast<float>(v); break;
    case 2: static_cast<__nv_bfloat16 *>(p)[i] = __float2bfloat16_rn(static_cast<float>(v)); break;
    default: static_cast<__half *>(p)[i] = __float2half_rn(static_cast<float>(v)); break;
    }
}

__device__ unsigned long long first()
{
    return static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ unsigned long long stride()
{
    return static_cast<unsigned long long>(gridDim.x) * blockDim.x;
}

// float32 -> bfloat16, the cast of every ZeRO-3 all-gather's copy-in: without the generic path's switch and double
// (float -> double -> float is exact, so the bits are the same), four elements a load where both sides allow it.
__device__ void cast_f32_bf16(__nv_bfloat16 *dst, const float *src, unsigned long long n)
{
    unsigned long long i = first();
    if (reinterpret_cast<unsigned long long>(src) % 16 == 0 && reinterpret_cast<unsigned long long>(dst) % 8 == 0) {
        const float4 *s4 = reinterpret_cast<const float4 *>(src);
        __nv_bfloat162 *d2 = reinterpret_cast<__nv_bfloat162 *>(dst);
        for (; i < n / 4; i += stride()) {
            float4 v = s4[i];
            d2[2 * i] = __floats2bfloat162_rn(v.x, v.y);
            d2[2 * i + 1] = __floats2bfloat162_rn(v.z, v.w);
        }
        i = n / 4 * 4 + first();
    }
    for (; i < n; i += stride())
        dst[i] = __float2bfloat16_rn(src[i]);
}

// d = f * a (+ d when keep) for a bfloat16 block into a float32 shard, the add of every reduce-scatter under
// config->reduce_dtype bfloat16: the generic path's arithmetic (in double, one rounding to float at the end) without
// its switch, four elements a load where both sides allow it.
__device__ double add_one(float d, float a, double f, int keep)
{
    const double v = __dmul_rn(f, a);
    return keep ? __dadd_rn(d, v) : v;
}

__device__ void add_bf16_f32(float *d, const __nv_bfloat16 *a, double f, int keep, unsigned long long n)
{
    unsigned long long i = first();
    if (reinterpret_cast<unsigned long long>(d) % 16 == 0 && reinterpret_cast<unsigned long long>(a) % 8 == 0) {
        float4 *d4 = reinterpret_cast<float4 *>(d);
        const __nv_bfloat162 *a2 = reinterpret_cast<const __nv_bfloat162 *>(a);
        for (; i < n / 4; i += stride()) {
            const float2 lo = __bfloat1622float2(a2[2 * i]), hi = __bfloat1622float2(a2[2 * i + 1]);
            const float4 o = keep ? d4[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            d4[i] = make_float4(static_cast<float>(add_one(o.x, lo.x, f, keep)),
                                static_cast<float>(add_one(o.y, lo.y, f, keep)),
                                static_cast<float>(add_one(o.z, hi.x, f, keep)),
                                static_cast<float>(add_one(o.w, hi.y, f, keep)));
        }
        i = n / 4 * 4 + first();
    }
    for (; i < n; i += stride())
        d[i] = static_cast<float>(add_one(keep ? d[i] : 0.0f, __bfloat162float(a[i]), f, keep));
}

} // namespace

extern "C" __global__ void tc_fsdp_k_cast(void *dst, int dt, const void *src, int st, unsigned long long n)
{
    if (dt == 2 && st == 1) {
        cast_f32_bf16(static_cast<__nv_bfloat16 *>(dst), static_cast<const float *>(src), n);
        return;
    }
    for (unsigned long long i = first(); i < n; i += stride())
        store(dst, i, dt, load(src, i, st));
}

// Main dtypes get their own loops (float32 scaled in float, as the host does); the half types take the generic path.
extern "C" __global__ void tc_fsdp_k_scale(void *buf, int dt, double s, unsigned long long n)
{
    if (dt == 1) {
        float *b = static_cast<float *>(buf);
        const float f = static_cast<float>(s);
        for (unsigned long long i = first(); i < n; i += stride())
            b[i] *= f;
    } else if (dt == 0) {
        double *b = static_cast<double *>(buf);
        for (unsigned long long i = first(); i < n; i += stride())
            b[i] *= s;
    } else {
        for (unsigned long long i = first(); i < n; i += stride())
            store(buf, i, dt, load(buf, i, dt) * s);
    }
}

// dst = s * src (+ dst when keep; src of dtype st). As the host: s == 1 a plain add; float32 through double (the
// product of two floats is exact there, so fused or not the result is the same); float64, the half types and
// mixed dtypes with no fused multiply-add, which the host (C11, no contraction) does not do either.
extern "C" __global__ void tc_fsdp_k_add(void *dst, int dt, const void *src, int st, double s, int keep,
                                         unsigned long long n)
{
    if (dt == 1 && st == 2) {
        add_bf16_f32(static_cast<float *>(dst), static_cast<const __nv_bfloat16 *>(src),
                     static_cast<double>(static_cast<float>(s)), keep, n);
    } else if (st != dt || !keep) {
        const double f = dt == 1 ? static_cast<double>(static_cast<float>(s)) : s;
        for (unsigned long long i = first(); i < n; i += stride()) {
            const double v = __dmul_rn(f, load(src, i, st));
            store(dst, i, dt, keep ? __dadd_rn(load(dst, i, dt), v) : v);
        }
    } else if (dt == 1) {
        float *d = static_cast<float *>(dst);
        const float *a = static_cast<const float *>(src);
        const double f = static_cast<float>(s);
        for (unsigned long long i = first(); i < n; i += stride())
            d[i] = s == 1.0 ? d[i] + a[i] : static_cast<float>(__dadd_rn(d[i], __dmul_rn(f, a[i])));
    } else if (dt == 0) {
        double *d = static_cast<double *>(dst);
        const double *a = static_cast<const double *>(src);
        for (unsigned long long i = first(); i < n; i += stride())
            d[i] = s == 1.0 ? d[i] + a[i] : __dadd_rn(d[i], __dmul_rn(s, a[i]));
    } else {
        for (unsigned long long i = first(); i < n; i += stride())
            store(dst, i, dt, __dadd_rn(load(dst, i, dt), __dmul_rn(s, load(src, i, dt))));
    }
}
