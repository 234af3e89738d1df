/* SPDX-License-Identifier: BSD-3-Clause */
/* The FSDP trainer of fsdp_mlp (train.h, run.h): builds the layout and its communicators, registers one unit per
 * layer, and drives the runtime's entry points through a standard or an interleaved 1F1B schedule, computing through
 * a back end: the host one here (per sample, in double), or the CUDA one (cuda_train.c). The expert layer sends each
 * token to the ep rank owning expert (token % E) with all_to_all_v on groups.ep and back. */
#include "run.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mlp_run_failf(run_t *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->res->err, sizeof r->res->err, fmt, ap);
    va_end(ap);
    return -1;
}

int mlp_run_fail_call(run_t *r, const char *call, tcomms_status_t st)
{
    return mlp_run_failf(r, "%s: %s: %s", call, tcomms_strerror(st), tcomms_last_error());
}

int mlp_run_rid(const run_t *r, int unit, int expert, int bias)
{
    return r->rid_of_gid[mlp_param_id(r->E, unit, expert, bias)];
}

int mlp_run_owner(const run_t *r, int t) { return (t % r->E) / r->per_ep; }

/* ---- setup ---------------------------------------------------------------------------------------------------- */

/* This rank's data and expert coordinates from the layout, and the sample ranges of its ep peers. */
static int find_coords(run_t *r, int wrank)
{
    const mlp_opts_t *o = r->o;
    int g, ng, gs;
    MLP_CALL(r, tcomms_fsdp_layout_group_of(r->layout, TCOMMS_FSDP_GROUP_DP, wrank, &g, &r->dprank));
    MLP_CALL(r, tcomms_fsdp_layout_groups(r->layout, TCOMMS_FSDP_GROUP_DP, &ng, &r->dp, NULL, 0));
    MLP_CALL(r, tcomms_fsdp_layout_groups(r->layout, TCOMMS_FSDP_GROUP_EP, &ng, &gs, NULL, 0));
    if (gs != r->ep)
        return mlp_run_failf(r, "layout: ep groups of %d ranks, expected --ep %d", gs, r->ep);
    int *ranks = malloc(sizeof(int) * (size_t)ng * (size_t)gs);
    r->peer_lo = calloc((size_t)gs, sizeof(int));
    r->peer_n = calloc((size_t)gs, sizeof(int));
    if (!ranks || !r->peer_lo || !r->peer_n) {
        free(ranks);
        return mlp_run_failf(r, "out of memory");
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
        return mlp_run_fail_call(r, "tcomms_fsdp_layout_groups/group_of (ep)", st);
    int commrank = -1;
    MLP_CALL(r, tcomms_comm_rank(r->groups.ep, &commrank));
    if (commrank != r->eprank)
        return mlp_run_failf(r, "groups.ep: rank %d, but the layout puts world rank %d at ep index %d", commrank,
                             wrank, r->eprank);
    r->lo = r->peer_lo[r->eprank];
    r->n = r->peer_n[r->eprank];
    r->elo = r->eprank * r->per_ep;
    return 0;
}

/* Exchange sizes of the expert layer. */
static int exchange_counts(run_t *r)
{
    r->scount = calloc((size_t)r->ep, sizeof(size_t));
    r->rcount = calloc((size_t)r->ep, sizeof(size_t));
    if (!r->scount || !r->rcount)
        return mlp_run_failf(r, "out of memory");
    r->nrecv = 0;
    for (int j = 0; j < r->ep; j++) {
        for (int t = r->lo; t < r->lo + r->n; t++)
            r->scount[j] += (size_t)(mlp_run_owner(r, t) == j) * EXD;
        for (int t = r->peer_lo[j]; t < r->peer_lo[j] + r->peer_n[j]; t++)
            r->rcount[j] += (size_t)(mlp_run_owner(r, t) == r->eprank) * EXD;
        r->nrecv += (int)(r->rcount[j] / EXD);
    }
    return 0;
}

/* ---- host back end -------------------------------------------------------------------------------------------- */

/* The buffers every microbatch uses. */
static int host_alloc(run_t *r)
{
    const mlp_opts_t *o = r->o;
    size_t rows = (size_t)r->n + 1, rrows = (size_t)r->nrecv + 1;
    r->sendbuf = malloc(rows * EXD * sizeof(double));
    r->recvbuf = malloc(rrows * EXD * sizeof(double));
    r->exdx = malloc(rrows * EXD * sizeof(double));
    r->dcur = malloc(rows * MLP_MAX_DIM * sizeof(double));
    r->dnext = malloc(rows * MLP_MAX_DIM * sizeof(double));
    r->mbs = calloc((size_t)o->microbatches, sizeof(mb_t));
    if (!r->sendbuf || !r->recvbuf || !r->exdx || !r->dcur || !r->dnext || !r->mbs)
        return mlp_run_failf(r, "out of memory");
    for (int m = 0; m < o->microbatches; m++) {
        mb_t *b = &r->mbs[m];
        for (int u = 0; u <= MLP_UNITS; u++)
            if (!(b->act[u] = calloc(rows * MLP_MAX_DIM, sizeof(double))))
                return mlp_run_failf(r, "out of memory");
        b->y = calloc(rows * MLP_OUT, sizeof(double));
        b->ex_in = calloc(rrows * EXD, sizeof(double));
        b->ex_out = calloc(rrows * EXD, sizeof(double));
        if (!b->y || !b->ex_in || !b->ex_out)
            return mlp_run_failf(r, "out of memory");
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
        return mlp_run_failf(r, "out of memory");
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
        MLP_CALL(r, tcomms_fsdp_register_param(r->rt, name, shape, p.bias ? 1 : 2, r->cdt, p.unit,
                                           p.expert >= 0 ? TCOMMS_FSDP_PARAM_EXPERT : 0u, &id));
        if (id != r->nrid)
            return mlp_run_failf(r, "tcomms_fsdp_register_param gave id %d to parameter %d (%s)", id, r->nrid, name);
        r->rid_of_gid[g] = id;
        r->gid_of_rid[r->nrid++] = g;
    }
    MLP_CALL(r, tcomms_fsdp_finalize(r->rt, layout));
    double vals[MLP_MAX_DIM * MLP_MAX_DIM];
    double main[MLP_MAX_DIM * MLP_MAX_DIM];
    for (int i = 0; i < r->nrid; i++) {
        mlp_param_t p;
        mlp_param(r->E, r->gid_of_rid[i], &p);
        mlp_init_param(r->o->seed, r->o->mode, r->E, r->gid_of_rid[i], vals);
        for (size_t k = 0; k < p.numel; k++)
            mlp_store(main, r->mdt, k, vals[k]);
        MLP_CALL(r, tcomms_fsdp_load_param(r->rt, i, main));
    }
    return 0;
}

static int setup(run_t *r, tcomms_comm_t *world)
{
    const mlp_opts_t *o = r->o;
    int wsize, wrank;
    MLP_CALL(r, tcomms_comm_size(world, &wsize));
    MLP_CALL(r, tcomms_comm_rank(world, &wrank));
    int dp = o->dp > 0 ? o->dp : (wsize - o->offset) / (o->tp > 0 ? o->tp : 1);
    tcomms_fsdp_layout_params_t lp = {.tp = o->tp, .cp = 1, .ep = o->ep, .dp = dp, .pp = 1, .expert_tp = o->tp,
                                      .outer_dp = o->outer, .order = o->order, .rank_offset = o->offset};
    MLP_CALL(r, tcomms_fsdp_layout_create(&lp, &r->layout));
    int covered = 0;
    MLP_CALL(r, tcomms_fsdp_layout_size(r->layout, &covered));
    if (o->offset + covered > wsize)
        return mlp_run_failf(r, "the layout covers world ranks [%d, %d), but the world has %d", o->offset,
                     o->offset + covered, wsize);
    MLP_CALL(r, tcomms_fsdp_groups_create(world, r->layout, &r->groups));
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
    if (r->be->configure && r->be->configure(r, &c))
        return -1;
    MLP_CALL(r, tcomms_fsdp_create(&r->groups, &c, &r->rt));
    if (find_coords(r, wrank) || exchange_counts(r) || r->be->alloc(r))
        return -1;
    return register_params(r, r->layout);
}

static void host_release(run_t *r)
{
    if (r->mbs)
        for (int m = 0; m < r->o->microbatches; m++) {
            for (int u = 0; u <= MLP_UNITS; u++)
                free(r->mbs[m].act[u]);
            free(r->mbs[m].y);
            free(r->mbs[m].ex_in);
            free(r->mbs[m].ex_out);
        }
    free(r->mbs);
    free(r->sendbuf);
    free(r->recvbuf);
    free(r->exdx);
    free(r->dcur);
    free(r->dnext);
}

static void teardown(run_t *r)
{
    tcomms_fsdp_destroy(r->rt);
    tcomms_fsdp_groups_destroy(&r->groups);
    tcomms_fsdp_layout_free(r->layout);
    r->be->release(r); /* last: the runtime and the communicators may still use a back end's stream */
    free(r->peer_lo);
    free(r->peer_n);
    free(r->scount);
    free(r->rcount);
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
            if (mlp_run_owner(r, t) == j)
                memcpy(r->sendbuf + EXD * k++, rows + stride * (size_t)(t - r->lo), EXD * sizeof(double));
    MLP_CALL(r, tcomms_all_to_all_v(r->groups.ep, r->sendbuf, r->scount, NULL, r->recvbuf, r->rcount, NULL,
                                TCOMMS_FLOAT64, NULL, NULL));
    return 0;
}

/* The reverse of dispatch: rows computed for received tokens (packed as recvbuf) go back into `rows`. */
static int collect(run_t *r, const double *packed, double *rows, size_t stride)
{
    MLP_CALL(r, tcomms_all_to_all_v(r->groups.ep, packed, r->rcount, NULL, r->sendbuf, r->scount, NULL,
                                TCOMMS_FLOAT64, NULL, NULL));
    size_t k = 0;
    for (int j = 0; j < r->ep; j++)
        for (int t = r->lo; t < r->lo + r->n; t++)
            if (mlp_run_owner(r, t) == j)
                memcpy(rows + stride * (size_t)(t - r->lo), r->sendbuf + EXD * k++, EXD * sizeof(double));
    return 0;
}

int mlp_run_received_expert(const run_t *r, int i)
{
    for (int j = 0; j < r->ep; j++)
        for (int t = r->peer_lo[j]; t < r->peer_lo[j] + r->peer_n[j]; t++)
            if (mlp_run_owner(r, t) == r->eprank && i-- == 0)
                return t % r->E - r->elo;
    return -1;
}

int mlp_run_weights(run_t *r, int unit, int expert, void **W, void **b)
{
    MLP_CALL(r, tcomms_fsdp_param_data(r->rt, mlp_run_rid(r, unit, expert, 0), W));
    if (b)
        MLP_CALL(r, tcomms_fsdp_param_data(r->rt, mlp_run_rid(r, unit, expert, 1), b));
    return 0;
}

int mlp_run_grads(run_t *r, int unit, int expert, void **gW, void **gb)
{
    MLP_CALL(r, tcomms_fsdp_grad_data(r->rt, mlp_run_rid(r, unit, expert, 0), gW));
    MLP_CALL(r, tcomms_fsdp_grad_data(r->rt, mlp_run_rid(r, unit, expert, 1), gb));
    return 0;
}

static int host_forward(run_t *r, int m, int u)
{
    mb_t *b = &r->mbs[m];
    int nin = mlp_dim_in(u), nout = mlp_dim_out(u), relu = mlp_relu(u);
    void *W, *bias;
    if (u != MLP_EXPERT_UNIT) {
        if (mlp_run_weights(r, u, 0, &W, &bias))
            return -1;
        for (int t = 0; t < r->n; t++)
            mlp_linear_fwd(W, bias, r->cdt, nin, nout, relu, b->act[u] + MLP_MAX_DIM * t,
                           b->act[u + 1] + MLP_MAX_DIM * t);
    } else {
        if (dispatch(r, b->act[u], MLP_MAX_DIM))
            return -1;
        memcpy(b->ex_in, r->recvbuf, (size_t)r->nrecv * EXD * sizeof(double));
        for (int i = 0; i < r->nrecv; i++) {
            int k = mlp_run_received_expert(r, i);
            if (mlp_run_weights(r, u, r->elo + k, &W, &bias))
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
    return mlp_run_failf(r, "unit %d: a gradient contribution left the range where deterministic sums are exact", u);
}

/* Backward of unit u for microbatch m: dL/d(output) is in dcur, dL/d(input) goes to dnext. */
static int host_backward(run_t *r, int m, int u)
{
    mb_t *b = &r->mbs[m];
    int nin = mlp_dim_in(u), nout = mlp_dim_out(u), relu = mlp_relu(u);
    void *W, *gW, *gb;
    if (u == MLP_UNITS - 1)
        for (int t = 0; t < r->n; t++)
            mlp_loss(b->act[MLP_UNITS] + MLP_MAX_DIM * t, b->y + MLP_OUT * t, r->dcur + MLP_MAX_DIM * t, 0);
    if (u != MLP_EXPERT_UNIT) {
        if (mlp_run_weights(r, u, 0, &W, NULL) || mlp_run_grads(r, u, 0, &gW, &gb))
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
            int k = mlp_run_received_expert(r, i);
            if (mlp_run_weights(r, u, r->elo + k, &W, NULL) || mlp_run_grads(r, u, r->elo + k, &gW, &gb))
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

static int host_load_microbatch(run_t *r, int step, int m)
{
    mb_t *b = &r->mbs[m];
    uint64_t first = ((uint64_t)step * (uint64_t)r->o->microbatches + (uint64_t)m) * (uint64_t)r->o->batch;
    for (int t = 0; t < r->n; t++)
        mlp_sample(r->o->seed, r->o->mode, first + (uint64_t)(r->lo + t), b->act[0] + MLP_MAX_DIM * t,
                   b->y + MLP_OUT * t);
    b->loss = 0.0;
    return 0;
}

static int host_sgd(run_t *r, const tcomms_fsdp_shard_t *s, double lr)
{
    (void)r;
    mlp_sgd(s->main, s->grad, s->count, s->dtype, lr);
    return 0;
}

static int host_step_loss(run_t *r, double *loss)
{
    *loss = 0.0;
    for (int m = 0; m < r->o->microbatches; m++)
        *loss += r->mbs[m].loss;
    MLP_CALL(r, tcomms_all_reduce(r->groups.dp_cp, loss, loss, 1, TCOMMS_FLOAT64, TCOMMS_SUM, NULL, NULL));
    return 0;
}

static const mlp_backend_t host_backend = {
    .alloc = host_alloc,
    .release = host_release,
    .load_microbatch = host_load_microbatch,
    .forward = host_forward,
    .backward = host_backward,
    .sgd = host_sgd,
    .step_loss = host_step_loss,
};

/* ---- schedules ------------------------------------------------------------------------------------------------ */


static int forward_unit(run_t *r, int m, int u)
{
    MLP_CALL(r, tcomms_fsdp_pre_forward(r->rt, u));
    if (r->be->forward(r, m, u))
        return -1;
    MLP_CALL(r, tcomms_fsdp_post_forward(r->rt, u));
    return 0;
}

static int backward_unit(run_t *r, int m, int u)
{
    MLP_CALL(r, tcomms_fsdp_pre_backward(r->rt, u));
    if (r->be->backward(r, m, u))
        return -1;
    MLP_CALL(r, tcomms_fsdp_post_backward(r->rt, u));
    return 0;
}

static int standard_step(run_t *r)
{
    int M = r->o->microbatches;
    for (int m = 0; m < M; m++) {
        for (int u = 0; u < MLP_UNITS; u++)
            if (forward_unit(r, m, u))
                return -1;
        MLP_CALL(r, tcomms_fsdp_root_pre_backward(r->rt, m == M - 1));
        for (int u = MLP_UNITS - 1; u >= 0; u--)
            if (backward_unit(r, m, u))
                return -1;
        MLP_CALL(r, tcomms_fsdp_root_post_backward(r->rt));
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
        MLP_CALL(r, tcomms_fsdp_root_pre_backward(r->rt, m == M - 1));
        for (int i = 0; i < L; i++) {
            int bu = L - 1 - i;
            if (fwd)
                MLP_CALL(r, tcomms_fsdp_pre_forward(r->rt, i));
            MLP_CALL(r, tcomms_fsdp_pre_backward(r->rt, bu));
            if ((fwd && r->be->forward(r, m + 1, i)) || r->be->backward(r, m, bu))
                return -1;
            if (fwd)
                MLP_CALL(r, tcomms_fsdp_post_forward(r->rt, i));
            MLP_CALL(r, tcomms_fsdp_post_backward(r->rt, bu));
        }
        MLP_CALL(r, tcomms_fsdp_root_post_backward(r->rt));
    }
    return 0;
}

/* Odd steps sync each piece just before stepping it, last piece first (backward finishes the last units first),
 * so the optimizer overlaps the last reductions; even steps sync them all at once. Both give the same values. */
static int optimizer_step(run_t *r, int step)
{
    int count = 0, each = step % 2;
    if (!each)
        MLP_CALL(r, tcomms_fsdp_finish_grad_sync(r->rt));
    MLP_CALL(r, tcomms_fsdp_shard_count(r->rt, &count));
    for (int j = 0; j < count; j++) {
        int i = each ? count - 1 - j : j;
        if (each)
            MLP_CALL(r, tcomms_fsdp_sync_shard(r->rt, i));
        tcomms_fsdp_shard_t s;
        MLP_CALL(r, tcomms_fsdp_shard(r->rt, i, &s));
        if (s.dtype != r->mdt)
            return mlp_run_failf(r, "shard %d has dtype %s, expected %s", i, tcomms_dtype_name(s.dtype),
                         tcomms_dtype_name(r->mdt));
        if (s.grad && r->be->sgd(r, &s, ldexp(1.0, r->o->lr_log2)))
            return -1;
    }
    MLP_CALL(r, tcomms_fsdp_install_weights(r->rt));
    return 0;
}

static int train_steps(run_t *r)
{
    const mlp_opts_t *o = r->o;
    for (int s = 0; s < o->steps; s++) {
        for (int m = 0; m < o->microbatches; m++)
            if (r->be->load_microbatch(r, s, m))
                return -1;
        MLP_CALL(r, tcomms_fsdp_zero_grad(r->rt));
        if ((o->schedule == MLP_1F1B ? interleaved_step(r) : standard_step(r)) || optimizer_step(r, s))
            return -1;
        double loss = 0.0;
        if (r->be->step_loss(r, &loss))
            return -1;
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
        MLP_CALL(r, tcomms_fsdp_read_param(r->rt, i, main));
        if (r->res->params)
            for (size_t k = 0; k < p.numel; k++)
                r->res->params[p.offset + k] = mlp_load(main, r->mdt, k);
    }
    return 0;
}

int mlp_train_fsdp(tcomms_comm_t *world, const mlp_opts_t *o, mlp_result_t *res)
{
    return mlp_train_fsdp_on(world, o, res, &host_backend);
}

int mlp_train_fsdp_on(tcomms_comm_t *world, const mlp_opts_t *o, mlp_result_t *res, const mlp_backend_t *be)
{
    run_t run;
    memset(&run, 0, sizeof run);
    run.o = o;
    run.be = be;
    run.res = res;
    res->err[0] = '\0';
    res->in_layout = 0;
    if (mlp_opts_check(o, res))
        return -1;
    run.cdt = mlp_compute_dtype(o);
    run.mdt = mlp_main_dtype(o);
    run.grid = mlp_exact(o->mode) ? MLP_GRID_BITS : 0;
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
                rc = mlp_run_fail_call(&run, "tcomms_fsdp_check_issued", st);
        }
    }
    teardown(&run);
    /* Ranks outside the layout wait here for the others: world rank 0 serves the store that their splits and
     * collectives still rendezvous through, so it must not destroy the world while they train. */
    if (rc == 0) {
        tcomms_status_t st = tcomms_barrier(world, NULL, NULL);
        if (st != TCOMMS_SUCCESS)
            rc = mlp_run_fail_call(&run, "tcomms_barrier(world)", st);
    }
    return rc;
}
