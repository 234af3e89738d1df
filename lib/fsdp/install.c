/* SPDX-License-Identifier: BSD-3-Clause */
/* FSDP install_weights: after the optimizer changed the main params, rebuild each bucket's shard from the main
 * pieces (hybrid sharding all-gathers them over inter), cast it into the model weights, and all-gather those over
 * the *_ag communicator where the weights are kept full (ZeRO-1/2), or under ZeRO-3 prefetch the next step's first
 * unit. ZeRO-3 without optimizer_casts keeps no weight shard (tc_fsdp_casts_in): there the prefetch is all. */
#include <stdlib.h>

#include "rt.h"

/* This rank's shard of bucket `b` in the main dtype: the main piece itself, or under hybrid sharding the pieces
 * of the inter group gathered into the staging buffer. */
static tcomms_status_t main_shard(tcomms_fsdp_t *rt, int b, const void **out)
{
    tc_fsdp_bucket_t *k = &rt->buckets[b];
    tcomms_dtype_t md = rt->cfg.main_dtype;
    *out = k->main;
    if (rt->cfg.outer != TCOMMS_FSDP_OUTER_OPTIM)
        return TCOMMS_SUCCESS;
    tcomms_work_t *w = NULL;
    tcomms_status_t st = tc_fsdp_copy(rt, tc_fsdp_at(rt->staging, k->main_off - k->shard_off, md), k->main,
                                      k->main_len * tcomms_dtype_size(md));
    if (st == TCOMMS_SUCCESS)
        st = tc_fsdp_post(rt, TC_FSDP_ALL_GATHER, k->domain, TC_FSDP_ON_INTER, b, rt->staging,
                          k->main_len, md, &w);
    if (st == TCOMMS_SUCCESS)
        st = tc_fsdp_wait(rt, &w);
    *out = rt->staging;
    return st;
}

/* This rank's shard of bucket `b` in the compute dtype. Under optimizer_casts the optimizer wrote this rank's piece
 * of it, and hybrid sharding gathers the other pieces over inter (in the compute dtype, half the bytes of main). */
static tcomms_status_t weight_shard(tcomms_fsdp_t *rt, int b, void *shard)
{
    tc_fsdp_bucket_t *k = &rt->buckets[b];
    tcomms_dtype_t md = rt->cfg.main_dtype;
    if (!rt->cfg.optimizer_casts) {
        const void *src = NULL;
        tcomms_status_t st = main_shard(rt, b, &src);
        return st == TCOMMS_SUCCESS ? tc_fsdp_cast(rt, shard, k->dtype, src, md, k->shard_len) : st;
    }
    if (rt->cfg.outer != TCOMMS_FSDP_OUTER_OPTIM)
        return TCOMMS_SUCCESS;
    tcomms_work_t *w = NULL;
    tcomms_status_t st = tc_fsdp_post(rt, TC_FSDP_ALL_GATHER, k->domain, TC_FSDP_ON_INTER, b, shard, k->main_len,
                                      k->dtype, &w);
    return st == TCOMMS_SUCCESS ? tc_fsdp_wait(rt, &w) : st;
}

static tcomms_status_t install_bucket(tcomms_fsdp_t *rt, int b, tcomms_work_t **works)
{
    tc_fsdp_bucket_t *k = &rt->buckets[b];
    if (rt->cfg.strategy == TCOMMS_FSDP_NO_SHARD)
        return rt->cfg.optimizer_casts ? TCOMMS_SUCCESS
                                       : tc_fsdp_cast(rt, k->weights, k->dtype, k->main, rt->cfg.main_dtype, k->padded);
    if (tc_fsdp_casts_in(rt))
        return TCOMMS_SUCCESS; /* the all-gathers cast the main params into the unit buffers (gather.c) */
    if (tc_fsdp_zero3(rt))
        return weight_shard(rt, b, k->weights);
    tcomms_status_t st = weight_shard(rt, b, tc_fsdp_at(k->weights, k->shard_off, k->dtype));
    if (st == TCOMMS_SUCCESS)
        st = tc_fsdp_post(rt, TC_FSDP_ALL_GATHER, k->domain, TC_FSDP_ON_AG, b, k->weights, k->shard_len, k->dtype,
                          &works[b]);
    return st;
}

/* Under ZeRO-3 with forward prefetch, the first unit of the forward order goes first and its all-gather for the
 * next step is posted at once, so it runs beside the other units' casts rather than ahead of the next forward. */
static tcomms_status_t install(tcomms_fsdp_t *rt, tcomms_work_t **works)
{
    int first = -1;
    if (tc_fsdp_zero3(rt) && rt->cfg.prefetch_forward > 0 && rt->nunits > 0)
        first = rt->order ? rt->order[0] : 0;
    tcomms_status_t st = TCOMMS_SUCCESS;
    if (first >= 0) {
        const tc_fsdp_unit_t *un = &rt->units[first];
        for (int i = 0; i < un->nbuckets && st == TCOMMS_SUCCESS; i++)
            st = install_bucket(rt, un->buckets[i], works);
        if (st == TCOMMS_SUCCESS)
            st = tcomms_fsdp_unshard(rt, first, TCOMMS_FSDP_FORWARD);
    }
    for (int b = 0; b < rt->nbuckets && st == TCOMMS_SUCCESS; b++)
        if (rt->buckets[b].unit != first)
            st = install_bucket(rt, b, works);
    return st;
}

tcomms_status_t tcomms_fsdp_install_weights(tcomms_fsdp_t *rt)
{
    const char *fn = "tcomms_fsdp_install_weights";
    tcomms_status_t st = tc_fsdp_ready(rt, fn);
    if (st != TCOMMS_SUCCESS)
        return st;
    if (rt->in_backward)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: called between root_pre_backward and root_post_backward", fn);
    /* Gathered ZeRO-3 weights are stale once the shards change. */
    if ((st = tc_fsdp_drop_gathered(rt, 0, fn)) != TCOMMS_SUCCESS)
        return st;
    tcomms_work_t **works = calloc((size_t)(rt->nbuckets ? rt->nbuckets : 1), sizeof(*works));
    if (works == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "%s: out of memory", fn);
    st = install(rt, works);
    /* Wait for whatever was posted, even after a failure: the gathers write into the weights. */
    int left = 0;
    for (int b = 0; b < rt->nbuckets; b++) {
        tcomms_status_t sw = tc_fsdp_wait(rt, &works[b]);
        if (st == TCOMMS_SUCCESS)
            st = sw;
        left |= works[b] != NULL;
    }
    if (!left)
        free(works); /* else a timed-out handle stays alive with its operation */
    return st;
}
