/* SPDX-License-Identifier: BSD-3-Clause */
/* FSDP buckets: the padding rule and this rank's ranges in each bucket, the persistent buffers (weights, main
 * params, gradients), setting and reading a parameter's full value, and the shard views an optimizer works on.
 * Every rank computes the same layout from the same registrations (finalize compares a hash of it). */
#include <stdlib.h>
#include <string.h>

#include "rt.h"

static size_t align_bytes(size_t n)
{
    return (n + TC_FSDP_BYTE_ALIGN - 1) / TC_FSDP_BYTE_ALIGN * TC_FSDP_BYTE_ALIGN;
}

/* The bucket of (unit, dtype, domain, no_grad), created in order of first appearance. */
static int bucket_of(tcomms_fsdp_t *rt, const tc_fsdp_param_t *p, int *cap)
{
    int domain = (p->flags & TCOMMS_FSDP_PARAM_EXPERT) ? TC_FSDP_EXPERT : TC_FSDP_DENSE;
    int no_grad = (p->flags & TCOMMS_FSDP_PARAM_NO_GRAD) != 0;
    for (int b = 0; b < rt->nbuckets; b++) {
        tc_fsdp_bucket_t *k = &rt->buckets[b];
        if (k->unit == p->unit && k->dtype == p->dtype && k->domain == domain && k->no_grad == no_grad)
            return b;
    }
    if (rt->nbuckets == *cap) {
        int n = *cap ? 2 * *cap : 8;
        tc_fsdp_bucket_t *nb = realloc(rt->buckets, (size_t)n * sizeof(*nb));
        if (nb == NULL)
            return -1;
        rt->buckets = nb;
        *cap = n;
    }
    tc_fsdp_bucket_t *k = &rt->buckets[rt->nbuckets];
    memset(k, 0, sizeof(*k));
    k->unit = p->unit;
    k->dtype = p->dtype;
    k->domain = domain;
    k->no_grad = no_grad;
    k->grad_fresh = 1; /* allocated zeroed */
    k->direct_slot = -1;
    return rt->nbuckets++;
}

/* Padding and this rank's shard, main piece and gradient view (docs/fsdp.md, "padding rule"). */
static void place(tcomms_fsdp_t *rt, tc_fsdp_bucket_t *k)
{
    const tc_fsdp_domain_t *d = &rt->dom[k->domain];
    size_t quantum = (size_t)d->nmain * TC_FSDP_PAD;
    k->padded = (k->numel + quantum - 1) / quantum * quantum;
    k->main_len = k->padded / (size_t)d->nmain;
    k->main_off = (size_t)d->main_index * k->main_len;
    if (rt->cfg.strategy == TCOMMS_FSDP_NO_SHARD) {
        k->shard_len = k->padded;
        k->shard_off = 0;
    } else {
        k->shard_len = k->padded / (size_t)d->shard_size;
        k->shard_off = (size_t)d->shard_rank * k->shard_len;
    }
    /* ZeRO-0/1 keep the full gradient; ZeRO-2/3 keep the shard, whose sub-block is the main piece (hybrid). */
    k->grad_view = tc_fsdp_slots(rt) ? k->main_off - k->shard_off : k->main_off;
}

