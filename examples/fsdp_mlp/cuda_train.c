/* SPDX-License-Identifier: BSD-3-Clause */
/* The CUDA back end of the fsdp_mlp FSDP trainer (run.h): the runtime's buckets live on the GPU, every unit is a
 * cuBLAS GEMM over this rank's samples of a microbatch (cuda_model.cu) on one stream that the runtime and the
 * collectives also take, and the expert layer's tokens travel with all_to_all_v between device buffers. */
#include "cuda_train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"

#define MAX_LOCAL_EXPERTS 2 /* per_ep of the model */

/* One microbatch: activations, targets, and the expert tokens received (sorted by local expert) and their outputs. */
typedef struct cmb {
    mlpc_rows_t act[MLP_UNITS + 1];
    void *y;
    mlpc_rows_t ex_in, ex_out;
} cmb_t;

typedef struct cuda_run {
    mlpc_t c;
    cudaStream_t stream;
    tcomms_op_opts_t opts; /* the stream, for the expert exchanges and the loss */
    cmb_t *mbs;
    mlpc_rows_t dpre, dcur, dnext, sendbuf, recvbuf, packed, dys, exdx; /* only dpre has a bf16 copy */
    int *send_idx;   /* send row k: this rank's sample send_idx[k], tokens ordered by owner */
    int *sort_idx;   /* expert-sorted row j: received row sort_idx[j] */
    int *unsort_idx; /* received row i: expert-sorted row unsort_idx[i] */
    int ex_cnt[MAX_LOCAL_EXPERTS], ex_off[MAX_LOCAL_EXPERTS];
    double *loss;    /* per microbatch, then the step's total at [microbatches] */
    double *hx, *hy; /* host staging of a microbatch's samples */
} cuda_run_t;

static cuda_run_t *cr_of(run_t *r) { return r->priv; }

static int mfail(run_t *r) { return mlp_run_failf(r, "%s", cr_of(r)->c.err); }

static int cuda_fail(run_t *r, const char *call, cudaError_t e)
{
    return mlp_run_failf(r, "%s: %s (%s)", call, cudaGetErrorString(e), cudaGetErrorName(e));
}

#define CUDA(r, expr)                                                                                              \
    do {                                                                                                           \
        cudaError_t e_ = (expr);                                                                                   \
        if (e_ != cudaSuccess)                                                                                     \
            return cuda_fail((r), #expr, e_);                                                                      \
    } while (0)

#define MC(r, expr)                                                                                                \
    do {                                                                                                           \
        if (expr)                                                                                                  \
            return mfail(r);                                                                                       \
    } while (0)

/* ---- options -------------------------------------------------------------------------------------------------- */

int mlpc_available(char *why, size_t len)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(why, len, "no usable GPU: cudaGetDeviceCount: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
        return 1;
    }
    if (n == 0) {
        snprintf(why, len, "no usable GPU: cudaGetDeviceCount found none");
        return 1;
    }
    return 0;
}

mlpc_kind_t mlpc_kind_of(const mlp_opts_t *o)
{
    tcomms_dtype_t c = mlp_compute_dtype(o);
    return c == TCOMMS_FLOAT64 ? MLPC_F64 : c == TCOMMS_BFLOAT16 ? MLPC_BF16 : MLPC_F32;
}

int mlpc_opts_check(const mlp_opts_t *o, mlp_result_t *res)
{
    if (mlp_opts_check(o, res))
        return -1;
    if (o->mode == MLP_DETERMINISTIC && o->lr_log2 < MLPC_LR_LOG2_MIN) {
        snprintf(res->err, sizeof res->err, "--mode deterministic on CUDA needs --lr-log2 >= %d (weights on the "
                 "2^-22 grid keep the GEMM sums exact), not %d", MLPC_LR_LOG2_MIN, o->lr_log2);
        return -1;
    }
    return 0;
}

