/* SPDX-License-Identifier: BSD-3-Clause */
/* FSDP runtime object: configuration, parameter registration, finalize (layout of buckets, communicator and
 * configuration checks across ranks, allocation), the unit order, and destroy. The per-step work lives in
 * gather.c and reduce.c; rt.h lists the files. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../log.h"
#include "groups.h"
#include "rt.h"

#define MAX_UNIT (1 << 20) /* units index a dense array */

tcomms_status_t tc_fsdp_ready(const tcomms_fsdp_t *rt, const char *fn)
{
    if (rt == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: fsdp is NULL", fn);
    if (!rt->finalized)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: called before tcomms_fsdp_finalize", fn);
    if (rt->failed != TCOMMS_SUCCESS)
        return tc_error(TCOMMS_ERR_ABORTED, "%s: the runtime stopped after a failed collective: %s", fn,
                        rt->failed_msg);
    return TCOMMS_SUCCESS;
}

tcomms_status_t tc_fsdp_check_unit(const tcomms_fsdp_t *rt, int unit, const char *fn)
{
    if (unit < 0 || unit >= rt->nunits)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: unit %d is not a registered unit (0..%d)", fn, unit,
                        rt->nunits - 1);
    return TCOMMS_SUCCESS;
}

tcomms_status_t tc_fsdp_param_entry(const tcomms_fsdp_t *rt, int param_id, const void *ptr, const char *what,
                                    const char *fn)
{
    tcomms_status_t st = tc_fsdp_ready(rt, fn);
    if (st != TCOMMS_SUCCESS)
        return st;
    if (param_id < 0 || param_id >= rt->nparams)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: param_id %d is not a registered parameter (0..%d)", fn,
                        param_id, rt->nparams - 1);
    if (ptr == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: %s is NULL", fn, what);
    return TCOMMS_SUCCESS;
}

int tc_fsdp_zero3(const tcomms_fsdp_t *rt)
{
    return rt->cfg.strategy == TCOMMS_FSDP_OPTIM_GRADS_PARAMS;
}

int tc_fsdp_slots(const tcomms_fsdp_t *rt)
{
    return rt->cfg.strategy >= TCOMMS_FSDP_OPTIM_GRADS;
}

int tc_fsdp_casts_in(const tcomms_fsdp_t *rt)
{
    return tc_fsdp_zero3(rt) && !rt->cfg.optimizer_casts && rt->cfg.outer != TCOMMS_FSDP_OUTER_OPTIM;
}

static tcomms_status_t check_config(const tcomms_fsdp_config_t *c)
{
    const char *fn = "tcomms_fsdp_create";
    if ((unsigned)c->strategy > TCOMMS_FSDP_OPTIM_GRADS_PARAMS)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: config->strategy %d is not a tcomms_fsdp_strategy_t", fn,
                        (int)c->strategy);
    if ((unsigned)c->outer > TCOMMS_FSDP_OUTER_OPTIM)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: config->outer %d is not a tcomms_fsdp_outer_t", fn,
                        (int)c->outer);
    if (c->outer == TCOMMS_FSDP_OUTER_OPTIM && c->strategy < TCOMMS_FSDP_OPTIM_GRADS)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: config->outer OUTER_OPTIM (hybrid sharding) needs strategy "
                        "OPTIM_GRADS or OPTIM_GRADS_PARAMS", fn);
    if (c->main_dtype != TCOMMS_FLOAT32 && c->main_dtype != TCOMMS_FLOAT64)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: config->main_dtype must be float32 or float64", fn);
    if (c->reduce_dtype != TCOMMS_FLOAT32 && c->reduce_dtype != TCOMMS_FLOAT64 &&
        c->reduce_dtype != TCOMMS_BFLOAT16 && c->reduce_dtype != TCOMMS_FLOAT16)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: config->reduce_dtype must be float32, float64, bfloat16 or "
                        "float16", fn);
    /* ZeRO-0/1 accumulate the full gradients across microbatches in their buffer: it must be the main dtype */
    if (c->reduce_dtype != c->main_dtype && c->strategy < TCOMMS_FSDP_OPTIM_GRADS)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: config->reduce_dtype other than main_dtype needs strategy "
                        "OPTIM_GRADS or OPTIM_GRADS_PARAMS (ZeRO-0/1 accumulate full gradients in main_dtype)", fn);
    if (c->prefetch_forward < 0 || c->prefetch_backward < 0)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: config->prefetch_forward/prefetch_backward must be >= 0", fn);
    if (c->max_live_units < 1)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: config->max_live_units %d must be >= 1 (0 means 2)", fn,
                        c->max_live_units);
    if (c->windows < -1 || c->windows > 1)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: config->windows %d must be -1, 0 or 1", fn, c->windows);
    if (!isfinite(c->grad_scale))
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: config->grad_scale is not finite", fn);
    return TCOMMS_SUCCESS;
}

