/* SPDX-License-Identifier: BSD-3-Clause */
/* FSDP unit weights: per-direction references, and under ZeRO-3 the unit buffers (max_live_units, allocated at
 * finalize and reused) that all-gathers fill on the *_ag communicators, with prefetch along the unit order. Every
 * choice (which buffer, what to prefetch, what to evict) depends only on the call sequence, so every rank posts
 * the same all-gathers in the same order.
 *
 * On a GPU (rt->eager) a unit buffer's copy-in (this rank's shard into its slot) and its all-gathers are queued on
 * the gather lane, which first waits for the caller's stream (the buffer's last readers, the shard's last
 * writer); the caller's stream waits for them only where the weights are used (wait_gather's join). So no copy
 * sits between the caller's kernels. */
#include <stdlib.h>
#include <string.h>

#include "rt.h"

tcomms_status_t tc_fsdp_gather_init(tcomms_fsdp_t *rt)
{
    if (!tc_fsdp_zero3(rt))
        return TCOMMS_SUCCESS;
    size_t bytes = 0;
    for (int u = 0; u < rt->nunits; u++)
        if (rt->units[u].ubuf_bytes > bytes)
            bytes = rt->units[u].ubuf_bytes;
    int n = rt->cfg.max_live_units;
    if ((rt->ubufs = calloc((size_t)n, sizeof(*rt->ubufs))) == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "tcomms_fsdp_finalize: out of memory");
    rt->nubufs = n;
    for (int i = 0; i < n; i++) {
        tc_fsdp_buf_t *b = &rt->ubufs[i];
        b->unit = -1;
        b->state = TC_FSDP_EMPTY;
        b->bytes = bytes;
        tcomms_status_t st = tc_fsdp_alloc(rt, bytes, &b->data);
        if (st != TCOMMS_SUCCESS)
            return st;
        if ((b->works = calloc((size_t)rt->max_unit_buckets + 1, sizeof(*b->works))) == NULL)
            return tc_error(TCOMMS_ERR_NO_MEMORY, "tcomms_fsdp_finalize: out of memory");
    }
    return TCOMMS_SUCCESS;
}

static int unit_at(const tcomms_fsdp_t *rt, int pos)
{
    return rt->order ? rt->order[pos] : pos;
}

static int referenced(const tc_fsdp_unit_t *un)
{
    return un->ref[0] > 0 || un->ref[1] > 0;
}

/* Wait for buffer `b`'s all-gathers; with `join` the caller's lane waits too (it is about to read the weights),
 * else only the gather lane does (the buffer is being emptied for another unit, whose copy-in goes there). */
static tcomms_status_t wait_gather(tcomms_fsdp_t *rt, tc_fsdp_buf_t *b, int join)
{
    if (b->state != TC_FSDP_BUSY)
        return TCOMMS_SUCCESS;
    for (int i = 0; i < rt->units[b->unit].nbuckets; i++) {
        tcomms_status_t st = tc_fsdp_wait(rt, &b->works[i]);
        if (st != TCOMMS_SUCCESS)
            return st;
    }
    b->state = TC_FSDP_READY;
    return join ? tc_fsdp_gather_settle(rt) : TCOMMS_SUCCESS;
}

tcomms_status_t tc_fsdp_gather_settle(tcomms_fsdp_t *rt)
{
    if (!rt->eager)
        return TCOMMS_SUCCESS;
    return tc_fsdp_follow(rt, TC_FSDP_LANE_GATHER, TC_FSDP_LANE_CALLER, TC_FSDP_EV_GATHER_JOIN);
}

/* Put the rank's shard of each bucket into its slot (cast from the main params where tc_fsdp_casts_in, else
 * copied from the weight shard), then all-gather in place. */
