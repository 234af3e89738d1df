/* SPDX-License-Identifier: BSD-3-Clause */
/* FSDP gradients: the backward entry points, gradient buffers (ZeRO-0/1: a persistent full buffer reduced once on
 * the last microbatch; ZeRO-2/3: slots taken per unit at pre_backward and reduce-scattered in place at
 * post_backward, their block added into the main-grad shard), the HSDP all-reduce or hybrid reduce-scatter over
 * inter on the last microbatch, and finish_grad_sync.
 *
 * On a GPU a slot's whole reduction (reduce-scatter, add, zeroing for its next use) is queued at post_backward on
 * the runtime's reduction lane (rt->eager), which waits for the caller's stream there; the caller's stream waits
 * only where it needs a result: a slot's zeroing before the slot is handed out again, a unit's additions before
 * sync_shard, all of them before finish_grad_sync and the outer reductions. So no reduction work sits between the
 * caller's kernels. On the host, where a wait blocks, a slot is completed only when it is needed. */
#include <stdlib.h>

#include "rt.h"

static int unit_ev(const tcomms_fsdp_t *rt, int unit)
{
    return TC_FSDP_EV_SLOTS + rt->ngslots + unit;
}

/* Lane `to` (caller's or reduction) waits for the work queued so far on the other one. */
static tcomms_status_t follow(tcomms_fsdp_t *rt, int to)
{
    if (to == TC_FSDP_LANE_REDUCE)
        return tc_fsdp_follow(rt, TC_FSDP_LANE_CALLER, TC_FSDP_LANE_REDUCE, TC_FSDP_EV_FORK);
    return tc_fsdp_follow(rt, TC_FSDP_LANE_REDUCE, TC_FSDP_LANE_CALLER, TC_FSDP_EV_JOIN);
}

tcomms_status_t tc_fsdp_reduce_init(tcomms_fsdp_t *rt)
{
    size_t most = 0;
    for (int b = 0; b < rt->nbuckets; b++)
        if (rt->buckets[b].shard_len > most)
            most = rt->buckets[b].shard_len;
    if (rt->cfg.outer == TCOMMS_FSDP_OUTER_OPTIM) {
        tcomms_status_t st = tc_fsdp_alloc(rt, most * tcomms_dtype_size(rt->cfg.main_dtype), &rt->staging);
        if (st != TCOMMS_SUCCESS)
            return st;
    }
    if (!tc_fsdp_slots(rt))
        return TCOMMS_SUCCESS;
    size_t bytes = 0;
    for (int u = 0; u < rt->nunits; u++)
        if (rt->units[u].gslot_bytes > bytes)
            bytes = rt->units[u].gslot_bytes;
    int n = rt->cfg.max_live_units > 2 ? rt->cfg.max_live_units : 2;
    if ((rt->gslots = calloc((size_t)n, sizeof(*rt->gslots))) == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "tcomms_fsdp_finalize: out of memory");
    rt->ngslots = n;
    for (int i = 0; i < n; i++) {
        tc_fsdp_buf_t *s = &rt->gslots[i];
        s->unit = -1;
        s->bytes = bytes;
        tcomms_status_t st = tc_fsdp_alloc(rt, bytes, &s->data);
        if (st != TCOMMS_SUCCESS)
            return st;
        if ((s->works = calloc((size_t)rt->max_unit_buckets + 1, sizeof(*s->works))) == NULL)
            return tc_error(TCOMMS_ERR_NO_MEMORY, "tcomms_fsdp_finalize: out of memory");
    }
    if (rt->ops->lanes == NULL)
        return TCOMMS_SUCCESS;
    tcomms_status_t st = rt->ops->lanes(rt->dev, unit_ev(rt, rt->nunits));
    rt->eager = st == TCOMMS_SUCCESS;
    return st;
}

/* Wait for slot `si`'s reduce-scatters and add this rank's block of each (config->reduce_dtype) into the bucket's
 * main-grad shard, or write it there scaled where zero_grad left the shard stale. */