/* Fill one domain from its shard, all-gather and inter communicators. */
static tcomms_status_t set_domain(tcomms_fsdp_t *rt, int d, tcomms_comm_t *dp, tcomms_comm_t *intra,
                                  tcomms_comm_t *ag, tcomms_comm_t *inter, const char *what)
{
    tc_fsdp_domain_t *dom = &rt->dom[d];
    dom->shard = intra ? intra : dp;
    dom->ag = ag ? ag : dom->shard;
    dom->inter = inter;
    if (tcomms_comm_rank(dom->shard, &dom->shard_rank) != TCOMMS_SUCCESS ||
        tcomms_comm_size(dom->shard, &dom->shard_size) != TCOMMS_SUCCESS)
        return tc_error_prefix(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_create: %s shard communicator: ", what);
    dom->inter_size = 1;
    dom->inter_rank = 0;
    if (inter && (tcomms_comm_rank(inter, &dom->inter_rank) != TCOMMS_SUCCESS ||
                  tcomms_comm_size(inter, &dom->inter_size) != TCOMMS_SUCCESS))
        return tc_error_prefix(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_create: %s inter communicator: ", what);
    const tcomms_fsdp_config_t *c = &rt->cfg;
    if (c->outer != TCOMMS_FSDP_OUTER_NONE && inter == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_create: config->outer asks for HSDP but "
                        "groups->%s_inter is NULL (layout outer_dp must be > 1)", what);
    if (c->outer == TCOMMS_FSDP_OUTER_NONE && dom->inter_size > 1)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_create: groups->%s_inter has %d ranks (outer_dp > 1) "
                        "but config->outer is OUTER_NONE: choose OUTER_REPLICATE or OUTER_OPTIM", what,
                        dom->inter_size);
    if (c->strategy == TCOMMS_FSDP_NO_SHARD) {
        dom->nmain = 1;
        dom->main_index = 0;
    } else if (c->outer == TCOMMS_FSDP_OUTER_OPTIM) {
        dom->nmain = dom->shard_size * dom->inter_size;
        dom->main_index = dom->shard_rank * dom->inter_size + dom->inter_rank;
    } else {
        dom->nmain = dom->shard_size;
        dom->main_index = dom->shard_rank;
    }
    return TCOMMS_SUCCESS;
}

static tcomms_status_t set_domains(tcomms_fsdp_t *rt)
{
    const tcomms_fsdp_groups_t *g = &rt->groups;
    if (g->members == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_create: groups->members is NULL (this rank is outside "
                        "the layout?)");
    if (g->dp_cp == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_create: groups->dp_cp is NULL");
    if (tcomms_comm_rank(g->members, &rt->members_rank) != TCOMMS_SUCCESS)
        return tc_error_prefix(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_create: groups->members: ");
    tcomms_status_t st = set_domain(rt, TC_FSDP_DENSE, g->dp_cp, g->dp_cp_intra, g->dp_cp_ag, g->dp_cp_inter,
                                    "dp_cp");
    if (st == TCOMMS_SUCCESS && g->expt_dp != NULL)
        st = set_domain(rt, TC_FSDP_EXPERT, g->expt_dp, g->expt_dp_intra, g->expt_dp_ag, g->expt_dp_inter,
                        "expt_dp");
    return st;
}

tcomms_status_t tcomms_fsdp_create(const tcomms_fsdp_groups_t *groups, const tcomms_fsdp_config_t *config,
                                   tcomms_fsdp_t **out)
{
    if (out == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_create: out is NULL");
    *out = NULL;
    if (groups == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_create: groups is NULL");
    tcomms_fsdp_config_t c = {0};
    if (config != NULL)
        c = *config;
    if (c.main_dtype == TCOMMS_INT8)
        c.main_dtype = TCOMMS_FLOAT32;
    if (c.reduce_dtype == TCOMMS_INT8)
        c.reduce_dtype = c.main_dtype;
    if (c.max_live_units == 0)
        c.max_live_units = 2;
    if (c.grad_scale == 0)
        c.grad_scale = 1;
    tcomms_status_t st = check_config(&c);
    if (st != TCOMMS_SUCCESS)
        return st;
    tcomms_fsdp_t *rt = calloc(1, sizeof(*rt));
    if (rt == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "tcomms_fsdp_create: out of memory");
    rt->groups = *groups;
    rt->cfg = c;
    rt->ops = &tc_fsdp_host_ops;
    rt->hash = TC_HASH_INIT;
    if (c.log_path != NULL && (rt->log_path = strdup(c.log_path)) == NULL) {
        free(rt);
        return tc_error(TCOMMS_ERR_NO_MEMORY, "tcomms_fsdp_create: out of memory");
    }
    rt->cfg.log_path = rt->log_path;
    st = set_domains(rt);
    if (st != TCOMMS_SUCCESS) {
        free(rt->log_path);
        free(rt);
        return st;
    }
    *out = rt;
    return TCOMMS_SUCCESS;
}

static tcomms_status_t check_shape(const int64_t *shape, int ndim, size_t *numel)
{
    const char *fn = "tcomms_fsdp_register_param";
    if (ndim < 0 || ndim > TC_FSDP_MAX_NDIM)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: ndim %d is outside 0..%d", fn, ndim, TC_FSDP_MAX_NDIM);
    if (shape == NULL && ndim > 0)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: shape is NULL", fn);
    size_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] <= 0 || (uint64_t)shape[i] > (SIZE_MAX >> 8) / n)
            return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: shape[%d] = %lld must be positive (and the product "
                            "fit in memory)", fn, i, (long long)shape[i]);
        n *= (size_t)shape[i];
    }
    *numel = n;
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcomms_fsdp_register_param(tcomms_fsdp_t *rt, const char *name, const int64_t *shape, int ndim,
                                           tcomms_dtype_t dtype, int unit, unsigned flags, int *param_id)
{
    const char *fn = "tcomms_fsdp_register_param";
    if (rt == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: fsdp is NULL", fn);
    if (rt->finalized)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: called after tcomms_fsdp_finalize", fn);
    size_t numel = 0;
    tcomms_status_t st = check_shape(shape, ndim, &numel);
    if (st != TCOMMS_SUCCESS)
        return st;
    if (dtype != TCOMMS_FLOAT32 && dtype != TCOMMS_BFLOAT16 && dtype != TCOMMS_FLOAT16 && dtype != TCOMMS_FLOAT64)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: dtype %d must be float32, bfloat16, float16 or float64", fn,
                        (int)dtype);
    if (unit < 0 || unit >= MAX_UNIT)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: unit %d is outside 0..%d", fn, unit, MAX_UNIT - 1);
    if (flags & ~(unsigned)(TCOMMS_FSDP_PARAM_EXPERT | TCOMMS_FSDP_PARAM_NO_GRAD))
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: flags 0x%x has unknown bits", fn, flags);
    if ((flags & TCOMMS_FSDP_PARAM_EXPERT) && rt->groups.expt_dp == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: parameter '%s' is an expert parameter but groups->expt_dp is "
                        "NULL (no expert groups)", fn, name ? name : "");
    if (rt->nparams == rt->cap_params) {
        int cap = rt->cap_params ? 2 * rt->cap_params : 16;
        tc_fsdp_param_t *p = realloc(rt->params, (size_t)cap * sizeof(*p));
        if (p == NULL)
            return tc_error(TCOMMS_ERR_NO_MEMORY, "%s: out of memory", fn);
        rt->params = p;
        rt->cap_params = cap;
    }
    tc_fsdp_param_t *p = &rt->params[rt->nparams];
    memset(p, 0, sizeof(*p));
    if ((p->name = strdup(name ? name : "")) == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "%s: out of memory", fn);
    for (int i = 0; i < ndim; i++)
        p->shape[i] = shape[i];
    p->ndim = ndim;
    p->numel = numel;
    p->dtype = dtype;
    p->unit = unit;
    p->flags = flags;
    p->bucket = -1;
    if (param_id != NULL)
        *param_id = rt->nparams;
    rt->nparams++;
    return TCOMMS_SUCCESS;
}

static tcomms_status_t apply_order(tcomms_fsdp_t *rt, const int *units, int n, const char *fn)
{
    if (n != rt->nunits)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: nunits %d, but %d units are registered (every unit once)", fn,
                        n, rt->nunits);
    for (int u = 0; u < rt->nunits; u++)
        rt->units[u].pos = -1;
    for (int i = 0; i < n; i++) {
        if (units[i] < 0 || units[i] >= rt->nunits || rt->units[units[i]].pos >= 0) {
            for (int u = 0; u < rt->nunits; u++)
                rt->units[u].pos = u;
            return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: units[%d] = %d is %s", fn, i, units[i],
                            units[i] < 0 || units[i] >= rt->nunits ? "not a unit" : "listed twice");
        }
        rt->units[units[i]].pos = i;
    }
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcomms_fsdp_set_order(tcomms_fsdp_t *rt, const int *units, int nunits)
{
    const char *fn = "tcomms_fsdp_set_order";
    if (rt == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: fsdp is NULL", fn);
    if (units == NULL || nunits < 0)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: units is NULL or nunits < 0", fn);
    int *copy = malloc((size_t)(nunits ? nunits : 1) * sizeof(int));
    if (copy == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "%s: out of memory", fn);
    memcpy(copy, units, (size_t)nunits * sizeof(int));
    if (rt->finalized) {
        tcomms_status_t st = apply_order(rt, copy, nunits, fn);
        if (st != TCOMMS_SUCCESS) {
            free(copy);
            return st;
        }
    }
    free(rt->order);
    rt->order = copy;
    rt->norder = nunits;
    return TCOMMS_SUCCESS;
}

/* Everything that decides which collectives a rank posts: it must agree on every rank. */
static uint64_t config_hash(const tcomms_fsdp_t *rt, const tcomms_fsdp_layout_t *layout)
{
    const tcomms_fsdp_config_t *c = &rt->cfg;
    int64_t head[] = {c->strategy,         c->outer,   c->main_dtype, c->prefetch_forward, c->prefetch_backward,
                      c->max_live_units,   c->keep_after_forward,     c->windows,          rt->nunits,
                      rt->nbuckets,        rt->nparams,               c->optimizer_casts != 0, c->reduce_dtype};
    uint64_t h = tc_fsdp_hash_i64(TC_HASH_INIT, (int64_t)tc_fsdp_layout_hash(layout));
    h = tc_hash_more(h, head, sizeof(head));
    for (int b = 0; b < rt->nbuckets; b++) {
        const tc_fsdp_bucket_t *k = &rt->buckets[b];
        int64_t v[] = {k->unit, k->dtype, k->domain, k->no_grad, (int64_t)k->numel, (int64_t)k->padded};
        h = tc_hash_more(h, v, sizeof(v));
    }
    for (int i = 0; i < rt->nparams; i++) {
        const tc_fsdp_param_t *p = &rt->params[i];
        h = tc_fsdp_hash_i64(h, p->ndim);
        for (int d = 0; d < p->ndim; d++)
            h = tc_fsdp_hash_i64(h, p->shape[d]);
    }
    for (int i = 0; i < rt->norder; i++)
        h = tc_fsdp_hash_i64(h, rt->order[i]);
    return h;
}

/* One all-reduce over members: the configuration hash's extremes and whether some rank failed locally. */
static tcomms_status_t agree(tcomms_fsdp_t *rt, uint64_t hash, tcomms_status_t local, const char *local_msg)
{
    const char *fn = "tcomms_fsdp_finalize";
    int64_t h = (int64_t)(hash & ((UINT64_C(1) << 62) - 1));
    int64_t v[3] = {h, -h, local != TCOMMS_SUCCESS ? -1 : 0};
    tcomms_status_t st = tc_fsdp_ctl(rt->groups.members, TC_FSDP_ALL_REDUCE, v, v, 3, TCOMMS_INT64, TCOMMS_MIN,
                                     rt->cfg.timeout_ms);
    if (st != TCOMMS_SUCCESS)
        return tc_error_prefix(st, "%s: configuration check over groups->members: ", fn);
    if (local != TCOMMS_SUCCESS)
        return tc_error(local, "%s", local_msg);
    if (v[2] != 0)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: failed on another rank of groups->members (see its error)", fn);
    if (v[0] != h || -v[1] != h)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: configuration differs across ranks: hash 0x%llx here, 0x%llx "
                        "and 0x%llx seen (parameters, units, dtypes, strategy or layout differ)", fn,
                        (unsigned long long)h, (unsigned long long)v[0], (unsigned long long)-v[1]);
    return TCOMMS_SUCCESS;
}

/* The parts of finalize that need no other rank; a failure is carried into agree() so no rank hangs. */
static tcomms_status_t finalize_local(tcomms_fsdp_t *rt, const tcomms_fsdp_layout_t *layout)
{
    int outer = tc_fsdp_layout_outer(layout);
    if ((outer > 1) != (rt->cfg.outer != TCOMMS_FSDP_OUTER_NONE))
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_finalize: the layout's outer_dp is %d but config->outer "
                        "is %s", outer, rt->cfg.outer == TCOMMS_FSDP_OUTER_NONE ? "OUTER_NONE" : "set");
    tcomms_status_t st = tc_fsdp_ops_open(rt);
    if (st == TCOMMS_SUCCESS)
        st = tc_fsdp_build_buckets(rt);
    if (st == TCOMMS_SUCCESS && rt->order != NULL)
        st = apply_order(rt, rt->order, rt->norder, "tcomms_fsdp_finalize (order given to tcomms_fsdp_set_order)");
    if (st == TCOMMS_SUCCESS)
        st = tc_fsdp_alloc_buckets(rt);
    if (st == TCOMMS_SUCCESS)
        st = tc_fsdp_gather_init(rt);
    if (st == TCOMMS_SUCCESS)
        st = tc_fsdp_reduce_init(rt);
    if (st == TCOMMS_SUCCESS)
        st = tc_fsdp_log_open(rt);
    return st;
}

tcomms_status_t tcomms_fsdp_finalize(tcomms_fsdp_t *rt, const tcomms_fsdp_layout_t *layout)
{
    const char *fn = "tcomms_fsdp_finalize";
    if (rt == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: fsdp is NULL", fn);
    if (rt->finalized)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: called twice", fn);
    if (layout == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: layout is NULL", fn);
    tcomms_status_t local = finalize_local(rt, layout);
    char saved[512] = "";
    if (local != TCOMMS_SUCCESS)
        snprintf(saved, sizeof(saved), "%s", tcomms_last_error());
    tcomms_status_t st = tc_fsdp_groups_check(&rt->groups, layout);
    if (st == TCOMMS_SUCCESS)
        st = agree(rt, config_hash(rt, layout), local, saved);
    if (st == TCOMMS_SUCCESS)
        st = tc_fsdp_windows(rt);
    /* The buffers start zeroed (device memsets are queued): the first step may then run without host blocking. */
    if (st == TCOMMS_SUCCESS && (st = rt->ops->sync(rt->dev)) != TCOMMS_SUCCESS)
        st = tc_error_prefix(st, "%s: ", fn);
    if (st != TCOMMS_SUCCESS) {
        tc_fsdp_free_buckets(rt);
        tc_fsdp_ops_close(rt);
        return st;
    }
    rt->finalized = 1;
    rt->phase = TC_FSDP_ACCUM;
    return TCOMMS_SUCCESS;
}

void tcomms_fsdp_destroy(tcomms_fsdp_t *rt)
{
    if (rt == NULL)
        return;
    /* Failures here are already recorded; what matters is whether anything is still in flight. */
    tc_fsdp_reduce_drain(rt);
    tc_fsdp_drop_gathered(rt, 1, "tcomms_fsdp_destroy");
    /* Device work queued on the stream may still read the buffers. */
    tcomms_status_t synced = rt->ops->sync(rt->dev);
    if (tc_fsdp_pending(rt) || synced != TCOMMS_SUCCESS) {
        /* A collective that did not finish may still write into the buffers: leave them allocated. */
        tc_log(TCOMMS_LOG_WARN, "fsdp", "tcomms_fsdp_destroy: collectives or device work still pending (%s); their "
               "buffers are not freed", synced != TCOMMS_SUCCESS ? tcomms_last_error() : "past their timeout");
    } else {
        tc_fsdp_free_buckets(rt);
        tc_fsdp_ops_close(rt);
    }
    if (rt->log != NULL)
        fclose(rt->log);
    for (int i = 0; i < rt->nparams; i++)
        free(rt->params[i].name);
    free(rt->params);
    free(rt->order);
    free(rt->log_path);
    free(rt);
}
