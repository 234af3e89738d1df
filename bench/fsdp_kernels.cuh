/* SPDX-License-Identifier: BSD-3-Clause */
/* Element-wise kernels of bench/fsdp_bench.cu (initial values, ReLU and its gradient, the loss gradient, SGD, SGD
 * with the cast into the weights) and
 * their launchers on a stream, templated on the compute dtype (float or bf16); each launcher returns the launch's
 * cudaError_t. */
#ifndef TCOMMS_BENCH_FSDP_KERNELS_CUH
#define TCOMMS_BENCH_FSDP_KERNELS_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

__device__ static inline float to_f(float v) { return v; }
__device__ static inline float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ static inline void from_f(float *p, float v) { *p = v; }
__device__ static inline void from_f(__nv_bfloat16 *p, float v) { *p = __float2bfloat16(v); }

/* Uniform in [-scale, scale) from a hash of (seed, i): the same values whatever the buffer's dtype, so the
 * compute mode's local weights equal the runtime's loaded ones. */
__device__ static inline float hash_uniform(uint64_t seed, size_t i, float scale)
{
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + i + 1;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return scale * ((float)(z >> 40) * (2.0f / 16777216.0f) - 1.0f);
}

#define FSDP_FOR_EACH(i, n)                                                                                         \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

template <typename T> __global__ void fill_kernel(T *p, size_t n, uint64_t seed, float scale)
{
    FSDP_FOR_EACH(i, n) from_f(&p[i], hash_uniform(seed, i, scale));
}

template <typename T> __global__ void relu_kernel(T *y, size_t n)
{
    FSDP_FOR_EACH(i, n) if (!(to_f(y[i]) > 0.0f)) from_f(&y[i], 0.0f);
}

/* dy = dy where the layer's output y > 0, else 0 (y is ReLU's output: y > 0 exactly where its input was) */
template <typename T> __global__ void relu_grad_kernel(T *dy, const T *y, size_t n)
{
    FSDP_FOR_EACH(i, n) if (!(to_f(y[i]) > 0.0f)) from_f(&dy[i], 0.0f);
}

/* dy = y * s: the gradient of mean(y^2) with s = 2 / numel */
template <typename T> __global__ void scale_kernel(T *dy, const T *y, size_t n, float s)
{
    FSDP_FOR_EACH(i, n) from_f(&dy[i], to_f(y[i]) * s);
}

__global__ static void sgd_kernel(float *main, const float *grad, size_t n, float lr)
{
    FSDP_FOR_EACH(i, n) main[i] -= lr * grad[i];
}

/* SGD fused with the cast into the model weights (what an optimizer does under config.optimizer_casts) */
template <typename T> __global__ void sgd_cast_kernel(float *main, const float *grad, T *w, size_t n, float lr)
{
    FSDP_FOR_EACH(i, n)
    {
        float m = main[i] - lr * grad[i];
        main[i] = m;
        from_f(&w[i], m);
    }
}

static inline unsigned fsdp_grid(size_t n)
{
    size_t g = (n + 255) / 256;
    return (unsigned)(g < 8192 ? (g ? g : 1) : 8192);
}

template <typename T> static cudaError_t fsdp_fill(cudaStream_t s, void *p, size_t n, uint64_t seed, float scale)
{
    fill_kernel<T><<<fsdp_grid(n), 256, 0, s>>>((T *)p, n, seed, scale);
    return cudaGetLastError();
}

template <typename T> static cudaError_t fsdp_relu(cudaStream_t s, void *y, size_t n)
{
    relu_kernel<T><<<fsdp_grid(n), 256, 0, s>>>((T *)y, n);
    return cudaGetLastError();
}

template <typename T> static cudaError_t fsdp_relu_grad(cudaStream_t s, void *dy, const void *y, size_t n)
{
    relu_grad_kernel<T><<<fsdp_grid(n), 256, 0, s>>>((T *)dy, (const T *)y, n);
    return cudaGetLastError();
}

template <typename T> static cudaError_t fsdp_loss_grad(cudaStream_t s, void *dy, const void *y, size_t n)
{
    scale_kernel<T><<<fsdp_grid(n), 256, 0, s>>>((T *)dy, (const T *)y, n, 2.0f / (float)n);
    return cudaGetLastError();
}

static inline cudaError_t fsdp_sgd(cudaStream_t s, float *main, const float *grad, size_t n, float lr)
{
    sgd_kernel<<<fsdp_grid(n), 256, 0, s>>>(main, grad, n, lr);
    return cudaGetLastError();
}

template <typename T>
static cudaError_t fsdp_sgd_cast(cudaStream_t s, float *main, const float *grad, void *w, size_t n, float lr)
{
    sgd_cast_kernel<T><<<fsdp_grid(n), 256, 0, s>>>(main, grad, (T *)w, n, lr);
    return cudaGetLastError();
}

/* fn<float> or fn<bf16> by `fp32` */
#define BY_DTYPE(fp32, fn, ...) ((fp32) ? fn<float>(__VA_ARGS__) : fn<__nv_bfloat16>(__VA_ARGS__))

#endif