static tcomms_status_t complete_slot(tcomms_fsdp_t *rt, int si)
{
    tc_fsdp_buf_t *s = &rt->gslots[si];
    const tc_fsdp_unit_t *un = &rt->units[s->unit];
    tcomms_dtype_t md = rt->cfg.main_dtype, rd = rt->cfg.reduce_dtype;
    for (int i = 0; i < un->nbuckets; i++) {
        tc_fsdp_bucket_t *k = &rt->buckets[un->buckets[i]];
        if (k->no_grad)
            continue;
        tcomms_status_t st = tc_fsdp_wait(rt, &s->works[i]);
        int keep = !k->grad_stale;
        if (k->direct_slot == si) { /* reduced straight into the main-grad shard, scale included */
            k->direct_slot = -1;
        } else if (st == TCOMMS_SUCCESS) {
            k->grad_stale = 0;
            st = tc_fsdp_add(rt, k->grad, md, tc_fsdp_at((char *)s->data + k->gslot_off, k->shard_off, rd), rd,
                             k->shard_len, rt->cfg.grad_scale, keep);
        }
        if (st != TCOMMS_SUCCESS)
            return st;
    }
    if (rt->eager) { /* zeroed for its next unit, which waits for that (take_slot) */
        tcomms_status_t st = tc_fsdp_zero(rt, s->data, un->gslot_bytes, TCOMMS_UINT8);
        if (st == TCOMMS_SUCCESS)
            st = tc_fsdp_signal(rt, TC_FSDP_LANE_REDUCE, TC_FSDP_EV_SLOTS + si);
        if (st == TCOMMS_SUCCESS)
            st = tc_fsdp_signal(rt, TC_FSDP_LANE_REDUCE, unit_ev(rt, s->unit));
        if (st != TCOMMS_SUCCESS)
            return st;
    }
    s->unit = -1;
    s->state = TC_FSDP_EMPTY;
    return TCOMMS_SUCCESS;
}

/* The slot whose reduce-scatter was posted first, or -1: completing in posting order keeps the order of additions
 * into a shard, hence its rounding, the same on every run. */
static int oldest_in_flight(const tcomms_fsdp_t *rt)
{
    int best = -1;
    for (int i = 0; i < rt->ngslots; i++)
        if (rt->gslots[i].state == TC_FSDP_READY && (best < 0 || rt->gslots[i].stamp < rt->gslots[best].stamp))
            best = i;
    return best;
}

/* Does a slot in flight hold gradients of `unit` (any unit when -1)? */
static int in_flight(const tcomms_fsdp_t *rt, int unit)
{
    for (int i = 0; i < rt->ngslots; i++)
        if (rt->gslots[i].state == TC_FSDP_READY && (unit < 0 || rt->gslots[i].unit == unit))
            return 1;
    return 0;
}

/* Complete slots in posting order until none in flight holds `unit`'s gradients (-1: until none is in flight).
 * Eager, none is in flight (only a post that failed half-way leaves one, whose handles destroy must free): the
 * caller's stream waits for what was queued. */
static tcomms_status_t complete_slots(tcomms_fsdp_t *rt, int unit)
{
    while (in_flight(rt, unit)) {
        tcomms_status_t st = complete_slot(rt, oldest_in_flight(rt));
        if (st != TCOMMS_SUCCESS)
            return st;
    }
    if (rt->eager)
        return unit < 0 ? follow(rt, TC_FSDP_LANE_CALLER) : tc_fsdp_await(rt, TC_FSDP_LANE_CALLER, unit_ev(rt, unit));
    return TCOMMS_SUCCESS;
}

/* Eager: the slot whose reduction was queued first, which the caller's stream waits for (zeroed again there). */
static tcomms_status_t take_eager(tcomms_fsdp_t *rt, int unit)
{
    int si = -1;
    for (int i = 0; i < rt->ngslots; i++)
        if (rt->gslots[i].state == TC_FSDP_EMPTY && (si < 0 || rt->gslots[i].stamp < rt->gslots[si].stamp))
            si = i;
    tcomms_status_t st = tc_fsdp_await(rt, TC_FSDP_LANE_CALLER, TC_FSDP_EV_SLOTS + si);
    if (st != TCOMMS_SUCCESS)
        return st;
    rt->gslots[si].unit = unit;
    rt->gslots[si].state = TC_FSDP_BUSY;
    rt->units[unit].slot = si;
    return TCOMMS_SUCCESS;
}

