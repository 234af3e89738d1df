/* SPDX-License-Identifier: BSD-3-Clause */
/* The one-GPU reference of fsdp_mlp_cuda (cuda_train.h): the whole model and the whole global batch of each
 * microbatch on the current device, through the same layer functions as the FSDP back end (cuda_model.cu), with
 * the experts' tokens sorted so that each expert is one GEMM; only the GEMM shapes and the order of the gradient
 * sums differ from a sharded run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_train.h"

#define MAX_EXPERTS 16

typedef struct ref {
    const mlp_opts_t *o;
    mlp_result_t *res;
    mlpc_t c;
    cudaStream_t stream;
    int E, B;
    size_t total, wsize;
    void *weights, *main, *grad; /* the full model in the global order of model.h */
    mlpc_rows_t act[MLP_UNITS + 1], ex_in, ex_out, dcur, dnext, dys, exdx, dpre;
    void *y;
    int *sort_idx; /* expert-sorted row j: token sort_idx[j] of the microbatch */
    int ex_cnt[MAX_EXPERTS], ex_off[MAX_EXPERTS];
    double *loss; /* per microbatch, then the step's total */
    double *hx, *hy;
} ref_t;

static int failf(ref_t *f, const char *what)
{
    snprintf(f->res->err, sizeof f->res->err, "reference: %s", what);
    return -1;
}

static int cfail(ref_t *f, const char *call, cudaError_t e)
{
    snprintf(f->res->err, sizeof f->res->err, "reference: %s: %s (%s)", call, cudaGetErrorString(e),
             cudaGetErrorName(e));
    return -1;
}