tcomms_status_t tc_fsdp_build_buckets(tcomms_fsdp_t *rt)
{
    int cap = 0, nunits = 0;
    for (int i = 0; i < rt->nparams; i++) {
        tc_fsdp_param_t *p = &rt->params[i];
        if (p->unit + 1 > nunits)
            nunits = p->unit + 1;
        if ((p->flags & TCOMMS_FSDP_PARAM_EXPERT) && rt->dom[TC_FSDP_EXPERT].shard == NULL)
            return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_finalize: parameter '%s' is an expert parameter but "
                            "there are no expert groups", p->name);
        int b = bucket_of(rt, p, &cap);
        if (b < 0)
            return tc_error(TCOMMS_ERR_NO_MEMORY, "tcomms_fsdp_finalize: out of memory");
        p->bucket = b;
        p->offset = rt->buckets[b].numel;
        rt->buckets[b].numel += p->numel;
    }
    rt->units = calloc((size_t)(nunits ? nunits : 1), sizeof(*rt->units));
    if (rt->units == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "tcomms_fsdp_finalize: out of memory");
    rt->nunits = nunits;
    for (int u = 0; u < nunits; u++) {
        tc_fsdp_unit_t *un = &rt->units[u];
        un->buf = un->slot = -1;
        un->pos = u;
    }
    for (int b = 0; b < rt->nbuckets; b++)
        rt->units[rt->buckets[b].unit].nbuckets++;
    for (int u = 0; u < nunits; u++) {
        tc_fsdp_unit_t *un = &rt->units[u];
        if (un->nbuckets > rt->max_unit_buckets)
            rt->max_unit_buckets = un->nbuckets;
        if (un->nbuckets && (un->buckets = malloc((size_t)un->nbuckets * sizeof(int))) == NULL)
            return tc_error(TCOMMS_ERR_NO_MEMORY, "tcomms_fsdp_finalize: out of memory");
        un->nbuckets = 0;
    }
    size_t esize_red = tcomms_dtype_size(rt->cfg.reduce_dtype);
    for (int b = 0; b < rt->nbuckets; b++) {
        tc_fsdp_bucket_t *k = &rt->buckets[b];
        tc_fsdp_unit_t *un = &rt->units[k->unit];
        un->buckets[un->nbuckets++] = b;
        place(rt, k);
        k->ubuf_off = un->ubuf_bytes;
        un->ubuf_bytes += align_bytes(k->padded * tcomms_dtype_size(k->dtype));
        if (!k->no_grad) {
            k->gslot_off = un->gslot_bytes;
            un->gslot_bytes += align_bytes(k->padded * esize_red);
        }
    }
    return TCOMMS_SUCCESS;
}

tcomms_status_t tc_fsdp_alloc_buckets(tcomms_fsdp_t *rt)
{
    tcomms_dtype_t md = rt->cfg.main_dtype;
    for (int b = 0; b < rt->nbuckets; b++) {
        tc_fsdp_bucket_t *k = &rt->buckets[b];
        size_t nw = tc_fsdp_casts_in(rt) ? 0 : tc_fsdp_zero3(rt) ? k->shard_len : k->padded;
        size_t ng = k->no_grad ? 0 : tc_fsdp_slots(rt) ? k->shard_len : k->padded;
        tcomms_status_t st = tc_fsdp_alloc(rt, nw * tcomms_dtype_size(k->dtype), &k->weights);
        if (st == TCOMMS_SUCCESS)
            st = tc_fsdp_alloc(rt, k->main_len * tcomms_dtype_size(md), &k->main);
        if (st == TCOMMS_SUCCESS)
            st = tc_fsdp_alloc(rt, ng * tcomms_dtype_size(md), &k->grad);
        if (st != TCOMMS_SUCCESS)
            return st;
    }
    return TCOMMS_SUCCESS;
}

static void free_pool(tcomms_fsdp_t *rt, tc_fsdp_buf_t *bufs, int n)
{
    for (int i = 0; bufs && i < n; i++) {
        tc_fsdp_pool_free(rt, &bufs[i]);
        free(bufs[i].works);
    }
    free(bufs);
}

void tc_fsdp_free_buckets(tcomms_fsdp_t *rt)
{
    for (int b = 0; rt->buckets && b < rt->nbuckets; b++) {
        tc_fsdp_free(rt, rt->buckets[b].weights);
        tc_fsdp_free(rt, rt->buckets[b].main);
        tc_fsdp_free(rt, rt->buckets[b].grad);
    }
    free(rt->buckets);
    rt->buckets = NULL;
    rt->nbuckets = 0;
    for (int u = 0; rt->units && u < rt->nunits; u++)
        free(rt->units[u].buckets);
    free(rt->units);
    rt->units = NULL;
    rt->nunits = 0;
    rt->max_unit_buckets = 0;
    free_pool(rt, rt->ubufs, rt->nubufs);
    rt->ubufs = NULL;
    rt->nubufs = 0;
    free_pool(rt, rt->gslots, rt->ngslots);
    rt->gslots = NULL;
    rt->ngslots = 0;
    tc_fsdp_free(rt, rt->staging);
    rt->staging = NULL;
}

/* The overlap of [a, a + n) and [b, b + m) as a start and length (0 when disjoint). */
static size_t overlap(size_t a, size_t n, size_t b, size_t m, size_t *start)
{
    size_t lo = a > b ? a : b, hi = a + n < b + m ? a + n : b + m;
    *start = lo;
    return hi > lo ? hi - lo : 0;
}

