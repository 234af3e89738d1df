/* SPDX-License-Identifier: BSD-3-Clause */
// The CUDA compute of fsdp_mlp_cuda (cuda_model.h): cuBLAS GEMMs over whole microbatches in the compute dtype,
// and the element-wise kernels around them, each templated on the value, weight and main dtypes of the three
// kinds (float64, float32, bf16 weights). Every CUDA and cuBLAS return is checked and reported with the call.
#include "cuda_model.h"

#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "model.h"

#define LD MLP_MAX_DIM
#define THREADS 256

typedef __nv_bfloat16 bf16;

// ---- error reporting -------------------------------------------------------------------------------------------

static int cuda_fail(mlpc_t *c, const char *call, cudaError_t e)
{
    snprintf(c->err, sizeof c->err, "%s: %s (%s)", call, cudaGetErrorString(e), cudaGetErrorName(e));
    return -1;
}

static int blas_fail(mlpc_t *c, const char *call, cublasStatus_t s)
{
    snprintf(c->err, sizeof c->err, "%s: %s", call, cublasGetStatusString(s));
    return -1;
}

#define CU(c, expr)                                                                                                \
    do {                                                                                                           \
        cudaError_t e_ = (expr);                                                                                   \
        if (e_ != cudaSuccess)                                                                                     \
            return cuda_fail((c), #expr, e_);                                                                      \
    } while (0)

#define BLAS(c, expr)                                                                                              \
    do {                                                                                                           \
        cublasStatus_t s_ = (expr);                                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                                           \
            return blas_fail((c), #expr, s_);                                                                      \
    } while (0)

// Launch `kernel` over `total` threads on the context's stream, and check the launch.
#define LAUNCH(c, kernel, total, ...)                                                                              \
    do {                                                                                                           \
        size_t t_ = (total);                                                                                       \
        if (t_ > 0) {                                                                                              \
            kernel<<<(unsigned)((t_ + THREADS - 1) / THREADS), THREADS, 0, (c)->stream>>>(__VA_ARGS__);            \
            CU(c, cudaGetLastError());                                                                             \
        }                                                                                                          \
    } while (0)

// ---- element access ----------------------------------------------------------------------------------------------

__device__ static double load(const double *p, size_t i) { return p[i]; }
__device__ static double load(const float *p, size_t i) { return p[i]; }
__device__ static double load(const bf16 *p, size_t i) { return __bfloat162float(p[i]); }
__device__ static void store(double *p, size_t i, double v) { p[i] = v; }
__device__ static void store(float *p, size_t i, double v) { p[i] = (float)v; }
// via float, as the host model's mlp_store does: the values stored are floats already
__device__ static void store(bf16 *p, size_t i, double v) { p[i] = __float2bfloat16_rn((float)v); }

// v rounded to a multiple of 2^-bits (bits > 0), flagging a result not below 2^log2max.
__device__ static double on_grid(double v, int bits, int log2max, int *bad)
{
    if (bits <= 0)
        return v;
    double q = ldexp(rint(ldexp(v, bits)), -bits);
    if (!(fabs(q) < ldexp(1.0, log2max)))
        *bad = 1;
    return q;
}

// ---- kernels -----------------------------------------------------------------------------------------------------

// y = act(y + b) on n rows of nout, rounded to the activation grid in deterministic mode; the bf16 copy refreshed.
template <typename V, typename W>
__global__ void bias_act(V *y, bf16 *yh, const W *b, int n, int nout, int relu, int bits, int *bad)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)n * (size_t)nout)
        return;
    size_t at = (i / (size_t)nout) * LD + i % (size_t)nout;
    double s = on_grid((double)y[at] + load(b, i % (size_t)nout), bits, MLPC_VALUE_LOG2MAX, bad);
    if (relu && s < 0)
        s = 0.0;
    store(y, at, s);
    if (yh)
        store(yh, at, (double)y[at]);
}

// dpre = dy where the ReLU passed it (everywhere without one), rounded to the delta grid in deterministic mode.
template <typename V>
__global__ void delta(V *dp, bf16 *dph, const V *dy, const V *y, int n, int nout, int relu, int bits, int *bad)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)n * (size_t)nout)
        return;
    size_t at = (i / (size_t)nout) * LD + i % (size_t)nout;
    double d = relu && !(y[at] > 0) ? 0.0 : on_grid((double)dy[at], bits, MLPC_VALUE_LOG2MAX, bad);
    store(dp, at, d);
    if (dph)
        store(dph, at, (double)dp[at]);
}