/* ---- setup ---------------------------------------------------------------------------------------------------- */

static int cuda_configure(run_t *r, tcomms_fsdp_config_t *c)
{
    cuda_run_t *cr = calloc(1, sizeof *cr);
    if (!cr)
        return mlp_run_failf(r, "out of memory");
    r->priv = cr;
    CUDA(r, cudaStreamCreateWithFlags(&cr->stream, cudaStreamNonBlocking));
    MC(r, mlpc_init(&cr->c, mlpc_kind_of(r->o), r->o->mode == MLP_DETERMINISTIC, cr->stream));
    cr->opts.field_mask = TCOMMS_OP_OPT_STREAM;
    cr->opts.stream = cr->stream;
    c->stream = cr->stream;
    return 0;
}

/* Upload `n` ints (n may be 0) into a new device array. */
static int upload_idx(run_t *r, int **dev, const int *host, int n)
{
    cuda_run_t *cr = cr_of(r);
    MC(r, mlpc_alloc(&cr->c, (void **)dev, sizeof(int) * (size_t)(n + 1)));
    if (n > 0)
        CUDA(r, cudaMemcpyAsync(*dev, host, sizeof(int) * (size_t)n, cudaMemcpyHostToDevice, cr->stream));
    return 0;
}

/* The exchange orders: this rank's tokens by owner (as the counts of run.h), and the received tokens sorted by
 * local expert so that each expert's tokens are contiguous rows of one GEMM. */
static int build_orders(run_t *r)
{
    cuda_run_t *cr = cr_of(r);
    int *send = malloc(sizeof(int) * (size_t)(r->n + 1));
    int *sort = malloc(sizeof(int) * (size_t)(r->nrecv + 1));
    int *unsort = malloc(sizeof(int) * (size_t)(r->nrecv + 1));
    int rc = -1;
    if (!send || !sort || !unsort) {
        mlp_run_failf(r, "out of memory");
        goto out;
    }
    int k = 0;
    for (int j = 0; j < r->ep; j++)
        for (int t = r->lo; t < r->lo + r->n; t++)
            if (mlp_run_owner(r, t) == j)
                send[k++] = t - r->lo;
    k = 0;
    for (int e = 0; e < r->per_ep && e < MAX_LOCAL_EXPERTS; e++) {
        cr->ex_off[e] = k;
        for (int i = 0; i < r->nrecv; i++)
            if (mlp_run_received_expert(r, i) == e) {
                unsort[i] = k;
                sort[k++] = i;
            }
        cr->ex_cnt[e] = k - cr->ex_off[e];
    }
    if (k != r->nrecv) {
        mlp_run_failf(r, "expert layer: %d of %d received tokens belong to a local expert", k, r->nrecv);
        goto out;
    }
    rc = upload_idx(r, &cr->send_idx, send, r->n) || upload_idx(r, &cr->sort_idx, sort, r->nrecv) ||
         upload_idx(r, &cr->unsort_idx, unsort, r->nrecv) ? -1 : 0;
out:
    free(send);
    free(sort);
    free(unsort);
    return rc;
}