static tcomms_status_t take_slot(tcomms_fsdp_t *rt, int unit, const char *fn)
{
    int si = -1;
    for (int i = 0; i < rt->ngslots && si < 0; i++)
        if (rt->gslots[i].state == TC_FSDP_EMPTY)
            si = i;
    if (si >= 0 && rt->eager)
        return take_eager(rt, unit);
    if (si < 0 && (si = oldest_in_flight(rt)) >= 0) {
        tcomms_status_t st = complete_slot(rt, si);
        if (st != TCOMMS_SUCCESS)
            return st;
    }
    if (si < 0)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: unit %d needs a gradient buffer but all %d are held by units "
                        "between pre_backward and post_backward (units %d and %d, ...)", fn, unit, rt->ngslots,
                        rt->gslots[0].unit, rt->gslots[1].unit);
    tc_fsdp_buf_t *s = &rt->gslots[si];
    tcomms_status_t st = tc_fsdp_zero(rt, s->data, rt->units[unit].gslot_bytes, TCOMMS_UINT8);
    if (st != TCOMMS_SUCCESS)
        return st;
    s->unit = unit;
    s->state = TC_FSDP_BUSY;
    rt->units[unit].slot = si;
    return TCOMMS_SUCCESS;
}

/* The reduction that puts a bucket's first gradients of the step straight into its main-grad shard (which holds
 * zeros): SUM where grad_scale is 1, AVG where it is 1/S; -1 (go through the slot and an add) otherwise, and
 * where the slot's dtype is not the shard's. */
static int direct_op(const tcomms_fsdp_t *rt, const tc_fsdp_bucket_t *k)
{
    int size = rt->dom[k->domain].shard_size;
    if (!k->grad_fresh || size < 2 || rt->dom[k->domain].shard == NULL || rt->cfg.reduce_dtype != rt->cfg.main_dtype)
        return -1;
    if (rt->cfg.grad_scale == 1.0)
        return TCOMMS_SUM;
    return rt->cfg.grad_scale == 1.0 / size ? TCOMMS_AVG : -1;
}

/* Post the reduce-scatters of slot `si`'s unit (config->reduce_dtype). config->grad_scale is applied to the reduced
 * block as complete_slot adds it into the main-grad shard (a pass over 1/S of the data, not all of it); a bucket's
 * first gradients of the step are reduced straight into the shard where the scale is a SUM or an AVG and the
 * dtypes agree, with no add at all. */
static tcomms_status_t post_buckets(tcomms_fsdp_t *rt, int si)
{
    tc_fsdp_buf_t *s = &rt->gslots[si];
    const tc_fsdp_unit_t *un = &rt->units[s->unit];
    tcomms_dtype_t md = rt->cfg.main_dtype, rd = rt->cfg.reduce_dtype;
    for (int i = 0; i < un->nbuckets; i++) {
        tc_fsdp_bucket_t *k = &rt->buckets[un->buckets[i]];
        if (k->no_grad)
            continue;
        void *g = (char *)s->data + k->gslot_off;
        int op = direct_op(rt, k);
        tcomms_status_t st;
        if (op >= 0) {
            st = tc_fsdp_post_scatter_into(rt, k->domain, un->buckets[i], g, k->grad, k->shard_len, md,
                                           (tcomms_op_t)op, &s->works[i]); /* md == rd here */
            k->direct_slot = si;
            k->grad_stale = 0;
        } else {
            st = tc_fsdp_post(rt, TC_FSDP_REDUCE_SCATTER, k->domain, TC_FSDP_ON_SHARD, un->buckets[i], g,
                              k->shard_len, rd, &s->works[i]);
        }
        k->grad_fresh = 0;
        if (st != TCOMMS_SUCCESS)
            return st;
    }
    return TCOMMS_SUCCESS;
}

/* End of a unit's backward under ZeRO-2/3: reduce its slot, on the reduction lane and completed there at once
 * when eager. */
static tcomms_status_t post_slot(tcomms_fsdp_t *rt, int unit)
{
    tc_fsdp_unit_t *un = &rt->units[unit];
    int si = un->slot;
    tc_fsdp_buf_t *s = &rt->gslots[si];
    un->slot = -1;
    s->state = TC_FSDP_READY;
    s->stamp = ++rt->clock;
    if (!rt->eager)
        return post_buckets(rt, si);
    tcomms_status_t st = follow(rt, TC_FSDP_LANE_REDUCE);
    if (st == TCOMMS_SUCCESS)
        st = tc_fsdp_lane(rt, TC_FSDP_LANE_REDUCE);
    if (st == TCOMMS_SUCCESS)
        st = post_buckets(rt, si);
    if (st == TCOMMS_SUCCESS)
        st = complete_slot(rt, si);
    tcomms_status_t back = tc_fsdp_lane(rt, TC_FSDP_LANE_CALLER);
    return st != TCOMMS_SUCCESS ? st : back;
}

