/* The FSDP trainer of fsdp_mlp (train.h): builds the layout and its communicators, registers one unit per layer,
 * and drives the runtime's entry points through a standard or an interleaved 1F1B schedule. The expert layer sends
 * each token to the ep rank owning expert (token % E) with all_to_all_v on groups.ep and back. */
#include "train.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXD 17 /* width of the expert layer's rows in the exchanges */

/* One microbatch's state on this rank: activations of its samples (rows of MLP_MAX_DIM), targets, and on the
 * expert owner side the tokens received and the expert outputs. */
typedef struct mb {
    double *act[MLP_UNITS + 1];
    double *y;
    double *ex_in, *ex_out;
    double loss;
} mb_t;

typedef struct run {
    const mlp_opts_t *o;
    mlp_result_t *res;
    tcomms_fsdp_layout_t *layout;
    tcomms_fsdp_groups_t groups;
    tcomms_fsdp_t *rt;
    tcomms_dtype_t cdt, mdt;
    int grid, E, per_ep, elo, ep, eprank, dp, dprank;
    int lo, n;            /* this rank's samples of each microbatch: [lo, lo + n) */
    int *peer_lo, *peer_n; /* the same for each member of the ep group */
    int nrecv;            /* tokens this rank's experts receive per microbatch */
    size_t *scount, *rcount;
    double *sendbuf, *recvbuf, *dcur, *dnext, *exdx;
    int nrid;
    int *gid_of_rid, *rid_of_gid;
    mb_t *mbs;
} run_t;

static int failf(run_t *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->res->err, sizeof r->res->err, fmt, ap);
    va_end(ap);
    return -1;
}

static int fail_call(run_t *r, const char *call, tcomms_status_t st)
{
    return failf(r, "%s: %s: %s", call, tcomms_strerror(st), tcomms_last_error());
}