static int cuda_alloc(run_t *r)
{
    cuda_run_t *cr = cr_of(r);
    mlpc_t *c = &cr->c;
    int M = r->o->microbatches;
    size_t rows = (size_t)r->n + 1, rrows = (size_t)r->nrecv + 1, most = rows > rrows ? rows : rrows;
    if (r->per_ep > MAX_LOCAL_EXPERTS)
        return mlp_run_failf(r, "%d local experts, at most %d", r->per_ep, MAX_LOCAL_EXPERTS);
    cr->mbs = calloc((size_t)M, sizeof(cmb_t));
    cr->hx = calloc(rows * MLP_MAX_DIM, sizeof(double));
    cr->hy = calloc(rows * MLP_OUT, sizeof(double));
    if (!cr->mbs || !cr->hx || !cr->hy)
        return mlp_run_failf(r, "out of memory");
    for (int m = 0; m < M; m++) {
        cmb_t *b = &cr->mbs[m];
        for (int u = 0; u <= MLP_UNITS; u++)
            MC(r, mlpc_rows_alloc(c, &b->act[u], rows));
        MC(r, mlpc_alloc(c, &b->y, rows * MLP_OUT * mlpc_value_size(c)));
        MC(r, mlpc_rows_alloc(c, &b->ex_in, rrows));
        MC(r, mlpc_rows_alloc(c, &b->ex_out, rrows));
    }
    MC(r, mlpc_rows_alloc(c, &cr->dpre, most));
    mlpc_rows_t *plain[] = {&cr->dcur, &cr->dnext, &cr->sendbuf};
    mlpc_rows_t *recvd[] = {&cr->recvbuf, &cr->packed, &cr->dys, &cr->exdx};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        MC(r, mlpc_alloc(c, &plain[i]->v, rows * MLP_MAX_DIM * mlpc_value_size(c)));
    for (size_t i = 0; i < sizeof recvd / sizeof recvd[0]; i++)
        MC(r, mlpc_alloc(c, &recvd[i]->v, rrows * MLP_MAX_DIM * mlpc_value_size(c)));
    MC(r, mlpc_alloc(c, (void **)&cr->loss, sizeof(double) * (size_t)(M + 1)));
    return build_orders(r);
}

static void cuda_release(run_t *r)
{
    cuda_run_t *cr = cr_of(r);
    if (!cr)
        return;
    if (cr->stream)
        cudaStreamSynchronize(cr->stream);
    if (cr->mbs)
        for (int m = 0; m < r->o->microbatches; m++) {
            cmb_t *b = &cr->mbs[m];
            for (int u = 0; u <= MLP_UNITS; u++)
                mlpc_rows_free(&b->act[u]);
            mlpc_free(b->y);
            mlpc_rows_free(&b->ex_in);
            mlpc_rows_free(&b->ex_out);
        }
    mlpc_rows_t *all[] = {&cr->dpre, &cr->dcur, &cr->dnext, &cr->sendbuf, &cr->recvbuf, &cr->packed, &cr->dys,
                          &cr->exdx};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        mlpc_rows_free(all[i]);
    mlpc_free(cr->send_idx);
    mlpc_free(cr->sort_idx);
    mlpc_free(cr->unsort_idx);
    mlpc_free(cr->loss);
    mlpc_fini(&cr->c);
    if (cr->stream)
        cudaStreamDestroy(cr->stream);
    free(cr->mbs);
    free(cr->hx);
    free(cr->hy);
    free(cr);
    r->priv = NULL;
}

/* ---- compute -------------------------------------------------------------------------------------------------- */

static int cuda_load_microbatch(run_t *r, int step, int m)
{
    cuda_run_t *cr = cr_of(r);
    cmb_t *b = &cr->mbs[m];
    uint64_t first = ((uint64_t)step * (uint64_t)r->o->microbatches + (uint64_t)m) * (uint64_t)r->o->batch;
    for (int t = 0; t < r->n; t++)
        mlp_sample(r->o->seed, r->o->mode, first + (uint64_t)(r->lo + t), cr->hx + MLP_MAX_DIM * t,
                   cr->hy + MLP_OUT * t);
    MC(r, mlpc_upload(&cr->c, b->act[0].v, cr->hx, (size_t)r->n * MLP_MAX_DIM));
    MC(r, mlpc_shadow(&cr->c, b->act[0], r->n));
    MC(r, mlpc_upload(&cr->c, b->y, cr->hy, (size_t)r->n * MLP_OUT));
    CUDA(r, cudaMemsetAsync(cr->loss + m, 0, sizeof(double), cr->stream));
    return 0;
}