static tcomms_status_t fill(tcomms_fsdp_t *rt, tc_fsdp_buf_t *b, const tc_fsdp_unit_t *un)
{
    for (int i = 0; i < un->nbuckets; i++) {
        int kb = un->buckets[i];
        tc_fsdp_bucket_t *k = &rt->buckets[kb];
        void *full = (char *)b->data + k->ubuf_off, *slot = tc_fsdp_at(full, k->shard_off, k->dtype);
        tcomms_status_t st = tc_fsdp_casts_in(rt)
                                 ? tc_fsdp_cast(rt, slot, k->dtype, k->main, rt->cfg.main_dtype, k->shard_len)
                                 : tc_fsdp_copy(rt, slot, k->weights, k->shard_len * tcomms_dtype_size(k->dtype));
        if (st == TCOMMS_SUCCESS)
            st = tc_fsdp_post(rt, TC_FSDP_ALL_GATHER, k->domain, TC_FSDP_ON_AG, kb, full, k->shard_len,
                              k->dtype, &b->works[i]);
        if (st != TCOMMS_SUCCESS)
            return st;
    }
    return TCOMMS_SUCCESS;
}

static tcomms_status_t start_gather(tcomms_fsdp_t *rt, int unit, int bi)
{
    tc_fsdp_buf_t *b = &rt->ubufs[bi];
    tc_fsdp_unit_t *un = &rt->units[unit];
    b->unit = unit;
    b->state = TC_FSDP_BUSY;
    b->stamp = ++rt->clock;
    un->buf = bi;
    if (!rt->eager)
        return fill(rt, b, un);
    tcomms_status_t st = tc_fsdp_follow(rt, TC_FSDP_LANE_CALLER, TC_FSDP_LANE_GATHER, TC_FSDP_EV_GATHER_FORK);
    if (st == TCOMMS_SUCCESS)
        st = tc_fsdp_lane(rt, TC_FSDP_LANE_GATHER);
    if (st == TCOMMS_SUCCESS)
        st = fill(rt, b, un);
    tcomms_status_t back = tc_fsdp_lane(rt, TC_FSDP_LANE_CALLER);
    return st == TCOMMS_SUCCESS ? back : st;
}

/* Empty buffer `bi` for another unit; its all-gather, if still in flight, must end first. */
static tcomms_status_t evict(tcomms_fsdp_t *rt, int bi)
{
    tc_fsdp_buf_t *b = &rt->ubufs[bi];
    if (b->unit >= 0) {
        tcomms_status_t st = wait_gather(rt, b, 0);
        if (st != TCOMMS_SUCCESS)
            return st;
        rt->units[b->unit].buf = -1;
    }
    b->unit = -1;
    b->state = TC_FSDP_EMPTY;
    return TCOMMS_SUCCESS;
}

/* A buffer for a new gather: a free one, else the least recently used one holding an unreferenced unit outside
 * positions (lo, hi] of the order (the prefetch window, whose units are about to be used). -1 when none. */
static int pick(const tcomms_fsdp_t *rt, int lo, int hi)
{
    int best = -1;
    for (int i = 0; i < rt->nubufs; i++) {
        const tc_fsdp_buf_t *b = &rt->ubufs[i];
        if (b->unit < 0)
            return i;
        const tc_fsdp_unit_t *un = &rt->units[b->unit];
        if (referenced(un) || (un->pos > lo && un->pos <= hi))
            continue;
        if (best < 0 || b->stamp < rt->ubufs[best].stamp)
            best = i;
    }
    return best;
}

static tcomms_status_t no_buffer(const tcomms_fsdp_t *rt, int unit, const char *fn)
{
    char held[256] = "";
    size_t len = 0;
    for (int i = 0; i < rt->nubufs && len < sizeof(held); i++) {
        const tc_fsdp_unit_t *un = &rt->units[rt->ubufs[i].unit];
        int n = snprintf(held + len, sizeof(held) - len, "%sunit %d (forward %d, backward %d)", i ? ", " : "",
                         rt->ubufs[i].unit, un->ref[0], un->ref[1]);
        len += n > 0 ? (size_t)n : 0;
    }
    return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: unit %d needs gathered weights but all %d unit buffers "
                    "(config->max_live_units) hold referenced units: %s", fn, unit, rt->nubufs, held);
}

