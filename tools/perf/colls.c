/* SPDX-License-Identifier: BSD-3-Clause */
/* The descriptor table of tcomms-perf (see colls.h): for each collective its layout for a swept size, its
 * bus-bandwidth factor (as nccl-tests), the public tcomms call, and the value each received element must hold.
 *
 * Sizes: with c = size / element size, collectives whose count is the whole message (all_reduce, broadcast,
 * reduce, sendrecv) take count = c; the others take b = c / nranks per rank (rounded down, so a size too small for
 * one element per rank gives count 0). The v-variants spread n * b elements unequally: rank k's weight is
 * w[k] = floor(2b(k+1)/(n+1)) for k < n-1 and the rest for the last rank (a ramp summing to n * b), so their size
 * column matches the equal variants. all_gather_v and reduce_scatter_v give rank k w[k] elements; in alltoall_v
 * rank i sends w[(i+j) % n] elements to rank j (symmetric, so every rank sends and receives n * b). */
#include "colls.h"

#include <string.h>

#include "values.h"

static double factor_allreduce(int n) { return n > 0 ? 2.0 * (n - 1) / n : 0.0; }
static double factor_shared(int n) { return n > 0 ? (double)(n - 1) / n : 0.0; }
static double factor_one(int n) { (void)n; return 1.0; }

/* The handle slot of the next posted operation, or NULL to block. */
static tcomms_work_t **slot(perf_works_t *w)
{
    return w ? &w->h[w->n++] : NULL;
}

/* Shapes shared by several collectives: "whole" sends and receives c elements; "spread" moves b per rank. */
static void whole(size_t c, size_t es, perf_layout_t *l)
{
    l->count = l->send_elems = l->recv_elems = l->ip_elems = c;
    l->send_ip = l->recv_ip = 0;
    l->bytes = c * es;
}

static void spread(const perf_ctx_t *x, size_t c, perf_layout_t *l)
{
    size_t b = c / (size_t)x->nranks;
    l->count = b;
    l->ip_elems = b * (size_t)x->nranks;
    l->bytes = l->ip_elems * x->esize;
}

/* ---- v-variant weights: vec = [w | displs | a2a counts | a2a displs | a2a source offsets], n entries each ---- */

static void weights(const perf_ctx_t *x, size_t c, perf_layout_t *l)
{
    size_t n = (size_t)x->nranks, b = c / n, used = 0, *w = l->vec, *displs = l->vec + n;
    spread(x, c, l);
    for (size_t k = 0; k < n; k++) {
        w[k] = k + 1 < n ? 2 * b * (k + 1) / (n + 1) : n * b - used;
        displs[k] = used;
        used += w[k];
    }
}

/* The block holding element i of a packed layout (displs ascending): the last block starting at or before i,
 * which is never an empty one since i lies before the end of the data. */
static size_t block_of(const size_t *displs, size_t n, size_t i)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        size_t mid = (lo + hi + 1) / 2;
        if (displs[mid] <= i)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* ---- all_reduce, broadcast, reduce, sendrecv: count = c ------------------------------------------------------ */

static void lay_all_reduce(const perf_ctx_t *x, size_t c, perf_layout_t *l) { whole(c, x->esize, l); }

static tcomms_status_t run_all_reduce(const perf_ctx_t *x, const perf_layout_t *l, const void *s, void *r,
                                      perf_works_t *w)
{
    return tcomms_all_reduce(x->comm, s, r, l->count, x->dtype, x->op, x->opts, slot(w));
}

static double exp_reduced(const perf_ctx_t *x, const perf_layout_t *l, size_t i)
{
    (void)l;
    return perf_reduced(x, i);
}

static void lay_broadcast(const perf_ctx_t *x, size_t c, perf_layout_t *l)
{
    whole(c, x->esize, l);
    l->send_elems = x->rank == x->root ? c : 0;
}

static tcomms_status_t run_broadcast(const perf_ctx_t *x, const perf_layout_t *l, const void *s, void *r,
                                     perf_works_t *w)
{
    (void)s; /* TCOMMS_COLL_ONE_BUFFER: the root's data are in r */
    return tcomms_broadcast(x->comm, r, l->count, x->dtype, x->root, x->opts, slot(w));
}