/* Close `unit`'s gradients for this microbatch (post_backward, or root_post_backward for a missing one). */
static tcomms_status_t close_grads(tcomms_fsdp_t *rt, int unit)
{
    tc_fsdp_unit_t *un = &rt->units[unit];
    un->grad_open = 0;
    return un->slot >= 0 ? post_slot(rt, unit) : TCOMMS_SUCCESS;
}

/* The last microbatch: ZeRO-0/1 reduce their full gradients; then HSDP all-reduces, or hybrid sharding
 * reduce-scatters, each bucket's shard over inter once its shard-group reduction is complete. */
static tcomms_status_t last_reductions(tcomms_fsdp_t *rt)
{
    tcomms_dtype_t md = rt->cfg.main_dtype;
    int no_shard = rt->cfg.strategy == TCOMMS_FSDP_NO_SHARD;
    tcomms_status_t st = TCOMMS_SUCCESS;
    for (int b = 0; b < rt->nbuckets && st == TCOMMS_SUCCESS && !tc_fsdp_slots(rt); b++) {
        tc_fsdp_bucket_t *k = &rt->buckets[b];
        if (k->no_grad)
            continue;
        st = tc_fsdp_scale(rt, k->grad, k->padded, md, rt->cfg.grad_scale);
        if (st == TCOMMS_SUCCESS)
            st = tc_fsdp_post(rt, no_shard ? TC_FSDP_ALL_REDUCE : TC_FSDP_REDUCE_SCATTER, k->domain, TC_FSDP_ON_SHARD,
                              b, k->grad, no_shard ? k->padded : k->shard_len, md, &k->red_work);
    }
    if (st != TCOMMS_SUCCESS || rt->cfg.outer == TCOMMS_FSDP_OUTER_NONE)
        return st;
    st = complete_slots(rt, -1);
    for (int b = 0; b < rt->nbuckets && st == TCOMMS_SUCCESS; b++) {
        tc_fsdp_bucket_t *k = &rt->buckets[b];
        if (k->no_grad)
            continue;
        st = tc_fsdp_wait(rt, &k->red_work);
        if (st == TCOMMS_SUCCESS) /* a unit with no backward this step reduces zeros */
            st = tc_fsdp_grad_settle(rt, b);
        void *shard = tc_fsdp_slots(rt) ? k->grad : tc_fsdp_at(k->grad, k->shard_off, md);
        if (st == TCOMMS_SUCCESS && rt->cfg.outer == TCOMMS_FSDP_OUTER_OPTIM)
            st = tc_fsdp_post(rt, TC_FSDP_REDUCE_SCATTER, k->domain, TC_FSDP_ON_INTER, b, shard, k->main_len, md,
                              &k->outer_work);
        else if (st == TCOMMS_SUCCESS)
            st = tc_fsdp_post(rt, TC_FSDP_ALL_REDUCE, k->domain, TC_FSDP_ON_INTER, b, shard, k->shard_len, md,
                              &k->outer_work);
    }
    return st;
}

tcomms_status_t tc_fsdp_reduce_drain(tcomms_fsdp_t *rt)
{
    tcomms_status_t first = rt->gslots ? complete_slots(rt, -1) : TCOMMS_SUCCESS;
    for (int b = 0; rt->buckets && b < rt->nbuckets; b++) {
        tcomms_status_t st = tc_fsdp_wait(rt, &rt->buckets[b].red_work);
        tcomms_status_t so = tc_fsdp_wait(rt, &rt->buckets[b].outer_work);
        if (first == TCOMMS_SUCCESS)
            first = st != TCOMMS_SUCCESS ? st : so;
    }
    return first;
}