/* Send this rank's rows of `rows` to the owners of their tokens; they land in recvbuf, packed by source. */
static int dispatch(run_t *r, const void *rows)
{
    cuda_run_t *cr = cr_of(r);
    MC(r, mlpc_permute(&cr->c, cr->sendbuf, NULL, rows, cr->send_idx, r->n, EXD));
    MLP_CALL(r, tcomms_all_to_all_v(r->groups.ep, cr->sendbuf.v, r->scount, NULL, cr->recvbuf.v, r->rcount, NULL,
                                    r->mdt, &cr->opts, NULL));
    return 0;
}

/* The reverse of dispatch for expert-sorted rows `sorted`: back to their tokens' rows of `rows`. */
static int collect(run_t *r, const void *sorted, mlpc_rows_t rows)
{
    cuda_run_t *cr = cr_of(r);
    MC(r, mlpc_permute(&cr->c, cr->packed, NULL, sorted, cr->unsort_idx, r->nrecv, EXD));
    MLP_CALL(r, tcomms_all_to_all_v(r->groups.ep, cr->packed.v, r->rcount, NULL, cr->sendbuf.v, r->scount, NULL,
                                    r->mdt, &cr->opts, NULL));
    MC(r, mlpc_permute(&cr->c, rows, cr->send_idx, cr->sendbuf.v, NULL, r->n, EXD));
    return 0;
}

static int expert_forward(run_t *r, cmb_t *b, int u)
{
    cuda_run_t *cr = cr_of(r);
    mlpc_t *c = &cr->c;
    if (dispatch(r, b->act[u].v))
        return -1;
    MC(r, mlpc_permute(c, b->ex_in, NULL, cr->recvbuf.v, cr->sort_idx, r->nrecv, EXD));
    for (int e = 0; e < r->per_ep; e++) {
        void *W, *bias;
        if (mlp_run_weights(r, u, r->elo + e, &W, &bias))
            return -1;
        MC(r, mlpc_linear_fwd(c, W, bias, mlp_dim_in(u), mlp_dim_out(u), mlp_relu(u),
                              mlpc_rows_at(c, b->ex_in, cr->ex_off[e]), cr->ex_cnt[e],
                              mlpc_rows_at(c, b->ex_out, cr->ex_off[e])));
    }
    return collect(r, b->ex_out.v, b->act[u + 1]);
}

static int cuda_forward(run_t *r, int m, int u)
{
    cuda_run_t *cr = cr_of(r);
    cmb_t *b = &cr->mbs[m];
    if (u == MLP_EXPERT_UNIT) {
        if (expert_forward(r, b, u))
            return -1;
    } else {
        void *W, *bias;
        if (mlp_run_weights(r, u, 0, &W, &bias))
            return -1;
        MC(r, mlpc_linear_fwd(&cr->c, W, bias, mlp_dim_in(u), mlp_dim_out(u), mlp_relu(u), b->act[u], r->n,
                              b->act[u + 1]));
    }
    if (u == MLP_UNITS - 1)
        MC(r, mlpc_loss(&cr->c, b->act[MLP_UNITS], b->y, r->n, NULL, cr->loss + m));
    return 0;
}

static int expert_backward(run_t *r, cmb_t *b, int u)
{
    cuda_run_t *cr = cr_of(r);
    mlpc_t *c = &cr->c;
    if (dispatch(r, cr->dcur.v))
        return -1;
    MC(r, mlpc_permute(c, cr->dys, NULL, cr->recvbuf.v, cr->sort_idx, r->nrecv, EXD));
    for (int e = 0; e < r->per_ep; e++) {
        void *W, *gW, *gb;
        int off = cr->ex_off[e];
        if (mlp_run_weights(r, u, r->elo + e, &W, NULL) || mlp_run_grads(r, u, r->elo + e, &gW, &gb))
            return -1;
        MC(r, mlpc_linear_bwd(c, W, mlp_dim_in(u), mlp_dim_out(u), mlp_relu(u), mlpc_rows_at(c, b->ex_in, off),
                              mlpc_rows_at(c, b->ex_out, off), mlpc_row(c, cr->dys.v, off), cr->ex_cnt[e], cr->dpre,
                              mlpc_row(c, cr->exdx.v, off), gW, gb));
    }
    return collect(r, cr->exdx.v, cr->dnext);
}

