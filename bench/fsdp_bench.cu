/* SPDX-License-Identifier: BSD-3-Clause */
/* fsdp_bench: how much of the FSDP runtime's communication hides under compute on CUDA. A stack of L d x d linear
 * layers (no bias, ReLU after each) trained with cuBLAS on the runtime's stream, timed in three modes: compute (the
 * same kernels, weights local, no collectives), comm (the runtime's step, no GEMMs) and full (both). bench/compare-fsdp
 * runs it beside PyTorch FSDP2 (bench/fsdp2_step.py, the same model and loss). See bench/README.md. */
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tcomms/fsdp.h>
#include <tcomms/tcomms.h>

#include "fsdp_kernels.cuh"
#include "fsdp_opts.cuh"
#include "fsdp_timeline.cuh"


typedef struct bench {
    opts_t o;
    timeline_t *tl; /* set while the --timeline step runs */
    int rank, size;
    tcomms_comm_t *world;
    cudaStream_t stream;
    cublasHandle_t blas;
    cudaDataType_t cdt; /* compute dtype for cuBLAS */
    size_t esize;       /* its size */
    cudaDataType_t gdt; /* gradient dtype (--reduce-dtype): what the weight-gradient GEMMs write */
    size_t gsize;       /* its size */
    size_t wnumel;      /* d * d */
    size_t act_numel;   /* T * d */
    void *x, **act, *dy[2];
    /* compute mode: full weights and gradients, and shard-sized main params/gradients for the SGD; w_cast takes
     * the SGD's weights under --optimizer-casts (not w_full: the GEMMs would then multiply the SGD's values, and
     * a GPU's clock depends on the values it multiplies) */
    void *w_full, *w_cast, *g_full;
    float *main_local, *grad_local;
    size_t shard_numel;
    /* full and comm modes */
    tcomms_fsdp_layout_t *layout;
    tcomms_fsdp_groups_t groups;
    tcomms_fsdp_t *rt;
    int *pids;
} bench_t;

/* ---- error reporting: every failure names the call and its error, and the rank ---------------------------- */

static int g_rank;