/* Post the all-gathers of the next `depth` units after `unit` in `dir`'s order that hold no buffer yet. */
static tcomms_status_t prefetch(tcomms_fsdp_t *rt, int unit, tcomms_fsdp_dir_t dir)
{
    int depth = dir == TCOMMS_FSDP_FORWARD ? rt->cfg.prefetch_forward : rt->cfg.prefetch_backward;
    int pos = rt->units[unit].pos, step = dir == TCOMMS_FSDP_FORWARD ? 1 : -1;
    int fwd = dir == TCOMMS_FSDP_FORWARD;
    int lo = fwd ? pos : pos - depth - 1, hi = fwd ? pos + depth : pos - 1; /* the window: positions (lo, hi] */
    for (int i = 1; i <= depth; i++) {
        int p = pos + i * step;
        if (p < 0 || p >= rt->nunits)
            break;
        int v = unit_at(rt, p);
        if (rt->units[v].buf >= 0 || rt->units[v].nbuckets == 0)
            continue;
        int bi = pick(rt, lo, hi);
        if (bi < 0)
            break; /* no room: the unit is gathered on demand */
        tcomms_status_t st = evict(rt, bi);
        if (st == TCOMMS_SUCCESS)
            st = start_gather(rt, v, bi);
        if (st != TCOMMS_SUCCESS)
            return st;
    }
    return TCOMMS_SUCCESS;
}

tcomms_status_t tc_fsdp_acquire(tcomms_fsdp_t *rt, int unit, tcomms_fsdp_dir_t dir, const char *fn)
{
    tc_fsdp_unit_t *un = &rt->units[unit];
    if (!tc_fsdp_zero3(rt) || un->nbuckets == 0) {
        un->ref[dir]++;
        return TCOMMS_SUCCESS;
    }
    if (un->buf < 0) {
        int bi = pick(rt, 0, -1);
        if (bi < 0)
            return no_buffer(rt, unit, fn);
        tcomms_status_t st = evict(rt, bi);
        if (st == TCOMMS_SUCCESS)
            st = start_gather(rt, unit, bi);
        if (st != TCOMMS_SUCCESS)
            return st;
    }
    un->ref[dir]++;
    tc_fsdp_buf_t *b = &rt->ubufs[un->buf];
    b->stamp = ++rt->clock;
    /* On the host, where a wait blocks, the prefetch is posted first, so it queues behind this unit's gather rather
     * than after the wait. On a GPU the caller's stream is joined to the gather lane first: joined after the
     * prefetch's copy-in, it would wait for that copy too. */
    if (rt->eager) {
        tcomms_status_t st = wait_gather(rt, b, 1);
        return st == TCOMMS_SUCCESS ? prefetch(rt, unit, dir) : st;
    }
    tcomms_status_t st = prefetch(rt, unit, dir);
    return st == TCOMMS_SUCCESS ? wait_gather(rt, b, 1) : st;
}

tcomms_status_t tc_fsdp_release(tcomms_fsdp_t *rt, int unit, tcomms_fsdp_dir_t dir, const char *fn)
{
    tc_fsdp_unit_t *un = &rt->units[unit];
    const char *d = dir == TCOMMS_FSDP_FORWARD ? "forward" : "backward";
    if (un->ref[dir] <= 0)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: unit %d holds no %s reference (post_%s without pre_%s)", fn,
                        unit, d, d, d);
    un->ref[dir]--;
    if (un->buf < 0 || referenced(un))
        return TCOMMS_SUCCESS;
    /* The last unit of the forward order is the first of the backward: kept, it needs no gather there. Its buffer
     * goes back to the pool as any unreferenced unit's when another unit needs one. */
    if (dir == TCOMMS_FSDP_FORWARD && (rt->cfg.keep_after_forward || un->pos == rt->nunits - 1))
        return TCOMMS_SUCCESS;
    return evict(rt, un->buf);
}

tcomms_status_t tc_fsdp_gathered(tcomms_fsdp_t *rt, int unit, void **data)
{
    *data = NULL;
    tc_fsdp_unit_t *un = &rt->units[unit];
    if (un->buf < 0)
        return TCOMMS_SUCCESS;
    tcomms_status_t st = wait_gather(rt, &rt->ubufs[un->buf], 1);
    if (st == TCOMMS_SUCCESS)
        *data = rt->ubufs[un->buf].data;
    return st;
}