/* Backward of unit u for microbatch m: dL/d(output) is in dcur, dL/d(input) goes to dnext. */
static int cuda_backward(run_t *r, int m, int u)
{
    cuda_run_t *cr = cr_of(r);
    cmb_t *b = &cr->mbs[m];
    if (u == MLP_UNITS - 1)
        MC(r, mlpc_loss(&cr->c, b->act[MLP_UNITS], b->y, r->n, cr->dcur.v, NULL));
    if (u == MLP_EXPERT_UNIT) {
        if (expert_backward(r, b, u))
            return -1;
    } else {
        void *W, *gW, *gb;
        if (mlp_run_weights(r, u, 0, &W, NULL) || mlp_run_grads(r, u, 0, &gW, &gb))
            return -1;
        MC(r, mlpc_linear_bwd(&cr->c, W, mlp_dim_in(u), mlp_dim_out(u), mlp_relu(u), b->act[u], b->act[u + 1],
                              cr->dcur.v, r->n, cr->dpre, u > 0 ? cr->dnext.v : NULL, gW, gb));
    }
    mlpc_rows_t swap = cr->dcur;
    cr->dcur = cr->dnext;
    cr->dnext = swap;
    return 0;
}

static int cuda_sgd(run_t *r, const tcomms_fsdp_shard_t *s, double lr)
{
    MC(r, mlpc_sgd(&cr_of(r)->c, s->main, s->grad, s->count, lr));
    return 0;
}

static int cuda_step_loss(run_t *r, double *loss)
{
    cuda_run_t *cr = cr_of(r);
    int M = r->o->microbatches, bad = 0;
    double *total = cr->loss + M;
    MC(r, mlpc_sum(&cr->c, total, cr->loss, M));
    MLP_CALL(r, tcomms_all_reduce(r->groups.dp_cp, total, total, 1, TCOMMS_FLOAT64, TCOMMS_SUM, &cr->opts, NULL));
    MC(r, mlpc_fetch(&cr->c, total, loss, &bad));
    if (bad)
        return mlp_run_failf(r, "an activation, delta or weight left the range where deterministic sums are exact");
    return 0;
}

static const mlp_backend_t cuda_backend = {
    .configure = cuda_configure,
    .alloc = cuda_alloc,
    .release = cuda_release,
    .load_microbatch = cuda_load_microbatch,
    .forward = cuda_forward,
    .backward = cuda_backward,
    .sgd = cuda_sgd,
    .step_loss = cuda_step_loss,
};

int mlpc_train_fsdp(tcomms_comm_t *world, const mlp_opts_t *o, mlp_result_t *res)
{
    tcomms_device_t dev;
    res->err[0] = '\0';
    if (mlpc_opts_check(o, res))
        return -1;
    tcomms_status_t st = tcomms_comm_device(world, &dev);
    if (st != TCOMMS_SUCCESS || dev.type != TCOMMS_DEVICE_CUDA) {
        snprintf(res->err, sizeof res->err, "the world communicator is not bound to a CUDA device (%s)",
                 st != TCOMMS_SUCCESS ? tcomms_last_error() : tcomms_device_type_name(dev.type));
        return -1;
    }
    cudaError_t e = cudaSetDevice(dev.index);
    if (e != cudaSuccess) {
        snprintf(res->err, sizeof res->err, "cudaSetDevice(%d): %s (%s)", dev.index, cudaGetErrorString(e),
                 cudaGetErrorName(e));
        return -1;
    }
    return mlp_train_fsdp_on(world, o, res, &cuda_backend);
}