/* Write parameter `p`'s full main-dtype value `values` (addressable by the ops) into its main piece and weights. */
static tcomms_status_t load_value(tcomms_fsdp_t *rt, const tc_fsdp_param_t *p, const void *values)
{
    tc_fsdp_bucket_t *k = &rt->buckets[p->bucket];
    tcomms_dtype_t md = rt->cfg.main_dtype;
    size_t lo, n = overlap(p->offset, p->numel, k->main_off, k->main_len, &lo);
    tcomms_status_t st = tc_fsdp_gather_settle(rt); /* a copy-in may still read the main piece or weight shard */
    if (st == TCOMMS_SUCCESS)
        st = tc_fsdp_cast(rt, tc_fsdp_at(k->main, lo - k->main_off, md), md,
                          tc_fsdp_at((void *)values, lo - p->offset, md), md, n);
    if (st != TCOMMS_SUCCESS)
        return st;
    if (!tc_fsdp_zero3(rt))
        return tc_fsdp_cast(rt, tc_fsdp_at(k->weights, p->offset, k->dtype), k->dtype, values, md, p->numel);
    n = overlap(p->offset, p->numel, k->shard_off, k->shard_len, &lo);
    if (!tc_fsdp_casts_in(rt))
        st = tc_fsdp_cast(rt, tc_fsdp_at(k->weights, lo - k->shard_off, k->dtype), k->dtype,
                          tc_fsdp_at((void *)values, lo - p->offset, md), md, n);
    /* Weights already gathered for this unit would be stale: write the value there too. */
    void *full = NULL;
    if (st == TCOMMS_SUCCESS)
        st = tc_fsdp_gathered(rt, p->unit, &full);
    if (st == TCOMMS_SUCCESS && full != NULL)
        st = tc_fsdp_cast(rt, tc_fsdp_at((char *)full + k->ubuf_off, p->offset, k->dtype), k->dtype, values, md,
                          p->numel);
    return st;
}

tcomms_status_t tcomms_fsdp_load_param(tcomms_fsdp_t *rt, int param_id, const void *values)
{
    const char *fn = "tcomms_fsdp_load_param";
    tcomms_status_t st = tc_fsdp_param_entry(rt, param_id, values, "values", fn);
    if (st != TCOMMS_SUCCESS)
        return st;
    const tc_fsdp_param_t *p = &rt->params[param_id];
    size_t bytes = p->numel * tcomms_dtype_size(rt->cfg.main_dtype);
    if (rt->ops->on_device(rt->dev, values))
        return load_value(rt, p, values);
    /* Host values on a device runtime: through a device copy, freed once the casts that read it are done. */
    void *tmp = NULL;
    st = tc_fsdp_alloc(rt, bytes, &tmp);
    if (st == TCOMMS_SUCCESS)
        st = tc_fsdp_copy(rt, tmp, values, bytes);
    if (st == TCOMMS_SUCCESS)
        st = load_value(rt, p, tmp);
    tcomms_status_t ss = tc_fsdp_sync(rt);
    tc_fsdp_free(rt, tmp);
    return st == TCOMMS_SUCCESS ? ss : st;
}

/* Rebuild bucket `b`'s full main-dtype value in `full` (padded elements): the hybrid pieces over inter, then the
 * shards over the shard group. */
static tcomms_status_t gather_main(tcomms_fsdp_t *rt, int b, void *full)
{
    tc_fsdp_bucket_t *k = &rt->buckets[b];
    tcomms_dtype_t md = rt->cfg.main_dtype;
    tcomms_status_t st = tc_fsdp_cast(rt, tc_fsdp_at(full, k->main_off, md), md, k->main, md, k->main_len);
    if (st != TCOMMS_SUCCESS || rt->cfg.strategy == TCOMMS_FSDP_NO_SHARD)
        return st;
    tcomms_work_t *w = NULL;
    if (rt->cfg.outer == TCOMMS_FSDP_OUTER_OPTIM) {
        st = tc_fsdp_post(rt, TC_FSDP_ALL_GATHER, k->domain, TC_FSDP_ON_INTER, b,
                          tc_fsdp_at(full, k->shard_off, md), k->main_len, md, &w);
        if (st == TCOMMS_SUCCESS)
            st = tc_fsdp_wait(rt, &w);
    }
    if (st == TCOMMS_SUCCESS)
        st = tc_fsdp_post(rt, TC_FSDP_ALL_GATHER, k->domain, TC_FSDP_ON_AG, b, full, k->shard_len, md, &w);
    if (st == TCOMMS_SUCCESS)
        st = tc_fsdp_wait(rt, &w);
    return st;
}