static double exp_broadcast(const perf_ctx_t *x, const perf_layout_t *l, size_t i)
{
    (void)l;
    return perf_mov_value(x->root, i);
}

static void lay_reduce(const perf_ctx_t *x, size_t c, perf_layout_t *l)
{
    whole(c, x->esize, l);
    l->recv_elems = x->rank == x->root ? c : 0;
}

static tcomms_status_t run_reduce(const perf_ctx_t *x, const perf_layout_t *l, const void *s, void *r,
                                  perf_works_t *w)
{
    return tcomms_reduce(x->comm, s, r, l->count, x->dtype, x->op, x->root, x->opts, slot(w));
}

static tcomms_status_t run_sendrecv(const perf_ctx_t *x, const perf_layout_t *l, const void *s, void *r,
                                    perf_works_t *w)
{
    int next = (x->rank + 1) % x->nranks, prev = (x->rank + x->nranks - 1) % x->nranks;
    tcomms_work_t *pair[2] = {NULL, NULL};
    /* Receive and send are posted together, in one group as nccl-tests does: on a device backend two separate
     * kernels on one stream would each wait for the peer's other half, queued behind them. */
    tcomms_status_t st = tcomms_group_start();
    if (st == TCOMMS_SUCCESS)
        st = tcomms_recv(x->comm, r, l->count, x->dtype, prev, x->opts, w ? slot(w) : &pair[0]);
    if (st == TCOMMS_SUCCESS)
        st = tcomms_send(x->comm, s, l->count, x->dtype, next, x->opts, w ? slot(w) : &pair[1]);
    tcomms_status_t gst = tcomms_group_end();
    if (st == TCOMMS_SUCCESS)
        st = gst;
    for (int k = 0; k < 2; k++) {
        tcomms_status_t wst = pair[k] ? tcomms_work_wait(pair[k], 0) : TCOMMS_SUCCESS;
        if (st == TCOMMS_SUCCESS)
            st = wst;
        tcomms_work_free(pair[k]);
    }
    return st;
}

static double exp_sendrecv(const perf_ctx_t *x, const perf_layout_t *l, size_t i)
{
    (void)l;
    return perf_mov_value((x->rank + x->nranks - 1) % x->nranks, i);
}

/* ---- all_gather, reduce_scatter, alltoall, gather, scatter: b per rank --------------------------------------- */

static void lay_all_gather(const perf_ctx_t *x, size_t c, perf_layout_t *l)
{
    spread(x, c, l);
    l->send_elems = l->count;
    l->recv_elems = l->ip_elems;
    l->send_ip = (size_t)x->rank * l->count;
    l->recv_ip = 0;
}

static tcomms_status_t run_all_gather(const perf_ctx_t *x, const perf_layout_t *l, const void *s, void *r,
                                      perf_works_t *w)
{
    return tcomms_all_gather(x->comm, s, r, l->count, x->dtype, x->opts, slot(w));
}

static double exp_gathered(const perf_ctx_t *x, const perf_layout_t *l, size_t i)
{
    (void)x;
    return perf_mov_value((int)(i / l->count), i % l->count);
}

static void lay_reduce_scatter(const perf_ctx_t *x, size_t c, perf_layout_t *l)
{
    spread(x, c, l);
    l->send_elems = l->ip_elems;
    l->recv_elems = l->count;
    l->send_ip = 0;
    l->recv_ip = (size_t)x->rank * l->count;
}

static tcomms_status_t run_reduce_scatter(const perf_ctx_t *x, const perf_layout_t *l, const void *s, void *r,
                                          perf_works_t *w)
{
    return tcomms_reduce_scatter(x->comm, s, r, l->count, x->dtype, x->op, x->opts, slot(w));
}

static double exp_reduce_scatter(const perf_ctx_t *x, const perf_layout_t *l, size_t i)
{
    return perf_reduced(x, (size_t)x->rank * l->count + i);
}

static void lay_alltoall(const perf_ctx_t *x, size_t c, perf_layout_t *l)
{
    spread(x, c, l);
    l->send_elems = l->recv_elems = l->ip_elems;
    l->send_ip = l->recv_ip = 0;
}