static int fail(const char *what, const char *call, const char *err)
{
    fprintf(stderr, "fsdp_bench[%d]: %s: %s: %s\n", g_rank, what, call, err);
    return -1;
}
#define CK_CUDA(call)                                                                                               \
    do {                                                                                                            \
        cudaError_t e_ = (call);                                                                                    \
        if (e_ != cudaSuccess) return fail(#call, cudaGetErrorName(e_), cudaGetErrorString(e_));                    \
    } while (0)
#define CK_BLAS(call)                                                                                               \
    do {                                                                                                            \
        cublasStatus_t s_ = (call);                                                                                 \
        if (s_ != CUBLAS_STATUS_SUCCESS) return fail(#call, "cublas", cublasGetStatusString(s_));                   \
    } while (0)
#define CK_TC(call)                                                                                                 \
    do {                                                                                                            \
        tcomms_status_t t_ = (call);                                                                                \
        if (t_ != TCOMMS_SUCCESS) return fail(#call, tcomms_strerror(t_), tcomms_last_error());                     \
    } while (0)
#define CK(expr)                                                                                                    \
    do {                                                                                                            \
        if ((expr) != 0) return -1;                                                                                 \
    } while (0)

/* ---- the model: row-major activations (T x d) and weights (d_out x d_in) as nn.Linear; cuBLAS is
 * column-major, so each product is written for the transposes ------------------------------------------------ */

static int gemm(bench_t *b, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void *A,
                const void *B, float beta, void *C, cudaDataType_t ctype)
{
    const float alpha = 1.0f;
    const int d = b->o.dim;
    /* every operand here has leading dimension d: activations and weights are all d wide */
    CK_BLAS(cublasGemmEx(b->blas, ta, tb, m, n, k, &alpha, A, b->cdt, d, B, b->cdt, d, &beta, C, ctype, d,
                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return 0;
}

static const void *layer_input(const bench_t *b, int i) { return i ? b->act[i - 1] : b->x; }

/* Y = relu(X W^T): column-major Y^T (d x T) = op_T(W stored as W^T) * X^T. */
static int forward_layer(bench_t *b, int i, const void *w)
{
    const int d = b->o.dim, t = b->o.tokens;
    CK(gemm(b, CUBLAS_OP_T, CUBLAS_OP_N, d, t, d, w, layer_input(b, i), 0.0f, b->act[i], b->cdt));
    CK_CUDA(BY_DTYPE(b->o.fp32, fsdp_relu, b->stream, b->act[i], b->act_numel));
    return 0;
}

/* dZ = dY * relu'(Y) in place; dW += dZ^T X (column-major dW^T = X^T dZ, into the gradient: fp32, or bf16 under
 * --reduce-dtype bf16); dX = dZ W (column-major dX^T = W^T dZ^T) unless i == 0, whose input needs no gradient. */
static int backward_layer(bench_t *b, int i, const void *w, void *g, int *cur)
{
    const int d = b->o.dim, t = b->o.tokens;
    void *dz = b->dy[*cur];
    CK_CUDA(BY_DTYPE(b->o.fp32, fsdp_relu_grad, b->stream, dz, b->act[i], b->act_numel));
    CK(gemm(b, CUBLAS_OP_N, CUBLAS_OP_T, d, d, t, layer_input(b, i), dz, 1.0f, g, b->gdt));
    if (i > 0) {
        CK(gemm(b, CUBLAS_OP_N, CUBLAS_OP_N, d, t, d, w, dz, 0.0f, b->dy[*cur ^ 1], b->cdt));
        *cur ^= 1;
    }
    return 0;
}

/* With --optimizer-casts the step also writes the compute-dtype weights `w` (n elements), as a fused optimizer does. */
static int sgd(bench_t *b, float *main, const float *grad, void *w, size_t n)
{
    if (b->o.optimizer_casts)
        CK_CUDA(BY_DTYPE(b->o.fp32, fsdp_sgd_cast, b->stream, main, grad, w, n, b->o.lr));
    else
        CK_CUDA(fsdp_sgd(b->stream, main, grad, n, b->o.lr));
    return 0;
}

/* ---- one step in a mode ----------------------------------------------------------------------------------- */

static int weights(bench_t *b, int mode, int i, const void **w, void **g, int want_grad)
{
    if (mode == MODE_COMPUTE) {
        *w = (const char *)b->w_full + (size_t)i * b->wnumel * b->esize;
        *g = (char *)b->g_full + (size_t)i * b->wnumel * b->gsize;
        return 0;
    }
    void *p = NULL;
    CK_TC(tcomms_fsdp_param_data(b->rt, b->pids[i], &p));
    *w = p;
    if (want_grad) CK_TC(tcomms_fsdp_grad_data(b->rt, b->pids[i], g));
    return 0;
}

static int optimizer(bench_t *b, int mode)
{
    if (mode == MODE_COMPUTE) {
        for (int i = 0; i < b->o.layers; i++)
            CK(sgd(b, b->main_local + (size_t)i * b->shard_numel, b->grad_local + (size_t)i * b->shard_numel,
                   (char *)b->w_cast + (size_t)i * b->shard_numel * b->esize, b->shard_numel));
        return 0;
    }
    /* Without --sync-all each piece is stepped as soon as its reduction is final, last unit first (the order
     * backward finishes them), so the first pieces' SGD runs beside the last reduce-scatters. */
    int n = 0;
    CK_TC(tcomms_fsdp_shard_count(b->rt, &n));
    for (int i = n - 1; i >= 0; i--) {
        tcomms_fsdp_shard_t s;
        if (!b->o.sync_all) CK_TC(tcomms_fsdp_sync_shard(b->rt, i));
        if (mode == MODE_COMM) continue;
        CK_TC(tcomms_fsdp_shard(b->rt, i, &s));
        if (s.dtype != TCOMMS_FLOAT32) return fail("optimizer", "tcomms_fsdp_shard", "main dtype is not float32");
        if (s.grad && s.count) CK(sgd(b, (float *)s.main, (const float *)s.grad, s.weights, s.count));
    }
    return 0;
}

/* The step of docs/fsdp.md. compute: no runtime calls; comm: no GEMMs, no element-wise model work, no SGD (the
 * runtime's own casts, copies and scaling stay, they are part of its communication path). */
static int step(bench_t *b, int mode)
{
    const int rt = mode != MODE_COMPUTE, gemms = mode != MODE_COMM, L = b->o.layers;
    const void *w = NULL;
    void *g = NULL;
    if (rt) CK_TC(tcomms_fsdp_zero_grad(b->rt));
    for (int mb = 0; mb < b->o.micro; mb++) {
        for (int i = 0; i < L; i++) {
            CK_CUDA(tl_mark(b->tl, tl_slot(b->tl, 0, i, TL_BEFORE), b->stream));
            if (rt) CK_TC(tcomms_fsdp_pre_forward(b->rt, i));
            CK_CUDA(tl_mark(b->tl, tl_slot(b->tl, 0, i, TL_READY), b->stream));
            if (gemms) {
                CK(weights(b, mode, i, &w, &g, 0));
                CK(forward_layer(b, i, w));
            }
            CK_CUDA(tl_mark(b->tl, tl_slot(b->tl, 0, i, TL_DONE), b->stream));
            if (rt) CK_TC(tcomms_fsdp_post_forward(b->rt, i));
        }
        if (rt) CK_TC(tcomms_fsdp_root_pre_backward(b->rt, mb == b->o.micro - 1));
        int cur = 0;
        if (gemms) CK_CUDA(BY_DTYPE(b->o.fp32, fsdp_loss_grad, b->stream, b->dy[0], b->act[L - 1], b->act_numel));
        for (int i = L - 1; i >= 0; i--) {
            CK_CUDA(tl_mark(b->tl, tl_slot(b->tl, 1, i, TL_BEFORE), b->stream));
            if (rt) CK_TC(tcomms_fsdp_pre_backward(b->rt, i));
            CK_CUDA(tl_mark(b->tl, tl_slot(b->tl, 1, i, TL_READY), b->stream));
            if (gemms) {
                CK(weights(b, mode, i, &w, &g, 1));
                CK(backward_layer(b, i, w, g, &cur));
            }
            CK_CUDA(tl_mark(b->tl, tl_slot(b->tl, 1, i, TL_DONE), b->stream));
            if (rt) CK_TC(tcomms_fsdp_post_backward(b->rt, i));
        }
        if (rt) CK_TC(tcomms_fsdp_root_post_backward(b->rt));
    }
    CK_CUDA(tl_mark(b->tl, tl_tail(b->tl, TL_ROOT_POST), b->stream));
    if (rt && b->o.sync_all) CK_TC(tcomms_fsdp_finish_grad_sync(b->rt));
    CK_CUDA(tl_mark(b->tl, tl_tail(b->tl, TL_SYNCED), b->stream));
    CK(optimizer(b, mode));
    CK_CUDA(tl_mark(b->tl, tl_tail(b->tl, TL_OPTIMIZED), b->stream));
    if (rt) CK_TC(tcomms_fsdp_install_weights(b->rt));
    CK_CUDA(tl_mark(b->tl, tl_tail(b->tl, TL_INSTALLED), b->stream));
    return 0;
}

/* ---- setup ------------------------------------------------------------------------------------------------ */

static int alloc(void **p, size_t bytes)
{
    CK_CUDA(cudaMalloc(p, bytes ? bytes : 1));
    return 0;
}

static int setup_model(bench_t *b)
{
    const opts_t *o = &b->o;
    b->esize = o->fp32 ? 4 : 2;
    b->cdt = o->fp32 ? CUDA_R_32F : CUDA_R_16BF;
    b->gdt = o->reduce_bf16 ? CUDA_R_16BF : CUDA_R_32F;
    b->gsize = o->reduce_bf16 ? 2 : 4;
    b->wnumel = (size_t)o->dim * o->dim;
    b->act_numel = (size_t)o->tokens * o->dim;
    b->act = (void **)calloc((size_t)o->layers, sizeof *b->act);
    b->pids = (int *)calloc((size_t)o->layers, sizeof *b->pids);
    if (!b->act || !b->pids) return fail("setup", "calloc", "out of memory");
    CK_CUDA(cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking));
    CK_BLAS(cublasCreate(&b->blas));
    CK_BLAS(cublasSetStream(b->blas, b->stream));
    if (o->sm_margin > 0) { /* cuBLAS's Hopper GEMMs are persistent: without a margin they hold every SM, and a
                               collective launched beside them waits for the GEMM to end */
        int sms = 0, dev = 0;
        CK_CUDA(cudaGetDevice(&dev));
        CK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        if (o->sm_margin >= sms) return fail("setup", "--sm-margin", "leaves the GEMMs no SM");
        CK_BLAS(cublasSetSmCountTarget(b->blas, sms - o->sm_margin));
    }
    CK(alloc(&b->x, b->act_numel * b->esize));
    CK(alloc(&b->dy[0], b->act_numel * b->esize));
    CK(alloc(&b->dy[1], b->act_numel * b->esize));
    for (int i = 0; i < o->layers; i++) CK(alloc(&b->act[i], b->act_numel * b->esize));
    /* each rank its own input, as data parallelism gives it */
    CK_CUDA(BY_DTYPE(o->fp32, fsdp_fill, b->stream, b->x, b->act_numel, 7 + (uint64_t)b->rank, 1.0f));
    return 0;
}

/* nn.Linear's default initialisation range: U(-1/sqrt(d), 1/sqrt(d)), one seed per layer */
static float init_scale(const bench_t *b) { return 1.0f / sqrtf((float)b->o.dim); }

static int setup_runtime(bench_t *b)
{
    const opts_t *o = &b->o;
    tcomms_fsdp_layout_params_t lp;
    memset(&lp, 0, sizeof lp);
    lp.dp = b->size;
    CK_TC(tcomms_fsdp_layout_create(&lp, &b->layout));
    CK_TC(tcomms_fsdp_groups_create(b->world, b->layout, &b->groups));
    tcomms_fsdp_config_t c;
    memset(&c, 0, sizeof c);
    c.strategy = o->strategy;
    c.main_dtype = TCOMMS_FLOAT32;
    c.prefetch_forward = o->prefetch;
    c.prefetch_backward = o->prefetch;
    c.max_live_units = o->max_live;
    c.grad_scale = 1.0 / b->size; /* a mean over ranks, as FSDP2's AVG reduction */
    c.timeout_ms = 120000;
    c.stream = (void *)b->stream;
    c.windows = o->no_windows ? -1 : 0;
    c.optimizer_casts = o->optimizer_casts;
    c.reduce_dtype = o->reduce_bf16 ? TCOMMS_BFLOAT16 : TCOMMS_FLOAT32;
    CK_TC(tcomms_fsdp_create(&b->groups, &c, &b->rt));
    const int64_t shape[2] = {o->dim, o->dim};
    for (int i = 0; i < o->layers; i++) {
        char name[32];
        snprintf(name, sizeof name, "layer%d.weight", i);
        CK_TC(tcomms_fsdp_register_param(b->rt, name, shape, 2, o->fp32 ? TCOMMS_FLOAT32 : TCOMMS_BFLOAT16, i, 0,
                                         &b->pids[i]));
    }
    CK_TC(tcomms_fsdp_finalize(b->rt, b->layout));
    void *tmp = NULL;
    CK(alloc(&tmp, b->wnumel * sizeof(float)));
    for (int i = 0; i < o->layers; i++) {
        CK_CUDA(fsdp_fill<float>(b->stream, tmp, b->wnumel, 1000 + (uint64_t)i, init_scale(b)));
        CK_CUDA(cudaStreamSynchronize(b->stream));
        CK_TC(tcomms_fsdp_load_param(b->rt, b->pids[i], tmp));
    }
    CK_CUDA(cudaStreamSynchronize(b->stream));
    CK_CUDA(cudaFree(tmp));
    return 0;
}

static int setup_compute(bench_t *b)
{
    const opts_t *o = &b->o;
    const size_t L = (size_t)o->layers;
    b->shard_numel = o->strategy == TCOMMS_FSDP_NO_SHARD ? b->wnumel : (b->wnumel + b->size - 1) / b->size;
    CK(alloc(&b->w_full, L * b->wnumel * b->esize));
    CK(alloc(&b->g_full, L * b->wnumel * b->gsize));
    CK(alloc((void **)&b->main_local, L * b->shard_numel * sizeof(float)));
    CK(alloc((void **)&b->grad_local, L * b->shard_numel * sizeof(float)));
    CK(alloc(&b->w_cast, L * b->shard_numel * b->esize));
    for (size_t i = 0; i < L; i++)
        CK_CUDA(BY_DTYPE(o->fp32, fsdp_fill, b->stream, (char *)b->w_full + i * b->wnumel * b->esize, b->wnumel,
                         1000 + i, init_scale(b)));
    CK_CUDA(cudaMemsetAsync(b->g_full, 0, L * b->wnumel * b->gsize, b->stream));
    CK_CUDA(cudaMemsetAsync(b->main_local, 0, L * b->shard_numel * sizeof(float), b->stream));
    CK_CUDA(cudaMemsetAsync(b->grad_local, 0, L * b->shard_numel * sizeof(float), b->stream));
    CK_CUDA(cudaStreamSynchronize(b->stream));
    return 0;
}

static void free_compute(bench_t *b)
{
    cudaFree(b->w_full);
    cudaFree(b->g_full);
    cudaFree(b->main_local);
    cudaFree(b->grad_local);
    cudaFree(b->w_cast);
    b->w_full = b->w_cast = b->g_full = NULL, b->main_local = b->grad_local = NULL;
}

static void teardown(bench_t *b)
{
    if (b->stream) cudaStreamSynchronize(b->stream);
    tcomms_fsdp_destroy(b->rt);
    tcomms_fsdp_groups_destroy(&b->groups);
    tcomms_fsdp_layout_free(b->layout);
    free_compute(b);
    if (b->act)
        for (int i = 0; i < b->o.layers; i++) cudaFree(b->act[i]);
    cudaFree(b->x);
    cudaFree(b->dy[0]);
    cudaFree(b->dy[1]);
    if (b->blas) cublasDestroy(b->blas);
    if (b->stream) cudaStreamDestroy(b->stream);
    free(b->act);
    free(b->pids);
}

/* ---- timing: events around each step on the stream, the device drained before and after; per step the
 * slowest rank's time (an all-reduce MAX), then median/min/max ---------------------------------------------- */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

typedef struct stats {
    float median, min, max, host_median;
} stats_t;

static int run_mode(bench_t *b, int mode, stats_t *st)
{
    const int S = b->o.steps;
    cudaEvent_t ev[2];
    CK_CUDA(cudaEventCreate(&ev[0]));
    CK_CUDA(cudaEventCreate(&ev[1]));
    float *t = (float *)calloc(2 * (size_t)S, sizeof *t), *dt = NULL;
    if (!t) return fail(mode_names[mode], "calloc", "out of memory");
    int rc = 0;
    for (int s = -b->o.warmup; s < S && rc == 0; s++) {
        if (cudaDeviceSynchronize() != cudaSuccess) rc = fail(mode_names[mode], "cudaDeviceSynchronize", "before");
        double h0 = now_ms();
        if (rc == 0 && cudaEventRecord(ev[0], b->stream) != cudaSuccess) rc = fail("step", "cudaEventRecord", "start");
        if (rc == 0) rc = step(b, mode);
        if (rc == 0 && cudaEventRecord(ev[1], b->stream) != cudaSuccess) rc = fail("step", "cudaEventRecord", "stop");
        cudaError_t e = rc == 0 ? cudaDeviceSynchronize() : cudaSuccess;
        if (e != cudaSuccess) rc = fail(mode_names[mode], "cudaDeviceSynchronize", cudaGetErrorString(e));
        double h1 = now_ms();
        float ms = 0;
        if (rc == 0 && (e = cudaEventElapsedTime(&ms, ev[0], ev[1])) != cudaSuccess)
            rc = fail(mode_names[mode], "cudaEventElapsedTime", cudaGetErrorString(e));
        if (s >= 0) t[s] = ms, t[S + s] = (float)(h1 - h0);
    }
    cudaEventDestroy(ev[0]);
    cudaEventDestroy(ev[1]);
    /* the slowest rank's time per step: a step ends for the job when it ends everywhere */
    if (rc == 0) rc = alloc((void **)&dt, 2 * (size_t)S * sizeof(float));
    if (rc == 0) {
        tcomms_op_opts_t oo;
        memset(&oo, 0, sizeof oo);
        oo.field_mask = TCOMMS_OP_OPT_STREAM;
        oo.stream = (void *)b->stream;
        cudaError_t e = cudaMemcpyAsync(dt, t, 2 * (size_t)S * sizeof(float), cudaMemcpyHostToDevice, b->stream);
        tcomms_status_t ts = e == cudaSuccess ? tcomms_all_reduce(b->world, dt, dt, 2 * (size_t)S, TCOMMS_FLOAT32,
                                                                  TCOMMS_MAX, &oo, NULL)
                                              : TCOMMS_SUCCESS;
        if (e == cudaSuccess && ts == TCOMMS_SUCCESS)
            e = cudaMemcpyAsync(t, dt, 2 * (size_t)S * sizeof(float), cudaMemcpyDeviceToHost, b->stream);
        if (e == cudaSuccess && ts == TCOMMS_SUCCESS) e = cudaStreamSynchronize(b->stream);
        if (ts != TCOMMS_SUCCESS) rc = fail("step times", "tcomms_all_reduce", tcomms_last_error());
        else if (e != cudaSuccess) rc = fail("step times", "cudaMemcpyAsync", cudaGetErrorString(e));
    }
    cudaFree(dt);
    if (rc == 0) {
        qsort(t, (size_t)S, sizeof *t, cmp_float);
        qsort(t + S, (size_t)S, sizeof *t, cmp_float);
        st->median = S % 2 ? t[S / 2] : (t[S / 2 - 1] + t[S / 2]) / 2;
        st->min = t[0], st->max = t[S - 1];
        st->host_median = S % 2 ? t[S + S / 2] : (t[S + S / 2 - 1] + t[S + S / 2]) / 2;
    }
    free(t);
    return rc;
}

/* ---- report --------------------------------------------------------------------------------------------------- */

static void print_mode(const bench_t *b, int mode, const stats_t *st)
{
    const opts_t *o = &b->o;
    printf("fsdp_bench impl=tcomms mode=%s layers=%d dim=%d tokens=%d micro=%d dtype=%s reduce=%s strategy=%s "
           "prefetch=%d ranks=%d steps=%d step_ms_median=%.3f min=%.3f max=%.3f host_ms_median=%.3f",
           mode_names[mode], o->layers, o->dim, o->tokens, o->micro, o->fp32 ? "fp32" : "bf16",
           o->reduce_bf16 ? "bf16" : "fp32",
           strategy_names[o->strategy], o->prefetch, b->size, o->steps, st->median, st->min, st->max,
           st->host_median);
    /* forward 2TdD per layer, backward 2TdD for dW and 2TdD for dX except the first layer */
    double flops = 2.0 * o->micro * o->tokens * (double)b->wnumel * (3.0 * o->layers - 1);
    if (mode != MODE_COMM) printf(" tflops=%.1f", flops / (st->median * 1e-3) / 1e12);
    putchar('\n');
    fflush(stdout);
}

static void print_overlap(const bench_t *b, const stats_t *st)
{
    double comp = st[MODE_COMPUTE].median, comm = st[MODE_COMM].median, full = st[MODE_FULL].median;
    double eff = comm > 0 ? (comp + comm - full) / comm : 1.0;
    eff = eff < 0 ? 0 : eff > 1 ? 1 : eff;
    printf("fsdp_bench impl=tcomms overlap layers=%d dim=%d tokens=%d dtype=%s compute_ms=%.3f comm_ms=%.3f "
           "full_ms=%.3f exposed_comm_ms=%.3f overlap=%.3f\n",
           b->o.layers, b->o.dim, b->o.tokens, b->o.fp32 ? "fp32" : "bf16", comp, comm, full,
           full - comp > 0 ? full - comp : 0.0, eff);
    fflush(stdout);
}

/* --concurrency: whether a GEMM and a collective run side by side at all, without the runtime in between. Eight
 * forward GEMMs of one layer on the compute stream and eight all_gathers of one layer's weights over the world
 * (async, on its internal stream, posted first as a prefetch is), timed alone and together, best of 3. Together
 * near the larger of the two means the GPU overlaps them; near their sum means it does not, whatever the runtime
 * does. */
static int concurrency_probe(bench_t *b)
{
    enum { N = 8 };
    const size_t count = b->wnumel / (size_t)b->size, wbytes = b->wnumel * b->esize;
    const tcomms_dtype_t dt = b->o.fp32 ? TCOMMS_FLOAT32 : TCOMMS_BFLOAT16;
    void *w = NULL, *ag = NULL;
    tcomms_mem_reg_t *reg = NULL;
    CK(alloc(&w, wbytes));
    if (b->o.window) {
        CK_TC(tcomms_mem_alloc(b->world, TCOMMS_DEVICE_CUDA, wbytes, &ag));
        CK_TC(tcomms_mem_register(b->world, TCOMMS_DEVICE_CUDA, ag, wbytes, TCOMMS_MEM_REG_WINDOW, &reg));
    } else {
        CK(alloc(&ag, wbytes));
    }
    CK_CUDA(BY_DTYPE(b->o.fp32, fsdp_fill, b->stream, w, b->wnumel, 3, 0.01f));
    tcomms_op_opts_t o;
    memset(&o, 0, sizeof o);
    o.field_mask = TCOMMS_OP_OPT_STREAM;
    o.stream = (void *)b->stream;
    cudaEvent_t ev[2];
    CK_CUDA(cudaEventCreate(&ev[0]));
    CK_CUDA(cudaEventCreate(&ev[1]));
    float best[3] = {1e30f, 1e30f, 1e30f}; /* GEMMs, all_gathers, both */
    for (int pass = 0; pass < 4; pass++)   /* the first is a warm-up */
        for (int kind = 0; kind < 3; kind++) {
            tcomms_work_t *work[N] = {NULL};
            CK_CUDA(cudaDeviceSynchronize());
            CK_CUDA(cudaEventRecord(ev[0], b->stream));
            for (int k = 0; kind != 0 && k < N; k++)
                CK_TC(tcomms_all_gather(b->world, (char *)ag + (size_t)b->rank * count * b->esize, ag, count, dt,
                                        &o, &work[k]));
            for (int k = 0; kind != 1 && k < N; k++)
                CK(forward_layer(b, 0, w));
            for (int k = 0; kind != 0 && k < N; k++) {
                CK_TC(tcomms_work_wait(work[k], 0));
                tcomms_work_free(work[k]);
            }
            CK_CUDA(cudaEventRecord(ev[1], b->stream));
            CK_CUDA(cudaDeviceSynchronize());
            float ms = 0;
            CK_CUDA(cudaEventElapsedTime(&ms, ev[0], ev[1]));
            if (pass > 0 && ms < best[kind]) best[kind] = ms;
        }
    if (b->rank == 0)
        printf("fsdp_bench concurrency%s: %d GEMMs %.3f ms, %d all_gathers of %.1f MiB %.3f ms, both %.3f ms "
               "(sum %.3f, larger %.3f)\n", b->o.window ? " (window)" : "", N, best[0], N,
               (double)wbytes / (1 << 20), best[1], best[2], best[0] + best[1], best[0] > best[1] ? best[0] : best[1]);
    fflush(stdout);
    cudaEventDestroy(ev[0]);
    cudaEventDestroy(ev[1]);
    cudaFree(w);
    if (reg) {
        CK_TC(tcomms_mem_deregister(reg));
        CK_TC(tcomms_mem_free(b->world, TCOMMS_DEVICE_CUDA, ag));
    } else {
        cudaFree(ag);
    }
    return 0;
}

/* One more full step with per-layer events; rank 0 prints them (the last microbatch's, when there are several). */
static int take_timeline(bench_t *b)
{
    timeline_t t = {NULL, 0, 0};
    cudaError_t e = tl_create(&t, b->o.layers);
    int rc = e == cudaSuccess ? 0 : fail("timeline", "cudaEventCreate", cudaGetErrorString(e));
    if (rc == 0 && (e = cudaDeviceSynchronize()) != cudaSuccess)
        rc = fail("timeline", "cudaDeviceSynchronize", cudaGetErrorString(e));
    b->tl = &t;
    if (rc == 0) rc = step(b, MODE_FULL);
    b->tl = NULL;
    if (rc == 0 && (e = cudaDeviceSynchronize()) != cudaSuccess)
        rc = fail("timeline", "cudaDeviceSynchronize", cudaGetErrorString(e));
    if (rc == 0 && b->rank == 0) tl_print(&t);
    tl_destroy(&t);
    return rc;
}

static int run(bench_t *b)
{
    stats_t st[MODE_COUNT];
    memset(st, 0, sizeof st);
    CK(setup_model(b));
    /* --mode compute alone needs no runtime */
    if (b->o.modes & (1 << MODE_COMM | 1 << MODE_FULL)) CK(setup_runtime(b));
    for (int m = 0; m < MODE_COUNT; m++) {
        if (!(b->o.modes & (1 << m))) continue;
        if (m == MODE_COMPUTE) CK(setup_compute(b));
        CK(run_mode(b, m, &st[m]));
        if (m == MODE_COMPUTE) free_compute(b);
        if (b->rank == 0) print_mode(b, m, &st[m]);
    }
    if (b->o.modes == 7 && b->rank == 0) print_overlap(b, st);
    if (b->o.timeline && (b->o.modes & (1 << MODE_FULL))) CK(take_timeline(b));
    if (b->o.concurrency) CK(concurrency_probe(b));
    return 0;
}

int main(int argc, char **argv)
{
    static bench_t b;
    if (parse_opts(argc, argv, &b.o) != 0) return 2;
    int ngpu = 0;
    cudaError_t e = cudaGetDeviceCount(&ngpu);
    if (e != cudaSuccess || ngpu < 1) {
        printf("fsdp_bench: no CUDA device (cudaGetDeviceCount: %s): skipped\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 77;
    }
    /* the device the world will bind (cuda:-1 is the local rank modulo the GPUs), current before any context */
    const char *lr = getenv("TCOMMS_LOCAL_RANK");
    if ((e = cudaSetDevice((lr ? atoi(lr) : 0) % ngpu)) != cudaSuccess) {
        fail("local rank", "cudaSetDevice", cudaGetErrorString(e));
        return 1;
    }
    tcomms_comm_params_t p;
    memset(&p, 0, sizeof p);
    p.field_mask = TCOMMS_COMM_PARAM_BACKEND | TCOMMS_COMM_PARAM_DEVICE;
    p.backend = b.o.backend;
    p.device.type = TCOMMS_DEVICE_CUDA;
    p.device.index = -1;
    tcomms_status_t ts = tcomms_comm_create(&p, &b.world);
    if (ts != TCOMMS_SUCCESS) {
        fail("world on cuda:-1", "tcomms_comm_create", tcomms_last_error());
        return 1;
    }
    tcomms_device_t dev;
    int rc = tcomms_comm_rank(b.world, &b.rank) || tcomms_comm_size(b.world, &b.size) ||
             tcomms_comm_device(b.world, &dev);
    g_rank = b.rank;
    if (rc == 0 && cudaSetDevice(dev.index) != cudaSuccess) rc = fail("main", "cudaSetDevice", "world's device");
    if (rc == 0) rc = run(&b);
    teardown(&b);
    tcomms_comm_destroy(b.world);
    return rc ? 1 : 0;
}