// gb[o] += sum over the n rows of dp[., o]; one thread per output.
template <typename V, typename G>
__global__ void bias_grad(G *gb, const V *dp, int n, int nout)
{
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= nout)
        return;
    double s = 0.0;
    for (int t = 0; t < n; t++)
        s += (double)dp[(size_t)t * LD + (size_t)o];
    store(gb, (size_t)o, load(gb, (size_t)o) + s);
}

// One thread: the n samples' loss added to *loss in sample order, and dout = out - y. In deterministic mode out
// is on the activation grid and y on 2^-2, so both are exact (docs/fsdp_example.md).
template <typename V>
__global__ void loss_kernel(const V *out, const V *y, int n, V *dout, double *loss)
{
    if (blockIdx.x != 0 || threadIdx.x != 0)
        return;
    double total = 0.0;
    for (int t = 0; t < n; t++) {
        double s = 0.0;
        for (int j = 0; j < MLP_OUT; j++) {
            double d = (double)out[(size_t)t * LD + j] - (double)y[(size_t)t * MLP_OUT + j];
            if (dout)
                store(dout, (size_t)t * LD + j, d);
            s += d * d;
        }
        total += 0.5 * s;
    }
    if (loss)
        *loss += total;
}

template <typename V>
__global__ void permute(V *dst, bf16 *dsth, const int *didx, const V *src, const int *sidx, int n, int width)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)n * (size_t)width)
        return;
    int row = (int)(i / (size_t)width), k = (int)(i % (size_t)width);
    size_t d = (size_t)(didx ? didx[row] : row) * LD + (size_t)k;
    size_t s = (size_t)(sidx ? sidx[row] : row) * LD + (size_t)k;
    dst[d] = src[s];
    if (dsth)
        store(dsth, d, (double)src[s]);
}

template <typename V>
__global__ void shadow(bf16 *h, const V *v, size_t count)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count)
        store(h, i, (double)v[i]);
}

// main -= lr * grad in the main dtype's arithmetic, as the host model's mlp_sgd.
template <typename M>
__global__ void sgd(M *m, const M *g, size_t n, M lr, int check, int *bad)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    m[i] = m[i] - lr * g[i];
    if (check && !(fabs((double)m[i]) < ldexp(1.0, MLPC_WEIGHT_LOG2MAX)))
        *bad = 1;
}

template <typename M, typename W>
__global__ void cast(W *w, const M *m, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        store(w, i, (double)m[i]);
}

__global__ void sum_kernel(double *dst, const double *src, int n)
{
    if (blockIdx.x != 0 || threadIdx.x != 0)
        return;
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += src[i];
    *dst = s;
}

// ---- context and memory ------------------------------------------------------------------------------------------

int mlpc_init(mlpc_t *c, mlpc_kind_t kind, int exact, cudaStream_t stream)
{
    c->kind = kind;
    c->exact = exact;
    c->stream = stream;
    c->blas = NULL;
    c->bad = NULL;
    c->err[0] = '\0';
    BLAS(c, cublasCreate(&c->blas));
    BLAS(c, cublasSetStream(c->blas, stream));
    return mlpc_alloc(c, (void **)&c->bad, sizeof(int));
}

void mlpc_fini(mlpc_t *c)
{
    if (c->blas)
        cublasDestroy(c->blas);
    mlpc_free(c->bad);
    c->blas = NULL;
    c->bad = NULL;
}

size_t mlpc_value_size(const mlpc_t *c) { return c->kind == MLPC_F64 ? sizeof(double) : sizeof(float); }
size_t mlpc_main_size(const mlpc_t *c) { return mlpc_value_size(c); }

int mlpc_alloc(mlpc_t *c, void **p, size_t bytes)
{
    *p = NULL;
    CU(c, cudaMalloc(p, bytes > 0 ? bytes : 1));
    CU(c, cudaMemsetAsync(*p, 0, bytes, c->stream));
    return 0;
}

int mlpc_rows_alloc(mlpc_t *c, mlpc_rows_t *r, size_t rows)
{
    r->h = NULL;
    if (mlpc_alloc(c, &r->v, rows * LD * mlpc_value_size(c)))
        return -1;
    return c->kind == MLPC_BF16 ? mlpc_alloc(c, &r->h, rows * LD * sizeof(bf16)) : 0;
}

void mlpc_free(void *p)
{
    if (p)
        cudaFree(p);
}

void mlpc_rows_free(mlpc_rows_t *r)
{
    mlpc_free(r->v);
    mlpc_free(r->h);
    r->v = r->h = NULL;
}