static tcomms_status_t run_alltoall(const perf_ctx_t *x, const perf_layout_t *l, const void *s, void *r,
                                    perf_works_t *w)
{
    return tcomms_all_to_all(x->comm, s, r, l->count, x->dtype, x->opts, slot(w));
}

static double exp_alltoall(const perf_ctx_t *x, const perf_layout_t *l, size_t i)
{
    return perf_mov_value((int)(i / l->count), (size_t)x->rank * l->count + i % l->count);
}

static void lay_gather(const perf_ctx_t *x, size_t c, perf_layout_t *l)
{
    lay_all_gather(x, c, l);
    if (x->rank != x->root)
        l->recv_elems = 0;
}

static tcomms_status_t run_gather(const perf_ctx_t *x, const perf_layout_t *l, const void *s, void *r,
                                  perf_works_t *w)
{
    return tcomms_gather(x->comm, s, r, l->count, x->dtype, x->root, x->opts, slot(w));
}

static void lay_scatter(const perf_ctx_t *x, size_t c, perf_layout_t *l)
{
    lay_reduce_scatter(x, c, l);
    if (x->rank != x->root)
        l->send_elems = 0;
}

static tcomms_status_t run_scatter(const perf_ctx_t *x, const perf_layout_t *l, const void *s, void *r,
                                   perf_works_t *w)
{
    return tcomms_scatter(x->comm, s, r, l->count, x->dtype, x->root, x->opts, slot(w));
}

static double exp_scatter(const perf_ctx_t *x, const perf_layout_t *l, size_t i)
{
    return perf_mov_value(x->root, (size_t)x->rank * l->count + i);
}

/* ---- v-variants ---------------------------------------------------------------------------------------------- */

static void lay_all_gather_v(const perf_ctx_t *x, size_t c, perf_layout_t *l)
{
    weights(x, c, l);
    l->send_elems = l->vec[x->rank];
    l->recv_elems = l->ip_elems;
    l->send_ip = l->vec[x->nranks + x->rank];
    l->recv_ip = 0;
}

static tcomms_status_t run_all_gather_v(const perf_ctx_t *x, const perf_layout_t *l, const void *s, void *r,
                                        perf_works_t *w)
{
    return tcomms_all_gather_v(x->comm, s, r, l->vec, l->vec + x->nranks, x->dtype, x->opts, slot(w));
}

static double exp_all_gather_v(const perf_ctx_t *x, const perf_layout_t *l, size_t i)
{
    const size_t *displs = l->vec + x->nranks;
    size_t j = block_of(displs, (size_t)x->nranks, i);
    return perf_mov_value((int)j, i - displs[j]);
}

static void lay_reduce_scatter_v(const perf_ctx_t *x, size_t c, perf_layout_t *l)
{
    weights(x, c, l);
    l->send_elems = l->ip_elems;
    l->recv_elems = l->vec[x->rank];
    l->send_ip = 0;
    l->recv_ip = l->vec[x->nranks + x->rank];
}

static tcomms_status_t run_reduce_scatter_v(const perf_ctx_t *x, const perf_layout_t *l, const void *s, void *r,
                                            perf_works_t *w)
{
    return tcomms_reduce_scatter_v(x->comm, s, r, l->vec, x->dtype, x->op, x->opts, slot(w));
}

static double exp_reduce_scatter_v(const perf_ctx_t *x, const perf_layout_t *l, size_t i)
{
    return perf_reduced(x, l->vec[x->nranks + x->rank] + i);
}

static void lay_alltoall_v(const perf_ctx_t *x, size_t c, perf_layout_t *l)
{
    size_t n = (size_t)x->nranks, me = (size_t)x->rank;
    size_t *w = l->vec, *counts = l->vec + 2 * n, *displs = l->vec + 3 * n, *src = l->vec + 4 * n;
    weights(x, c, l);
    l->send_elems = l->recv_elems = l->ip_elems;
    l->send_ip = l->recv_ip = 0;
    size_t at = 0;
    for (size_t j = 0; j < n; j++) {
        counts[j] = w[(me + j) % n]; /* what this rank sends to j, and receives from j */
        displs[j] = at;
        at += counts[j];
        src[j] = 0; /* where rank j's block for this rank starts in j's send buffer */
        for (size_t t = 0; t < me; t++)
            src[j] += w[(j + t) % n];
    }
}