tcomms_status_t tcomms_fsdp_read_param(tcomms_fsdp_t *rt, int param_id, void *values)
{
    const char *fn = "tcomms_fsdp_read_param";
    tcomms_status_t st = tc_fsdp_param_entry(rt, param_id, values, "values", fn);
    if (st != TCOMMS_SUCCESS)
        return st;
    const tc_fsdp_param_t *p = &rt->params[param_id];
    tcomms_dtype_t md = rt->cfg.main_dtype;
    void *full = NULL;
    st = tc_fsdp_alloc(rt, rt->buckets[p->bucket].padded * tcomms_dtype_size(md), &full);
    if (st == TCOMMS_SUCCESS)
        st = gather_main(rt, p->bucket, full);
    /* A copy, not the ops' cast: `values` may be host memory on a device runtime (unified addressing). */
    if (st == TCOMMS_SUCCESS)
        st = tc_fsdp_copy(rt, values, tc_fsdp_at(full, p->offset, md), p->numel * tcomms_dtype_size(md));
    /* The values are ready on return: the device work (gathers are stream-ordered) must be done. */
    if (st == TCOMMS_SUCCESS)
        st = tc_fsdp_sync(rt);
    /* After a timeout the gather may still write into `full`: keep it rather than free it under the backend. */
    if (rt->failed != TCOMMS_ERR_TIMEOUT && rt->failed != TCOMMS_ERR_ABORTED)
        tc_fsdp_free(rt, full);
    return st;
}

tcomms_status_t tcomms_fsdp_shard_count(const tcomms_fsdp_t *rt, int *count)
{
    tcomms_status_t st = tc_fsdp_ready(rt, "tcomms_fsdp_shard_count");
    if (st != TCOMMS_SUCCESS)
        return st;
    if (count == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_shard_count: count is NULL");
    *count = rt->nbuckets;
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcomms_fsdp_shard(const tcomms_fsdp_t *rt, int i, tcomms_fsdp_shard_t *shard)
{
    const char *fn = "tcomms_fsdp_shard";
    tcomms_status_t st = tc_fsdp_ready(rt, fn);
    if (st != TCOMMS_SUCCESS)
        return st;
    if (shard == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: shard is NULL", fn);
    if (i < 0 || i >= rt->nbuckets)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: i = %d is outside 0..%d", fn, i, rt->nbuckets - 1);
    const tc_fsdp_bucket_t *k = &rt->buckets[i];
    shard->main = k->main;
    shard->grad = k->no_grad ? NULL : tc_fsdp_at(k->grad, k->grad_view, rt->cfg.main_dtype);
    shard->count = k->main_len;
    shard->dtype = rt->cfg.main_dtype;
    shard->unit = k->unit;
    shard->expert = k->domain == TC_FSDP_EXPERT;
    /* The weights hold the bucket (ZeRO-0/1/2) or this rank's shard of it (ZeRO-3); the piece starts at main_off
     * in the bucket either way. */
    shard->weights = k->weights == NULL ? NULL
                     : tc_fsdp_at(k->weights, k->main_off - (tc_fsdp_zero3(rt) ? k->shard_off : 0), k->dtype);
    shard->weights_dtype = k->dtype;
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcomms_fsdp_param_range(const tcomms_fsdp_t *rt, int param_id, int *shard, size_t *shard_offset,
                                        size_t *param_offset, size_t *count)
{
    const char *fn = "tcomms_fsdp_param_range";
    tcomms_status_t st = tc_fsdp_param_entry(rt, param_id, shard, "shard", fn);
    if (st != TCOMMS_SUCCESS)
        return st;
    if (shard_offset == NULL || param_offset == NULL || count == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: an output pointer is NULL", fn);
    const tc_fsdp_param_t *p = &rt->params[param_id];
    const tc_fsdp_bucket_t *k = &rt->buckets[p->bucket];
    size_t lo, n = overlap(p->offset, p->numel, k->main_off, k->main_len, &lo);
    *shard = p->bucket;
    *count = n;
    *shard_offset = n ? lo - k->main_off : 0;
    *param_offset = n ? lo - p->offset : 0;
    return TCOMMS_SUCCESS;
}