void *mlpc_row(const mlpc_t *c, void *values, int i)
{
    return values ? (char *)values + (size_t)i * LD * mlpc_value_size(c) : NULL;
}

mlpc_rows_t mlpc_rows_at(const mlpc_t *c, mlpc_rows_t r, int i)
{
    mlpc_rows_t s = {mlpc_row(c, r.v, i), r.h ? (char *)r.h + (size_t)i * LD * sizeof(bf16) : NULL};
    return s;
}

int mlpc_upload(mlpc_t *c, void *dst, const double *src, size_t count)
{
    if (c->kind == MLPC_F64) {
        CU(c, cudaMemcpyAsync(dst, src, count * sizeof(double), cudaMemcpyHostToDevice, c->stream));
        return 0;
    }
    float *tmp = (float *)malloc(count * sizeof(float) + 1);
    if (!tmp) {
        snprintf(c->err, sizeof c->err, "mlpc_upload: out of host memory (%zu floats)", count);
        return -1;
    }
    for (size_t i = 0; i < count; i++)
        tmp[i] = (float)src[i];
    // pageable memory: the call returns once tmp has been staged, so it may be freed at once
    cudaError_t e = cudaMemcpyAsync(dst, tmp, count * sizeof(float), cudaMemcpyHostToDevice, c->stream);
    free(tmp);
    return e == cudaSuccess ? 0 : cuda_fail(c, "cudaMemcpyAsync(host to device)", e);
}

int mlpc_shadow(mlpc_t *c, mlpc_rows_t r, int n)
{
    if (c->kind == MLPC_BF16 && r.h)
        LAUNCH(c, shadow<float>, (size_t)n * LD, (bf16 *)r.h, (const float *)r.v, (size_t)n * LD);
    return 0;
}

// ---- layers ------------------------------------------------------------------------------------------------------

// C (ldc) = alpha op(A) op(B) + beta C in column-major terms, with A and B in the compute dtype and C in the value
// (= main) dtype. Pedantic compute types keep TF32 and other shortcuts out of float32 and float64.
static int gemm(mlpc_t *c, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void *A, int lda,
                const void *B, int ldb, double beta, void *C, int ldc)
{
    if (m == 0 || n == 0)
        return 0;
    if (c->kind == MLPC_F64) {
        double a = 1.0, b = beta;
        BLAS(c, cublasGemmEx(c->blas, ta, tb, m, n, k, &a, A, CUDA_R_64F, lda, B, CUDA_R_64F, ldb, &b, C,
                             CUDA_R_64F, ldc, CUBLAS_COMPUTE_64F_PEDANTIC, CUBLAS_GEMM_DEFAULT));
    } else {
        float a = 1.0f, b = (float)beta;
        cudaDataType_t in = c->kind == MLPC_BF16 ? CUDA_R_16BF : CUDA_R_32F;
        cublasComputeType_t ct = c->kind == MLPC_BF16 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_PEDANTIC;
        BLAS(c, cublasGemmEx(c->blas, ta, tb, m, n, k, &a, A, in, lda, B, in, ldb, &b, C, CUDA_R_32F, ldc, ct,
                             CUBLAS_GEMM_DEFAULT));
    }
    return 0;
}

// The GEMM operand of rows: their bf16 copy under MLPC_BF16, else the values.
static const void *operand(const mlpc_t *c, mlpc_rows_t r) { return c->kind == MLPC_BF16 ? r.h : r.v; }

int mlpc_linear_fwd(mlpc_t *c, const void *W, const void *b, int nin, int nout, int relu, mlpc_rows_t x, int n,
                    mlpc_rows_t y)
{
    // row-major Y (n x nout) = X W^T is column-major Y^T = W X^T, where W's buffer read column-major is W^T
    if (gemm(c, CUBLAS_OP_T, CUBLAS_OP_N, nout, n, nin, W, nin, operand(c, x), LD, 0.0, y.v, LD))
        return -1;
    size_t total = (size_t)n * (size_t)nout;
    int bits = c->exact ? MLPC_ACT_BITS : 0;
    if (c->kind == MLPC_F64)
        LAUNCH(c, (bias_act<double, double>), total, (double *)y.v, NULL, (const double *)b, n, nout, relu, bits,
               c->bad);
    else if (c->kind == MLPC_F32)
        LAUNCH(c, (bias_act<float, float>), total, (float *)y.v, NULL, (const float *)b, n, nout, relu, 0, c->bad);
    else
        LAUNCH(c, (bias_act<float, bf16>), total, (float *)y.v, (bf16 *)y.h, (const bf16 *)b, n, nout, relu, 0,
               c->bad);
    return 0;
}