#define CALL(r, expr)                                                                                              \
    do {                                                                                                           \
        tcomms_status_t st_ = (expr);                                                                              \
        if (st_ != TCOMMS_SUCCESS)                                                                                 \
            return fail_call((r), #expr, st_);                                                                     \
    } while (0)

static int rid(const run_t *r, int unit, int expert, int bias)
{
    return r->rid_of_gid[mlp_param_id(r->E, unit, expert, bias)];
}

/* The owning ep rank of token t. */
static int owner(const run_t *r, int t) { return (t % r->E) / r->per_ep; }

/* ---- setup ---------------------------------------------------------------------------------------------------- */

/* This rank's data and expert coordinates from the layout, and the sample ranges of its ep peers. */
static int find_coords(run_t *r, int wrank)
{
    const mlp_opts_t *o = r->o;
    int g, ng, gs;
    CALL(r, tcomms_fsdp_layout_group_of(r->layout, TCOMMS_FSDP_GROUP_DP, wrank, &g, &r->dprank));
    CALL(r, tcomms_fsdp_layout_groups(r->layout, TCOMMS_FSDP_GROUP_DP, &ng, &r->dp, NULL, 0));
    CALL(r, tcomms_fsdp_layout_groups(r->layout, TCOMMS_FSDP_GROUP_EP, &ng, &gs, NULL, 0));
    if (gs != r->ep)
        return failf(r, "layout: ep groups of %d ranks, expected --ep %d", gs, r->ep);
    int *ranks = malloc(sizeof(int) * (size_t)ng * (size_t)gs);
    r->peer_lo = calloc((size_t)gs, sizeof(int));
    r->peer_n = calloc((size_t)gs, sizeof(int));
    if (!ranks || !r->peer_lo || !r->peer_n) {
        free(ranks);
        return failf(r, "out of memory");
    }
    tcomms_status_t st = tcomms_fsdp_layout_groups(r->layout, TCOMMS_FSDP_GROUP_EP, &ng, &gs, ranks,
                                                   (size_t)ng * (size_t)gs);
    if (st == TCOMMS_SUCCESS)
        st = tcomms_fsdp_layout_group_of(r->layout, TCOMMS_FSDP_GROUP_EP, wrank, &g, &r->eprank);
    for (int j = 0; j < gs && st == TCOMMS_SUCCESS; j++) {
        int gj, d;
        st = tcomms_fsdp_layout_group_of(r->layout, TCOMMS_FSDP_GROUP_DP, ranks[g * gs + j], &gj, &d);
        r->peer_lo[j] = (int)((long)d * o->batch / r->dp);
        r->peer_n[j] = (int)((long)(d + 1) * o->batch / r->dp) - r->peer_lo[j];
    }
    free(ranks);
    if (st != TCOMMS_SUCCESS)
        return fail_call(r, "tcomms_fsdp_layout_groups/group_of (ep)", st);
    int commrank = -1;
    CALL(r, tcomms_comm_rank(r->groups.ep, &commrank));
    if (commrank != r->eprank)
        return failf(r, "groups.ep: rank %d, but the layout puts world rank %d at ep index %d", commrank, wrank,
                     r->eprank);
    r->lo = r->peer_lo[r->eprank];
    r->n = r->peer_n[r->eprank];
    r->elo = r->eprank * r->per_ep;
    return 0;
}

/* Exchange sizes and the buffers every microbatch uses. */
static int alloc_buffers(run_t *r)
{
    const mlp_opts_t *o = r->o;
    r->scount = calloc((size_t)r->ep, sizeof(size_t));
    r->rcount = calloc((size_t)r->ep, sizeof(size_t));
    if (!r->scount || !r->rcount)
        return failf(r, "out of memory");
    r->nrecv = 0;
    for (int j = 0; j < r->ep; j++) {
        for (int t = r->lo; t < r->lo + r->n; t++)
            r->scount[j] += (size_t)(owner(r, t) == j) * EXD;
        for (int t = r->peer_lo[j]; t < r->peer_lo[j] + r->peer_n[j]; t++)
            r->rcount[j] += (size_t)(owner(r, t) == r->eprank) * EXD;
        r->nrecv += (int)(r->rcount[j] / EXD);
    }
    size_t rows = (size_t)r->n + 1, rrows = (size_t)r->nrecv + 1;
    r->sendbuf = malloc(rows * EXD * sizeof(double));
    r->recvbuf = malloc(rrows * EXD * sizeof(double));
    r->exdx = malloc(rrows * EXD * sizeof(double));
    r->dcur = malloc(rows * MLP_MAX_DIM * sizeof(double));
    r->dnext = malloc(rows * MLP_MAX_DIM * sizeof(double));
    r->mbs = calloc((size_t)o->microbatches, sizeof(mb_t));
    if (!r->sendbuf || !r->recvbuf || !r->exdx || !r->dcur || !r->dnext || !r->mbs)
        return failf(r, "out of memory");
    for (int m = 0; m < o->microbatches; m++) {
        mb_t *b = &r->mbs[m];
        for (int u = 0; u <= MLP_UNITS; u++)
            if (!(b->act[u] = calloc(rows * MLP_MAX_DIM, sizeof(double))))
                return failf(r, "out of memory");
        b->y = calloc(rows * MLP_OUT, sizeof(double));
        b->ex_in = calloc(rrows * EXD, sizeof(double));
        b->ex_out = calloc(rrows * EXD, sizeof(double));
        if (!b->y || !b->ex_in || !b->ex_out)
            return failf(r, "out of memory");
    }
    return 0;
}

/* Register this rank's parameters (every dense one, its own experts), finalize, and load the initial values. */
static int register_params(run_t *r, const tcomms_fsdp_layout_t *layout)
{
    int np = mlp_nparams(r->E);
    r->rid_of_gid = malloc(sizeof(int) * (size_t)np);
    r->gid_of_rid = malloc(sizeof(int) * (size_t)np);
    if (!r->rid_of_gid || !r->gid_of_rid)
        return failf(r, "out of memory");
    for (int g = 0; g < np; g++)
        r->rid_of_gid[g] = -1;
    for (int g = 0; g < np; g++) {
        mlp_param_t p;
        mlp_param(r->E, g, &p);
        if (p.expert >= 0 && (p.expert < r->elo || p.expert >= r->elo + r->per_ep))
            continue;
        char name[64];
        if (p.expert >= 0) /* local expert index: every rank registers the same names and shapes */
            snprintf(name, sizeof name, "unit%d.expert%d.%s", p.unit, p.expert - r->elo, p.bias ? "b" : "W");
        else
            snprintf(name, sizeof name, "unit%d.%s", p.unit, p.bias ? "b" : "W");
        int64_t shape[2] = {p.rows, p.cols};
        int id = -1;
        CALL(r, tcomms_fsdp_register_param(r->rt, name, shape, p.bias ? 1 : 2, r->cdt, p.unit,
                                           p.expert >= 0 ? TCOMMS_FSDP_PARAM_EXPERT : 0u, &id));
        if (id != r->nrid)
            return failf(r, "tcomms_fsdp_register_param gave id %d to parameter %d (%s)", id, r->nrid, name);
        r->rid_of_gid[g] = id;
        r->gid_of_rid[r->nrid++] = g;
    }
    CALL(r, tcomms_fsdp_finalize(r->rt, layout));
    double vals[MLP_MAX_DIM * MLP_MAX_DIM];
    double main[MLP_MAX_DIM * MLP_MAX_DIM];
    for (int i = 0; i < r->nrid; i++) {
        mlp_param_t p;
        mlp_param(r->E, r->gid_of_rid[i], &p);
        mlp_init_param(r->o->seed, r->o->mode, r->E, r->gid_of_rid[i], vals);
        for (size_t k = 0; k < p.numel; k++)
            mlp_store(main, r->mdt, k, vals[k]);
        CALL(r, tcomms_fsdp_load_param(r->rt, i, main));
    }
    return 0;
}

static int setup(run_t *r, tcomms_comm_t *world)
{
    const mlp_opts_t *o = r->o;
    int wsize, wrank;
    CALL(r, tcomms_comm_size(world, &wsize));
    CALL(r, tcomms_comm_rank(world, &wrank));
    int dp = o->dp > 0 ? o->dp : (wsize - o->offset) / (o->tp > 0 ? o->tp : 1);
    tcomms_fsdp_layout_params_t lp = {.tp = o->tp, .cp = 1, .ep = o->ep, .dp = dp, .pp = 1, .expert_tp = o->tp,
                                      .outer_dp = o->outer, .order = o->order, .rank_offset = o->offset};
    CALL(r, tcomms_fsdp_layout_create(&lp, &r->layout));
    int covered = 0;
    CALL(r, tcomms_fsdp_layout_size(r->layout, &covered));
    if (o->offset + covered > wsize)
        return failf(r, "the layout covers world ranks [%d, %d), but the world has %d", o->offset,
                     o->offset + covered, wsize);
    CALL(r, tcomms_fsdp_groups_create(world, r->layout, &r->groups));
    r->res->in_layout = r->groups.members != NULL;
    if (!r->groups.members)
        return 0;
    tcomms_fsdp_config_t c = {0};
    c.strategy = (tcomms_fsdp_strategy_t)o->strategy;
    c.outer = o->outer > 1 ? (o->hybrid ? TCOMMS_FSDP_OUTER_OPTIM : TCOMMS_FSDP_OUTER_REPLICATE)
                           : TCOMMS_FSDP_OUTER_NONE;
    c.main_dtype = r->mdt;
    c.prefetch_forward = c.prefetch_backward = o->prefetch;
    c.log_path = o->log_path;
    c.timeout_ms = o->timeout_ms;
    CALL(r, tcomms_fsdp_create(&r->groups, &c, &r->rt));
    if (find_coords(r, wrank) || alloc_buffers(r))
        return -1;
    return register_params(r, r->layout);
}

static void teardown(run_t *r)
{
    tcomms_fsdp_destroy(r->rt);
    tcomms_fsdp_groups_destroy(&r->groups);
    tcomms_fsdp_layout_free(r->layout);
    if (r->mbs)
        for (int m = 0; m < r->o->microbatches; m++) {
            for (int u = 0; u <= MLP_UNITS; u++)
                free(r->mbs[m].act[u]);
            free(r->mbs[m].y);
            free(r->mbs[m].ex_in);
            free(r->mbs[m].ex_out);
        }
    free(r->mbs);
    free(r->peer_lo);
    free(r->peer_n);
    free(r->scount);
    free(r->rcount);
    free(r->sendbuf);
    free(r->recvbuf);
    free(r->exdx);
    free(r->dcur);
    free(r->dnext);
    free(r->rid_of_gid);
    free(r->gid_of_rid);
}

/* ---- compute -------------------------------------------------------------------------------------------------- */

/* Send rows (stride `stride`) of this rank's tokens to their owners; they land in recvbuf, packed by source ep
 * rank, in token order. */
static int dispatch(run_t *r, const double *rows, size_t stride)
{
    size_t k = 0;
    for (int j = 0; j < r->ep; j++)
        for (int t = r->lo; t < r->lo + r->n; t++)
            if (owner(r, t) == j)
                memcpy(r->sendbuf + EXD * k++, rows + stride * (size_t)(t - r->lo), EXD * sizeof(double));
    CALL(r, tcomms_all_to_all_v(r->groups.ep, r->sendbuf, r->scount, NULL, r->recvbuf, r->rcount, NULL,
                                TCOMMS_FLOAT64, NULL, NULL));
    return 0;
}

/* The reverse of dispatch: rows computed for received tokens (packed as recvbuf) go back into `rows`. */
static int collect(run_t *r, const double *packed, double *rows, size_t stride)
{
    CALL(r, tcomms_all_to_all_v(r->groups.ep, packed, r->rcount, NULL, r->sendbuf, r->scount, NULL,
                                TCOMMS_FLOAT64, NULL, NULL));
    size_t k = 0;
    for (int j = 0; j < r->ep; j++)
        for (int t = r->lo; t < r->lo + r->n; t++)
            if (owner(r, t) == j)
                memcpy(rows + stride * (size_t)(t - r->lo), r->sendbuf + EXD * k++, EXD * sizeof(double));
    return 0;
}

/* The local expert index of the i-th received token. */
static int received_expert(const run_t *r, int i)
{
    for (int j = 0; j < r->ep; j++)
        for (int t = r->peer_lo[j]; t < r->peer_lo[j] + r->peer_n[j]; t++)
            if (owner(r, t) == r->eprank && i-- == 0)
                return t % r->E - r->elo;
    return -1;
}

static int param_data(run_t *r, int id, void **data)
{
    CALL(r, tcomms_fsdp_param_data(r->rt, id, data));
    return 0;
}

static int grad_data(run_t *r, int id, void **data)
{
    CALL(r, tcomms_fsdp_grad_data(r->rt, id, data));
    return 0;
}

static int forward_compute(run_t *r, int m, int u)
{
    mb_t *b = &r->mbs[m];
    int nin = mlp_dim_in(u), nout = mlp_dim_out(u), relu = mlp_relu(u);
    void *W, *bias;
    if (u != MLP_EXPERT_UNIT) {
        if (param_data(r, rid(r, u, 0, 0), &W) || param_data(r, rid(r, u, 0, 1), &bias))
            return -1;
        for (int t = 0; t < r->n; t++)
            mlp_linear_fwd(W, bias, r->cdt, nin, nout, relu, b->act[u] + MLP_MAX_DIM * t,
                           b->act[u + 1] + MLP_MAX_DIM * t);
    } else {
        if (dispatch(r, b->act[u], MLP_MAX_DIM))
            return -1;
        memcpy(b->ex_in, r->recvbuf, (size_t)r->nrecv * EXD * sizeof(double));
        for (int i = 0; i < r->nrecv; i++) {
            int k = received_expert(r, i);
            if (param_data(r, rid(r, u, r->elo + k, 0), &W) || param_data(r, rid(r, u, r->elo + k, 1), &bias))
                return -1;
            mlp_linear_fwd(W, bias, r->cdt, nin, nout, relu, b->ex_in + EXD * i, b->ex_out + EXD * i);
        }
        if (collect(r, b->ex_out, b->act[u + 1], MLP_MAX_DIM))
            return -1;
    }
    if (u == MLP_UNITS - 1) {
        double dout[MLP_OUT];
        for (int t = 0; t < r->n; t++)
            b->loss += mlp_loss(b->act[MLP_UNITS] + MLP_MAX_DIM * t, b->y + MLP_OUT * t, dout, r->grid);
    }
    return 0;
}

static int inexact(run_t *r, int u)
{
    return failf(r, "unit %d: a gradient contribution left the range where deterministic sums are exact", u);
}

/* Backward of unit u for microbatch m: dL/d(output) is in dcur, dL/d(input) goes to dnext. */
static int backward_compute(run_t *r, int m, int u)
{
    mb_t *b = &r->mbs[m];
    int nin = mlp_dim_in(u), nout = mlp_dim_out(u), relu = mlp_relu(u);
    void *W, *gW, *gb;
    if (u == MLP_UNITS - 1)
        for (int t = 0; t < r->n; t++)
            mlp_loss(b->act[MLP_UNITS] + MLP_MAX_DIM * t, b->y + MLP_OUT * t, r->dcur + MLP_MAX_DIM * t, 0);
    if (u != MLP_EXPERT_UNIT) {
        if (param_data(r, rid(r, u, 0, 0), &W) || grad_data(r, rid(r, u, 0, 0), &gW) ||
            grad_data(r, rid(r, u, 0, 1), &gb))
            return -1;
        for (int t = 0; t < r->n; t++)
            if (mlp_linear_bwd(W, r->cdt, nin, nout, relu, b->act[u] + MLP_MAX_DIM * t,
                               b->act[u + 1] + MLP_MAX_DIM * t, r->dcur + MLP_MAX_DIM * t,
                               u > 0 ? r->dnext + MLP_MAX_DIM * t : NULL, gW, gb, r->mdt, r->grid))
                return inexact(r, u);
    } else {
        if (dispatch(r, r->dcur, MLP_MAX_DIM))
            return -1;
        for (int i = 0; i < r->nrecv; i++) {
            int k = received_expert(r, i);
            if (param_data(r, rid(r, u, r->elo + k, 0), &W) || grad_data(r, rid(r, u, r->elo + k, 0), &gW) ||
                grad_data(r, rid(r, u, r->elo + k, 1), &gb))
                return -1;
            if (mlp_linear_bwd(W, r->cdt, nin, nout, relu, b->ex_in + EXD * i, b->ex_out + EXD * i,
                               r->recvbuf + EXD * i, r->exdx + EXD * i, gW, gb, r->mdt, r->grid))
                return inexact(r, u);
        }
        if (collect(r, r->exdx, r->dnext, MLP_MAX_DIM))
            return -1;
    }
    double *swap = r->dcur;
    r->dcur = r->dnext;
    r->dnext = swap;
    return 0;
}

/* ---- schedules ------------------------------------------------------------------------------------------------ */

static void load_microbatch(run_t *r, int step, int m)
{
    mb_t *b = &r->mbs[m];
    uint64_t first = ((uint64_t)step * (uint64_t)r->o->microbatches + (uint64_t)m) * (uint64_t)r->o->batch;
    for (int t = 0; t < r->n; t++)
        mlp_sample(r->o->seed, r->o->mode, first + (uint64_t)(r->lo + t), b->act[0] + MLP_MAX_DIM * t,
                   b->y + MLP_OUT * t);
    b->loss = 0.0;
}

static int forward_unit(run_t *r, int m, int u)
{
    CALL(r, tcomms_fsdp_pre_forward(r->rt, u));
    if (forward_compute(r, m, u))
        return -1;
    CALL(r, tcomms_fsdp_post_forward(r->rt, u));
    return 0;
}

static int backward_unit(run_t *r, int m, int u)
{
    CALL(r, tcomms_fsdp_pre_backward(r->rt, u));
    if (backward_compute(r, m, u))
        return -1;
    CALL(r, tcomms_fsdp_post_backward(r->rt, u));
    return 0;
}

static int standard_step(run_t *r)
{
    int M = r->o->microbatches;
    for (int m = 0; m < M; m++) {
        for (int u = 0; u < MLP_UNITS; u++)
            if (forward_unit(r, m, u))
                return -1;
        CALL(r, tcomms_fsdp_root_pre_backward(r->rt, m == M - 1));
        for (int u = MLP_UNITS - 1; u >= 0; u--)
            if (backward_unit(r, m, u))
                return -1;
        CALL(r, tcomms_fsdp_root_post_backward(r->rt));
    }
    return 0;
}

/* 1F1B: inside microbatch m's backward, unit i of microbatch m+1's forward runs beside unit L-1-i of m's backward,
 * both references held at once (the middle unit is then referenced in both directions). */
static int interleaved_step(run_t *r)
{
    int M = r->o->microbatches, L = MLP_UNITS;
    for (int u = 0; u < L; u++)
        if (forward_unit(r, 0, u))
            return -1;
    for (int m = 0; m < M; m++) {
        int fwd = m + 1 < M;
        CALL(r, tcomms_fsdp_root_pre_backward(r->rt, m == M - 1));
        for (int i = 0; i < L; i++) {
            int bu = L - 1 - i;
            if (fwd)
                CALL(r, tcomms_fsdp_pre_forward(r->rt, i));
            CALL(r, tcomms_fsdp_pre_backward(r->rt, bu));
            if ((fwd && forward_compute(r, m + 1, i)) || backward_compute(r, m, bu))
                return -1;
            if (fwd)
                CALL(r, tcomms_fsdp_post_forward(r->rt, i));
            CALL(r, tcomms_fsdp_post_backward(r->rt, bu));
        }
        CALL(r, tcomms_fsdp_root_post_backward(r->rt));
    }
    return 0;
}

static int optimizer_step(run_t *r)
{
    int count = 0;
    CALL(r, tcomms_fsdp_finish_grad_sync(r->rt));
    CALL(r, tcomms_fsdp_shard_count(r->rt, &count));
    for (int i = 0; i < count; i++) {
        tcomms_fsdp_shard_t s;
        CALL(r, tcomms_fsdp_shard(r->rt, i, &s));
        if (s.dtype != r->mdt)
            return failf(r, "shard %d has dtype %s, expected %s", i, tcomms_dtype_name(s.dtype),
                         tcomms_dtype_name(r->mdt));
        if (s.grad)
            mlp_sgd(s.main, s.grad, s.count, s.dtype, ldexp(1.0, r->o->lr_log2));
    }
    CALL(r, tcomms_fsdp_install_weights(r->rt));
    return 0;
}

static int train_steps(run_t *r)
{
    const mlp_opts_t *o = r->o;
    for (int s = 0; s < o->steps; s++) {
        for (int m = 0; m < o->microbatches; m++)
            load_microbatch(r, s, m);
        CALL(r, tcomms_fsdp_zero_grad(r->rt));
        if ((o->schedule == MLP_1F1B ? interleaved_step(r) : standard_step(r)) || optimizer_step(r))
            return -1;
        double loss = 0.0;
        for (int m = 0; m < o->microbatches; m++)
            loss += r->mbs[m].loss;
        CALL(r, tcomms_all_reduce(r->groups.dp_cp, &loss, &loss, 1, TCOMMS_FLOAT64, TCOMMS_SUM, NULL, NULL));
        if (r->res->losses)
            r->res->losses[s] = loss;
    }
    return 0;
}

static int read_params(run_t *r)
{
    double main[MLP_MAX_DIM * MLP_MAX_DIM];
    if (r->res->params)
        for (size_t i = 0; i < mlp_total(r->E); i++)
            r->res->params[i] = NAN;
    for (int i = 0; i < r->nrid; i++) {
        mlp_param_t p;
        mlp_param(r->E, r->gid_of_rid[i], &p);
        CALL(r, tcomms_fsdp_read_param(r->rt, i, main));
        if (r->res->params)
            for (size_t k = 0; k < p.numel; k++)
                r->res->params[p.offset + k] = mlp_load(main, r->mdt, k);
    }
    return 0;
}

int mlp_train_fsdp(tcomms_comm_t *world, const mlp_opts_t *o, mlp_result_t *res)
{
    run_t run;
    memset(&run, 0, sizeof run);
    run.o = o;
    run.res = res;
    res->err[0] = '\0';
    res->in_layout = 0;
    if (mlp_opts_check(o, res))
        return -1;
    run.cdt = mlp_compute_dtype(o);
    run.mdt = mlp_main_dtype(o);
    run.grid = o->mode == MLP_DETERMINISTIC ? MLP_GRID_BITS : 0;
    run.ep = o->ep;
    run.E = 2 * o->ep;
    run.per_ep = 2;
    int rc = setup(&run, world);
    if (rc == 0 && res->in_layout) {
        rc = train_steps(&run);
        if (rc == 0)
            rc = read_params(&run);
        if (rc == 0) { /* every rank of the layout must have issued the same collectives */
            tcomms_status_t st = tcomms_fsdp_check_issued(run.rt);
            if (st != TCOMMS_SUCCESS)
                rc = fail_call(&run, "tcomms_fsdp_check_issued", st);
        }
    }
    teardown(&run);
    /* Ranks outside the layout wait here for the others: world rank 0 serves the store that their splits and
     * collectives still rendezvous through, so it must not destroy the world while they train. */
    if (rc == 0) {
        tcomms_status_t st = tcomms_barrier(world, NULL, NULL);
        if (st != TCOMMS_SUCCESS)
            rc = fail_call(&run, "tcomms_barrier(world)", st);
    }
    return rc;
}