tcomms_status_t tcomms_fsdp_zero_grad(tcomms_fsdp_t *rt)
{
    const char *fn = "tcomms_fsdp_zero_grad";
    tcomms_status_t st = tc_fsdp_ready(rt, fn);
    if (st != TCOMMS_SUCCESS)
        return st;
    if (rt->in_backward)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: called between root_pre_backward and root_post_backward", fn);
    if ((st = tc_fsdp_reduce_drain(rt)) != TCOMMS_SUCCESS)
        return st;
    /* Under ZeRO-2/3 the step's first reduction of a bucket overwrites its main-grad shard (a reduce-scatter
     * straight into it, or complete_slot writing the scaled block), so zeroing it now would be a pass over memory
     * for nothing: it is zeroed later only if no reduction came (tc_fsdp_grad_settle). */
    for (int b = 0; b < rt->nbuckets && st == TCOMMS_SUCCESS; b++) {
        tc_fsdp_bucket_t *k = &rt->buckets[b];
        k->grad_fresh = 1;
        k->grad_stale = !k->no_grad && tc_fsdp_slots(rt);
        if (!k->no_grad && !k->grad_stale)
            st = tc_fsdp_zero(rt, k->grad, tc_fsdp_slots(rt) ? k->shard_len : k->padded, rt->cfg.main_dtype);
    }
    if (st != TCOMMS_SUCCESS)
        return st;
    rt->microbatches = 0;
    rt->phase = TC_FSDP_ACCUM;
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcomms_fsdp_root_pre_backward(tcomms_fsdp_t *rt, int is_last)
{
    const char *fn = "tcomms_fsdp_root_pre_backward";
    tcomms_status_t st = tc_fsdp_ready(rt, fn);
    if (st != TCOMMS_SUCCESS)
        return st;
    if (rt->in_backward)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: called twice without root_post_backward (backward passes of "
                        "microbatches do not interleave)", fn);
    if (rt->phase == TC_FSDP_REDUCING)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: the step's last microbatch is done: call "
                        "tcomms_fsdp_finish_grad_sync, then tcomms_fsdp_zero_grad", fn);
    if (rt->phase == TC_FSDP_SYNCED)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: gradients are final: call tcomms_fsdp_zero_grad to start "
                        "the next step", fn);
    rt->in_backward = 1;
    rt->is_last = is_last != 0;
    return TCOMMS_SUCCESS;
}

static tcomms_status_t in_backward(const tcomms_fsdp_t *rt, int unit, const char *fn)
{
    tcomms_status_t st = tc_fsdp_ready(rt, fn);
    if (st == TCOMMS_SUCCESS)
        st = tc_fsdp_check_unit(rt, unit, fn);
    if (st == TCOMMS_SUCCESS && !rt->in_backward)
        st = tc_error(TCOMMS_ERR_INVALID_ARG, "%s: unit %d: called outside root_pre_backward .. root_post_backward",
                      fn, unit);
    return st;
}