int mlpc_linear_bwd(mlpc_t *c, const void *W, int nin, int nout, int relu, mlpc_rows_t x, mlpc_rows_t y,
                    const void *dy, int n, mlpc_rows_t dpre, void *dx, void *gW, void *gb)
{
    size_t total = (size_t)n * (size_t)nout;
    if (c->kind == MLPC_F64) {
        LAUNCH(c, delta<double>, total, (double *)dpre.v, NULL, (const double *)dy, (const double *)y.v, n, nout,
               relu, c->exact ? MLPC_DELTA_BITS : 0, c->bad);
        LAUNCH(c, (bias_grad<double, double>), (size_t)nout, (double *)gb, (const double *)dpre.v, n, nout);
    } else {
        LAUNCH(c, delta<float>, total, (float *)dpre.v, (bf16 *)dpre.h, (const float *)dy, (const float *)y.v, n,
               nout, relu, 0, c->bad);
        LAUNCH(c, (bias_grad<float, float>), (size_t)nout, (float *)gb, (const float *)dpre.v, n, nout);
    }
    // gW (nout x nin) += dP^T X: column-major gW^T = X^T dP, X^T and dP^T being the buffers read column-major
    if (gemm(c, CUBLAS_OP_N, CUBLAS_OP_T, nin, nout, n, operand(c, x), LD, operand(c, dpre), LD, 1.0, gW, nin))
        return -1;
    // dX (n x nin) = dP W: column-major dX^T = W^T dP^T
    if (dx && gemm(c, CUBLAS_OP_N, CUBLAS_OP_N, nin, n, nout, W, nin, operand(c, dpre), LD, 0.0, dx, LD))
        return -1;
    return 0;
}

int mlpc_loss(mlpc_t *c, mlpc_rows_t out, const void *y, int n, void *dout, double *loss)
{
    if (c->kind == MLPC_F64)
        LAUNCH(c, loss_kernel<double>, 1, (const double *)out.v, (const double *)y, n, (double *)dout, loss);
    else
        LAUNCH(c, loss_kernel<float>, 1, (const float *)out.v, (const float *)y, n, (float *)dout, loss);
    return 0;
}

int mlpc_permute(mlpc_t *c, mlpc_rows_t dst, const int *didx, const void *src, const int *sidx, int n, int width)
{
    size_t total = (size_t)n * (size_t)width;
    if (c->kind == MLPC_F64)
        LAUNCH(c, permute<double>, total, (double *)dst.v, NULL, didx, (const double *)src, sidx, n, width);
    else
        LAUNCH(c, permute<float>, total, (float *)dst.v, (bf16 *)dst.h, didx, (const float *)src, sidx, n, width);
    return 0;
}

int mlpc_sgd(mlpc_t *c, void *main, const void *grad, size_t n, double lr)
{
    if (c->kind == MLPC_F64)
        LAUNCH(c, sgd<double>, n, (double *)main, (const double *)grad, n, lr, c->exact, c->bad);
    else
        LAUNCH(c, sgd<float>, n, (float *)main, (const float *)grad, n, (float)lr, 0, c->bad);
    return 0;
}

int mlpc_cast(mlpc_t *c, void *weights, const void *main, size_t n)
{
    if (c->kind == MLPC_BF16)
        LAUNCH(c, (cast<float, bf16>), n, (bf16 *)weights, (const float *)main, n);
    else
        CU(c, cudaMemcpyAsync(weights, main, n * mlpc_main_size(c), cudaMemcpyDeviceToDevice, c->stream));
    return 0;
}

int mlpc_sum(mlpc_t *c, double *dst, const double *src, int n)
{
    LAUNCH(c, sum_kernel, 1, dst, src, n);
    return 0;
}

int mlpc_fetch(mlpc_t *c, const double *dev_loss, double *loss, int *bad)
{
    CU(c, cudaMemcpyAsync(loss, dev_loss, sizeof(double), cudaMemcpyDeviceToHost, c->stream));
    CU(c, cudaMemcpyAsync(bad, c->bad, sizeof(int), cudaMemcpyDeviceToHost, c->stream));
    CU(c, cudaStreamSynchronize(c->stream));
    CU(c, cudaMemsetAsync(c->bad, 0, sizeof(int), c->stream));
    return 0;
}