tcomms_status_t tc_fsdp_drop_gathered(tcomms_fsdp_t *rt, int force, const char *fn)
{
    for (int u = 0; !force && u < rt->nunits; u++)
        if (referenced(&rt->units[u]))
            return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: unit %d still holds a reference (forward %d, backward %d)",
                            fn, u, rt->units[u].ref[0], rt->units[u].ref[1]);
    tcomms_status_t first = TCOMMS_SUCCESS;
    for (int i = 0; i < rt->nubufs; i++) {
        tcomms_status_t st = evict(rt, i);
        if (first == TCOMMS_SUCCESS)
            first = st;
    }
    /* The shards change next (install_weights) or are freed (destroy): no copy-in may still read them. */
    tcomms_status_t st = tc_fsdp_gather_settle(rt);
    return first == TCOMMS_SUCCESS ? st : first;
}

tcomms_status_t tcomms_fsdp_unshard(tcomms_fsdp_t *rt, int unit, tcomms_fsdp_dir_t dir)
{
    const char *fn = "tcomms_fsdp_unshard";
    tcomms_status_t st = tc_fsdp_ready(rt, fn);
    if (st == TCOMMS_SUCCESS)
        st = tc_fsdp_check_unit(rt, unit, fn);
    if (st != TCOMMS_SUCCESS)
        return st;
    if (dir != TCOMMS_FSDP_FORWARD && dir != TCOMMS_FSDP_BACKWARD)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: dir %d is not a tcomms_fsdp_dir_t", fn, (int)dir);
    if (!tc_fsdp_zero3(rt) || rt->units[unit].buf >= 0 || rt->units[unit].nbuckets == 0)
        return TCOMMS_SUCCESS;
    int bi = pick(rt, 0, -1);
    if (bi < 0)
        return TCOMMS_SUCCESS; /* as a prefetch: skipped when every buffer is in use */
    st = evict(rt, bi);
    return st == TCOMMS_SUCCESS ? start_gather(rt, unit, bi) : st;
}

tcomms_status_t tcomms_fsdp_pre_forward(tcomms_fsdp_t *rt, int unit)
{
    const char *fn = "tcomms_fsdp_pre_forward";
    tcomms_status_t st = tc_fsdp_ready(rt, fn);
    if (st == TCOMMS_SUCCESS)
        st = tc_fsdp_check_unit(rt, unit, fn);
    return st == TCOMMS_SUCCESS ? tc_fsdp_acquire(rt, unit, TCOMMS_FSDP_FORWARD, fn) : st;
}

tcomms_status_t tcomms_fsdp_post_forward(tcomms_fsdp_t *rt, int unit)
{
    const char *fn = "tcomms_fsdp_post_forward";
    tcomms_status_t st = tc_fsdp_ready(rt, fn);
    if (st == TCOMMS_SUCCESS)
        st = tc_fsdp_check_unit(rt, unit, fn);
    return st == TCOMMS_SUCCESS ? tc_fsdp_release(rt, unit, TCOMMS_FSDP_FORWARD, fn) : st;
}

tcomms_status_t tcomms_fsdp_param_data(tcomms_fsdp_t *rt, int param_id, void **data)
{
    const char *fn = "tcomms_fsdp_param_data";
    tcomms_status_t st = tc_fsdp_param_entry(rt, param_id, data, "data", fn);
    if (st != TCOMMS_SUCCESS)
        return st;
    const tc_fsdp_param_t *p = &rt->params[param_id];
    const tc_fsdp_bucket_t *k = &rt->buckets[p->bucket];
    if (!tc_fsdp_zero3(rt)) {
        *data = tc_fsdp_at(k->weights, p->offset, k->dtype);
        return TCOMMS_SUCCESS;
    }
    void *full = NULL;
    st = tc_fsdp_gathered(rt, p->unit, &full);
    if (st != TCOMMS_SUCCESS)
        return st;
    if (full == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: unit %d of parameter '%s' is not gathered (call "
                        "tcomms_fsdp_pre_forward or tcomms_fsdp_pre_backward first)", fn, p->unit, p->name);
    *data = tc_fsdp_at((char *)full + k->ubuf_off, p->offset, k->dtype);
    return TCOMMS_SUCCESS;
}
