/* SPDX-License-Identifier: BSD-3-Clause */
/* The CUDA compute of fsdp_mlp_cuda (cuda_model.cu): a linear layer's forward and backward over a whole
 * microbatch as cuBLAS GEMMs plus small kernels for bias, ReLU, grid rounding, loss, row exchanges and SGD, shared
 * by the CUDA FSDP back end (cuda_train.c) and the one-GPU reference (cuda_reference.c). C callable. */
#ifndef FSDP_MLP_CUDA_MODEL_H
#define FSDP_MLP_CUDA_MODEL_H

#include <stddef.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Deterministic (float64) mode keeps every GEMM sum exact, whatever order cuBLAS and NCCL add in
 * (docs/fsdp_example.md): activations are rounded to multiples of 2^-MLPC_ACT_BITS and back-propagated deltas to
 * multiples of 2^-MLPC_DELTA_BITS, both below 2^MLPC_VALUE_LOG2MAX in magnitude, and main params stay below
 * 2^MLPC_WEIGHT_LOG2MAX; a value outside its range sets the context's `bad` flag, and the run fails. */
#define MLPC_ACT_BITS 8
#define MLPC_DELTA_BITS 8
#define MLPC_VALUE_LOG2MAX 10
#define MLPC_WEIGHT_LOG2MAX 8
#define MLPC_LR_LOG2_MIN (-6) /* weights stay on the 2^-22 grid: gradients on 2^-16 times lr >= 2^-6 */

/* Compute dtype: float64 (values double), float32 (values float) or bf16 (weights bf16; values float, with a bf16
 * copy of each activation and delta as the GEMM operand; float32 main params and gradients). */
typedef enum mlpc_kind { MLPC_F64, MLPC_F32, MLPC_BF16 } mlpc_kind_t;

typedef struct mlpc {
    mlpc_kind_t kind;
    int exact;            /* deterministic mode: grid rounding and range checks */
    cudaStream_t stream;  /* everything runs on it */
    cublasHandle_t blas;
    int *bad;             /* device flag: a value left its exact range */
    char err[256];        /* the failing call and its error string */
} mlpc_t;

/* Rows of activations or deltas, MLP_MAX_DIM elements apart: `v` the values (double under MLPC_F64, else float),
 * `h` their bf16 copy under MLPC_BF16 (NULL otherwise, or where no GEMM reads them). */
typedef struct mlpc_rows {
    void *v, *h;
} mlpc_rows_t;

/* Create the cuBLAS handle on `stream` (pedantic math: no TF32, no reduced-precision shortcuts) and the flag, on the
 * current device. 0, or -1 with c->err. mlpc_fini frees what mlpc_init made (also after a failed init). */
int mlpc_init(mlpc_t *c, mlpc_kind_t kind, int exact, cudaStream_t stream);
void mlpc_fini(mlpc_t *c);

/* Element size of values and of main params/gradients. */
size_t mlpc_value_size(const mlpc_t *c);
size_t mlpc_main_size(const mlpc_t *c);

/* Zeroed device memory (cudaMalloc + memset); rows allocates `rows` rows and, under MLPC_BF16, their copy. */
int mlpc_alloc(mlpc_t *c, void **p, size_t bytes);
int mlpc_rows_alloc(mlpc_t *c, mlpc_rows_t *r, size_t rows);
void mlpc_free(void *p);
void mlpc_rows_free(mlpc_rows_t *r);
/* Row `i` of `r`. */
mlpc_rows_t mlpc_rows_at(const mlpc_t *c, mlpc_rows_t r, int i);
void *mlpc_row(const mlpc_t *c, void *values, int i);

/* Copy `count` host doubles into device memory of the value dtype (which is also the main dtype), on the stream;
 * the host buffer may be reused on return. */
int mlpc_upload(mlpc_t *c, void *dst, const double *src, size_t count);
/* Fill the bf16 copy of rows [0, n) from their values (no-op unless MLPC_BF16). */
int mlpc_shadow(mlpc_t *c, mlpc_rows_t r, int n);

/* Forward of Linear(+ReLU) over n samples: y = act(x W^T + b); W (nout x nin) and b in the compute dtype. */
int mlpc_linear_fwd(mlpc_t *c, const void *W, const void *b, int nin, int nout, int relu, mlpc_rows_t x, int n,
                    mlpc_rows_t y);
/* Backward over n samples given x, the forward's output y and dL/dy (value rows): dpre (scratch rows) gets
 * dL/d(pre-activation), gW += dpre^T x, gb += sum of dpre rows (main dtype), and dx = dpre W unless dx is NULL. */
int mlpc_linear_bwd(mlpc_t *c, const void *W, int nin, int nout, int relu, mlpc_rows_t x, mlpc_rows_t y,
                    const void *dy, int n, mlpc_rows_t dpre, void *dx, void *gW, void *gb);
/* Loss of n samples against targets y (value dtype, MLP_OUT apart): *loss += sum of 0.5 * |out - y|^2 (a device
 * double; skipped when NULL), and dout = out - y (value rows; skipped when NULL). */
int mlpc_loss(mlpc_t *c, mlpc_rows_t out, const void *y, int n, void *dout, double *loss);
/* Row moves of `width` elements (value rows): dst[didx ? didx[i] : i] = src[sidx ? sidx[i] : i] for i < n, with
 * the bf16 copy of dst refreshed; didx and sidx are device arrays. */
int mlpc_permute(mlpc_t *c, mlpc_rows_t dst, const int *didx, const void *src, const int *sidx, int n, int width);
/* main -= lr * grad over n main-dtype elements (range-checked in deterministic mode). */
int mlpc_sgd(mlpc_t *c, void *main, const void *grad, size_t n, double lr);
/* weights = main cast to the compute dtype (bf16: round to nearest even), n elements. */
int mlpc_cast(mlpc_t *c, void *weights, const void *main, size_t n);
/* *dst = src[0] + ... + src[n-1] (device doubles). */
int mlpc_sum(mlpc_t *c, double *dst, const double *src, int n);
/* Wait for the stream, then copy *dev_loss to *loss and the flag to *bad (clearing it). */
int mlpc_fetch(mlpc_t *c, const double *dev_loss, double *loss, int *bad);

#ifdef __cplusplus
}
#endif
#endif