#define CUDA(f, expr)                                                                                              \
    do {                                                                                                           \
        cudaError_t e_ = (expr);                                                                                   \
        if (e_ != cudaSuccess)                                                                                     \
            return cfail((f), #expr, e_);                                                                          \
    } while (0)

#define MC(f, expr)                                                                                                \
    do {                                                                                                           \
        if (expr)                                                                                                  \
            return failf((f), (f)->c.err);                                                                         \
    } while (0)

/* Parameter (unit, expert, bias) inside one of the flat model buffers of element size `size`. */
static void *at(const ref_t *f, void *base, size_t size, int unit, int expert, int bias)
{
    mlp_param_t p;
    mlp_param(f->E, mlp_param_id(f->E, unit, expert, bias), &p);
    return (char *)base + p.offset * size;
}

static int setup(ref_t *f)
{
    mlpc_t *c = &f->c;
    int M = f->o->microbatches;
    size_t rows = (size_t)f->B + 1;
    CUDA(f, cudaStreamCreateWithFlags(&f->stream, cudaStreamNonBlocking));
    MC(f, mlpc_init(c, mlpc_kind_of(f->o), f->o->mode == MLP_DETERMINISTIC, f->stream));
    f->wsize = tcomms_dtype_size(mlp_compute_dtype(f->o));
    MC(f, mlpc_alloc(c, &f->weights, f->total * f->wsize));
    MC(f, mlpc_alloc(c, &f->main, f->total * mlpc_main_size(c)));
    MC(f, mlpc_alloc(c, &f->grad, f->total * mlpc_main_size(c)));
    for (int u = 0; u <= MLP_UNITS; u++)
        MC(f, mlpc_rows_alloc(c, &f->act[u], rows));
    mlpc_rows_t *rs[] = {&f->ex_in, &f->ex_out, &f->dcur, &f->dnext, &f->dys, &f->exdx, &f->dpre};
    for (size_t i = 0; i < sizeof rs / sizeof rs[0]; i++)
        MC(f, mlpc_rows_alloc(c, rs[i], rows));
    MC(f, mlpc_alloc(c, &f->y, rows * MLP_OUT * mlpc_value_size(c)));
    MC(f, mlpc_alloc(c, (void **)&f->loss, sizeof(double) * (size_t)(M + 1)));
    MC(f, mlpc_alloc(c, (void **)&f->sort_idx, sizeof(int) * rows));
    f->hx = calloc(rows * MLP_MAX_DIM, sizeof(double));
    f->hy = calloc(rows * MLP_OUT, sizeof(double));
    double *init = calloc(f->total, sizeof(double));
    int *sort = calloc(rows, sizeof(int));
    if (!f->hx || !f->hy || !init || !sort) {
        free(init);
        free(sort);
        return failf(f, "out of memory");
    }
    /* token t of a microbatch goes to expert t % E */
    for (int e = 0, k = 0; e < f->E; e++) {
        f->ex_off[e] = k;
        for (int t = e; t < f->B; t += f->E)
            sort[k++] = t;
        f->ex_cnt[e] = k - f->ex_off[e];
    }
    for (int g = 0; g < mlp_nparams(f->E); g++) {
        mlp_param_t p;
        mlp_param(f->E, g, &p);
        mlp_init_param(f->o->seed, f->o->mode, f->E, g, init + p.offset);
    }
    int rc = mlpc_upload(c, f->main, init, f->total) || mlpc_cast(c, f->weights, f->main, f->total) ? -1 : 0;
    cudaError_t e = cudaMemcpyAsync(f->sort_idx, sort, sizeof(int) * (size_t)f->B, cudaMemcpyHostToDevice, f->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(f->stream); /* before `sort` is freed */
    free(init);
    free(sort);
    if (rc)
        return failf(f, c->err);
    return e == cudaSuccess ? 0 : cfail(f, "cudaMemcpyAsync(sort_idx)", e);
}

static void teardown(ref_t *f)
{
    if (f->stream)
        cudaStreamSynchronize(f->stream);
    mlpc_rows_t *rs[] = {&f->ex_in, &f->ex_out, &f->dcur, &f->dnext, &f->dys, &f->exdx, &f->dpre};
    for (size_t i = 0; i < sizeof rs / sizeof rs[0]; i++)
        mlpc_rows_free(rs[i]);
    for (int u = 0; u <= MLP_UNITS; u++)
        mlpc_rows_free(&f->act[u]);
    void *flat[] = {f->weights, f->main, f->grad, f->y, f->loss, f->sort_idx};
    for (size_t i = 0; i < sizeof flat / sizeof flat[0]; i++)
        mlpc_free(flat[i]);
    mlpc_fini(&f->c);
    if (f->stream)
        cudaStreamDestroy(f->stream);
    free(f->hx);
    free(f->hy);
}

static int forward(ref_t *f, int m)
{
    mlpc_t *c = &f->c;
    for (int u = 0; u < MLP_UNITS; u++) {
        int nin = mlp_dim_in(u), nout = mlp_dim_out(u), relu = mlp_relu(u);
        if (u != MLP_EXPERT_UNIT) {
            MC(f, mlpc_linear_fwd(c, at(f, f->weights, f->wsize, u, 0, 0), at(f, f->weights, f->wsize, u, 0, 1),
                                  nin, nout, relu, f->act[u], f->B, f->act[u + 1]));
            continue;
        }
        MC(f, mlpc_permute(c, f->ex_in, NULL, f->act[u].v, f->sort_idx, f->B, MLP_MAX_DIM));
        for (int e = 0; e < f->E; e++)
            MC(f, mlpc_linear_fwd(c, at(f, f->weights, f->wsize, u, e, 0), at(f, f->weights, f->wsize, u, e, 1),
                                  nin, nout, relu, mlpc_rows_at(c, f->ex_in, f->ex_off[e]), f->ex_cnt[e],
                                  mlpc_rows_at(c, f->ex_out, f->ex_off[e])));
        MC(f, mlpc_permute(c, f->act[u + 1], f->sort_idx, f->ex_out.v, NULL, f->B, MLP_MAX_DIM));
    }
    MC(f, mlpc_loss(c, f->act[MLP_UNITS], f->y, f->B, f->dcur.v, f->loss + m));
    return 0;
}

static int backward(ref_t *f)
{
    mlpc_t *c = &f->c;
    size_t ms = mlpc_main_size(c);
    for (int u = MLP_UNITS - 1; u >= 0; u--) {
        int nin = mlp_dim_in(u), nout = mlp_dim_out(u), relu = mlp_relu(u);
        if (u != MLP_EXPERT_UNIT) {
            MC(f, mlpc_linear_bwd(c, at(f, f->weights, f->wsize, u, 0, 0), nin, nout, relu, f->act[u],
                                  f->act[u + 1], f->dcur.v, f->B, f->dpre, u > 0 ? f->dnext.v : NULL,
                                  at(f, f->grad, ms, u, 0, 0), at(f, f->grad, ms, u, 0, 1)));
        } else {
            MC(f, mlpc_permute(c, f->dys, NULL, f->dcur.v, f->sort_idx, f->B, MLP_MAX_DIM));
            for (int e = 0; e < f->E; e++) {
                int off = f->ex_off[e];
                MC(f, mlpc_linear_bwd(c, at(f, f->weights, f->wsize, u, e, 0), nin, nout, relu,
                                      mlpc_rows_at(c, f->ex_in, off), mlpc_rows_at(c, f->ex_out, off),
                                      mlpc_row(c, f->dys.v, off), f->ex_cnt[e], f->dpre, mlpc_row(c, f->exdx.v, off),
                                      at(f, f->grad, ms, u, e, 0), at(f, f->grad, ms, u, e, 1)));
            }
            MC(f, mlpc_permute(c, f->dnext, f->sort_idx, f->exdx.v, NULL, f->B, MLP_MAX_DIM));
        }
        mlpc_rows_t swap = f->dcur;
        f->dcur = f->dnext;
        f->dnext = swap;
    }
    return 0;
}

static int step(ref_t *f, int s)
{
    mlpc_t *c = &f->c;
    int M = f->o->microbatches, bad = 0;
    CUDA(f, cudaMemsetAsync(f->grad, 0, f->total * mlpc_main_size(c), f->stream));
    CUDA(f, cudaMemsetAsync(f->loss, 0, sizeof(double) * (size_t)M, f->stream));
    for (int m = 0; m < M; m++) {
        uint64_t first = ((uint64_t)s * (uint64_t)M + (uint64_t)m) * (uint64_t)f->B;
        for (int t = 0; t < f->B; t++)
            mlp_sample(f->o->seed, f->o->mode, first + (uint64_t)t, f->hx + MLP_MAX_DIM * t, f->hy + MLP_OUT * t);
        MC(f, mlpc_upload(c, f->act[0].v, f->hx, (size_t)f->B * MLP_MAX_DIM));
        MC(f, mlpc_shadow(c, f->act[0], f->B));
        MC(f, mlpc_upload(c, f->y, f->hy, (size_t)f->B * MLP_OUT));
        if (forward(f, m) || backward(f))
            return -1;
    }
    MC(f, mlpc_sgd(c, f->main, f->grad, f->total, ldexp(1.0, f->o->lr_log2)));
    MC(f, mlpc_cast(c, f->weights, f->main, f->total));
    MC(f, mlpc_sum(c, f->loss + M, f->loss, M));
    double loss = 0.0;
    MC(f, mlpc_fetch(c, f->loss + M, &loss, &bad));
    if (bad)
        return failf(f, "an activation, delta or weight left the range where deterministic sums are exact");
    if (f->res->losses)
        f->res->losses[s] = loss;
    return 0;
}

/* The final main params as doubles, in the global order. */
static int read_params(ref_t *f)
{
    size_t ms = mlpc_main_size(&f->c);
    void *host = malloc(f->total * ms);
    if (!host)
        return failf(f, "out of memory");
    cudaError_t e = cudaMemcpy(host, f->main, f->total * ms, cudaMemcpyDeviceToHost);
    for (size_t i = 0; e == cudaSuccess && i < f->total; i++)
        f->res->params[i] = ms == sizeof(double) ? ((double *)host)[i] : ((float *)host)[i];
    free(host);
    return e == cudaSuccess ? 0 : cfail(f, "cudaMemcpy(main params)", e);
}

int mlpc_train_reference(const mlp_opts_t *o, mlp_result_t *res)
{
    ref_t f;
    memset(&f, 0, sizeof f);
    f.o = o;
    f.res = res;
    res->err[0] = '\0';
    if (mlpc_opts_check(o, res))
        return -1;
    f.E = 2 * o->ep;
    f.B = o->batch;
    f.total = mlp_total(f.E);
    int rc = setup(&f);
    for (int s = 0; s < o->steps && rc == 0; s++)
        rc = step(&f, s);
    if (rc == 0 && res->params)
        rc = read_params(&f);
    teardown(&f);
    return rc;
}