static tcomms_status_t run_alltoall_v(const perf_ctx_t *x, const perf_layout_t *l, const void *s, void *r,
                                      perf_works_t *w)
{
    const size_t *counts = l->vec + 2 * (size_t)x->nranks, *displs = l->vec + 3 * (size_t)x->nranks;
    return tcomms_all_to_all_v(x->comm, s, counts, displs, r, counts, displs, x->dtype, x->opts, slot(w));
}

static double exp_alltoall_v(const perf_ctx_t *x, const perf_layout_t *l, size_t i)
{
    size_t n = (size_t)x->nranks;
    const size_t *displs = l->vec + 3 * n, *src = l->vec + 4 * n;
    size_t j = block_of(displs, n, i);
    return perf_mov_value((int)j, src[j] + i - displs[j]);
}

/* ---- the table, in the order `all` runs it ------------------------------------------------------------------- */

const perf_coll_t perf_colls[] = {
    {"all_reduce", TCOMMS_COLL_ALL_REDUCE, factor_allreduce, lay_all_reduce, run_all_reduce, exp_reduced},
    {"all_gather", TCOMMS_COLL_ALL_GATHER, factor_shared, lay_all_gather, run_all_gather, exp_gathered},
    {"reduce_scatter", TCOMMS_COLL_REDUCE_SCATTER, factor_shared, lay_reduce_scatter, run_reduce_scatter,
     exp_reduce_scatter},
    {"broadcast", TCOMMS_COLL_BROADCAST, factor_one, lay_broadcast, run_broadcast, exp_broadcast},
    {"reduce", TCOMMS_COLL_REDUCE, factor_one, lay_reduce, run_reduce, exp_reduced},
    {"alltoall", TCOMMS_COLL_ALL_TO_ALL, factor_shared, lay_alltoall, run_alltoall, exp_alltoall},
    {"gather", TCOMMS_COLL_GATHER, factor_shared, lay_gather, run_gather, exp_gathered},
    {"scatter", TCOMMS_COLL_SCATTER, factor_shared, lay_scatter, run_scatter, exp_scatter},
    {"sendrecv", TCOMMS_COLL_SEND, factor_one, lay_all_reduce, run_sendrecv, exp_sendrecv},
    {"all_gather_v", TCOMMS_COLL_ALL_GATHER_V, factor_shared, lay_all_gather_v, run_all_gather_v, exp_all_gather_v},
    {"reduce_scatter_v", TCOMMS_COLL_REDUCE_SCATTER_V, factor_shared, lay_reduce_scatter_v, run_reduce_scatter_v,
     exp_reduce_scatter_v},
    {"alltoall_v", TCOMMS_COLL_ALL_TO_ALL_V, factor_shared, lay_alltoall_v, run_alltoall_v, exp_alltoall_v},
};
const size_t perf_ncolls = sizeof perf_colls / sizeof perf_colls[0];

/* `name` without underscores and without a trailing "_perf" (nccl-tests' binary names) into `out`. */
static void squeeze(const char *name, char *out, size_t len)
{
    size_t n = strlen(name), k = 0;
    if (n > 5 && strcmp(name + n - 5, "_perf") == 0)
        n -= 5;
    for (size_t i = 0; i < n && k + 1 < len; i++)
        if (name[i] != '_')
            out[k++] = name[i];
    out[k] = '\0';
}

/* Our names, nccl-tests' binary names (all_reduce_perf, alltoallv_perf) and both without underscores
 * (allreduce): underscores never tell two collectives apart, so they are ignored. */
const perf_coll_t *perf_coll_find(const char *name)
{
    char want[64], have[64];
    if (strlen(name) >= sizeof want)
        return NULL;
    squeeze(name, want, sizeof want);
    for (size_t k = 0; k < perf_ncolls; k++) {
        squeeze(perf_colls[k].name, have, sizeof have);
        if (strcmp(have, want) == 0)
            return &perf_colls[k];
    }
    return NULL;
}

double perf_send_value(const perf_ctx_t *c, const perf_coll_t *coll, int rank, size_t i)
{
    return (perf_coll_flags(coll) & TCOMMS_COLL_REDUCES) ? perf_red_value(c, rank, i) : perf_mov_value(rank, i);
}