tcomms_status_t tcomms_fsdp_pre_backward(tcomms_fsdp_t *rt, int unit)
{
    const char *fn = "tcomms_fsdp_pre_backward";
    tcomms_status_t st = in_backward(rt, unit, fn);
    if (st == TCOMMS_SUCCESS)
        st = tc_fsdp_acquire(rt, unit, TCOMMS_FSDP_BACKWARD, fn);
    if (st != TCOMMS_SUCCESS)
        return st;
    tc_fsdp_unit_t *un = &rt->units[unit];
    if (tc_fsdp_slots(rt) && un->gslot_bytes > 0 && un->slot < 0 && (st = take_slot(rt, unit, fn)) != TCOMMS_SUCCESS) {
        tc_fsdp_release(rt, unit, TCOMMS_FSDP_BACKWARD, fn);
        return st;
    }
    un->grad_open = 1;
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcomms_fsdp_post_backward(tcomms_fsdp_t *rt, int unit)
{
    const char *fn = "tcomms_fsdp_post_backward";
    tcomms_status_t st = in_backward(rt, unit, fn);
    if (st == TCOMMS_SUCCESS)
        st = tc_fsdp_release(rt, unit, TCOMMS_FSDP_BACKWARD, fn);
    if (st != TCOMMS_SUCCESS || rt->units[unit].ref[TCOMMS_FSDP_BACKWARD] > 0)
        return st;
    return close_grads(rt, unit);
}

tcomms_status_t tcomms_fsdp_root_post_backward(tcomms_fsdp_t *rt)
{
    const char *fn = "tcomms_fsdp_root_post_backward";
    tcomms_status_t st = tc_fsdp_ready(rt, fn);
    if (st != TCOMMS_SUCCESS)
        return st;
    if (!rt->in_backward)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: called without root_pre_backward", fn);
    /* Units whose post_backward did not come: release them and reduce what they hold, in unit order. */
    for (int u = 0; u < rt->nunits && st == TCOMMS_SUCCESS; u++) {
        while (rt->units[u].ref[TCOMMS_FSDP_BACKWARD] > 0 && st == TCOMMS_SUCCESS)
            st = tc_fsdp_release(rt, u, TCOMMS_FSDP_BACKWARD, fn);
        if (st == TCOMMS_SUCCESS && rt->units[u].grad_open)
            st = close_grads(rt, u);
    }
    if (st != TCOMMS_SUCCESS)
        return st;
    rt->in_backward = 0;
    rt->microbatches++;
    if (!rt->is_last)
        return TCOMMS_SUCCESS;
    rt->phase = TC_FSDP_REDUCING;
    /* The optimizer comes next and writes the main params (and the weight shards), which a prefetch's copy-in on
     * the gather lane may still be reading. */
    st = tc_fsdp_gather_settle(rt);
    return st == TCOMMS_SUCCESS ? last_reductions(rt) : st;
}

tcomms_status_t tc_fsdp_grad_settle(tcomms_fsdp_t *rt, int b)
{
    tc_fsdp_bucket_t *k = &rt->buckets[b];
    if (!k->grad_stale)
        return TCOMMS_SUCCESS;
    k->grad_stale = 0;
    return tc_fsdp_zero(rt, k->grad, k->shard_len, rt->cfg.main_dtype);
}

/* What finish_grad_sync and sync_shard check first. */
static tcomms_status_t after_backward(const tcomms_fsdp_t *rt, const char *fn)
{
    tcomms_status_t st = tc_fsdp_ready(rt, fn);
    if (st != TCOMMS_SUCCESS)
        return st;
    if (rt->in_backward)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: called between root_pre_backward and root_post_backward", fn);
    if (rt->phase == TC_FSDP_ACCUM)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: no microbatch was marked last (root_pre_backward with "
                        "is_last = 1, then root_post_backward)", fn);
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcomms_fsdp_finish_grad_sync(tcomms_fsdp_t *rt)
{
    const char *fn = "tcomms_fsdp_finish_grad_sync";
    tcomms_status_t st = after_backward(rt, fn);
    if (st == TCOMMS_SUCCESS)
        st = tc_fsdp_reduce_drain(rt);
    for (int b = 0; b < rt->nbuckets && st == TCOMMS_SUCCESS; b++)
        st = tc_fsdp_grad_settle(rt, b);
    if (st == TCOMMS_SUCCESS)
        rt->phase = TC_FSDP_SYNCED;
    return st;
}

tcomms_status_t tcomms_fsdp_sync_shard(tcomms_fsdp_t *rt, int i)
{
    const char *fn = "tcomms_fsdp_sync_shard";
    tcomms_status_t st = after_backward(rt, fn);
    if (st != TCOMMS_SUCCESS)
        return st;
    if (i < 0 || i >= rt->nbuckets)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: i = %d is outside 0..%d", fn, i, rt->nbuckets - 1);
    tc_fsdp_bucket_t *k = &rt->buckets[i];
    if (k->no_grad)
        return TCOMMS_SUCCESS;
    /* Slots complete in posting order, as in finish_grad_sync, so the additions into a shard round alike. */
    if (rt->gslots && (st = complete_slots(rt, k->unit)) != TCOMMS_SUCCESS)
        return st;
    st = tc_fsdp_wait(rt, &k->red_work);
    if (st == TCOMMS_SUCCESS)
        st = tc_fsdp_wait(rt, &k->outer_work);
    return st == TCOMMS_SUCCESS ? tc_fsdp_grad_settle(rt, i) : st;
}

tcomms_status_t tcomms_fsdp_grad_data(tcomms_fsdp_t *rt, int param_id, void **data)
{
    const char *fn = "tcomms_fsdp_grad_data";
    tcomms_status_t st = tc_fsdp_param_entry(rt, param_id, data, "data", fn);
    if (st != TCOMMS_SUCCESS)
        return st;
    const tc_fsdp_param_t *p = &rt->params[param_id];
    const tc_fsdp_bucket_t *k = &rt->buckets[p->bucket];
    const tc_fsdp_unit_t *un = &rt->units[p->unit];
    if (k->no_grad)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: parameter '%s' is TCOMMS_FSDP_PARAM_NO_GRAD", fn, p->name);
    if (!un->grad_open)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: unit %d of parameter '%s' is not between pre_backward and "
                        "post_backward", fn, p->unit, p->name);
    if (un->slot >= 0)
        *data = tc_fsdp_at((char *)rt->gslots[un->slot].data + k->gslot_off, p->offset, rt->cfg.reduce_dtype);
    else
        *data = tc_fsdp_at(k->grad, p->offset, rt->cfg.main_dtype);
    return TCOMMS_SUCCESS;
}
