/* SPDX-License-Identifier: BSD-3-Clause */
/* UCX communicators: creation (a root exchanges worker addresses through the store; a split reuses its parent's
 * endpoints), the agreement on a communicator id that no member uses already, the creation barrier, and
 * destruction (wait for running operations, drop the context reference). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ucx.h"

#define ADDR_MAGIC 0x58554354u /* "TCUX": a store record holding a worker address */

/* The lowest id this process has not used since its context was created. Guarded by the creation lock, which
 * also serialises agreements, so a proposal is never taken by two communicators of this process. */
static uint32_t next_cid = 1;

struct addr_record {
    uint32_t magic;
    uint32_t next_cid; /* this member's proposal */
    uint32_t cold;     /* this member's context has not been warmed up yet */
    uint32_t pad;
};

static void free_comm(tcu_comm_t *c)
{
    if (c == NULL)
        return;
    while (c->free) {
        tcu_task_t *t = c->free;
        c->free = t->cnext;
        tcu_task_destroy(t);
    }
    if (c->pair)
        tcu_task_destroy(c->pair);
    free(c->eps);
    free(c->send_seq);
    free(c->recv_seq);
    free(c);
}

/* Run one creation-time operation to completion (lock held); `algo` NULL: the selected one. */
static tcomms_status_t run_now(tcu_comm_t *c, const tcomms_coll_args_t *a, const tcu_algo_t *algo, int kind,
                               uint32_t seq)
{
    tcu_task_t *t;
    if (algo == NULL)
        algo = tcu_select(c, a, c->core->dtype_size(a->dtype));
    tcomms_status_t st = tcu_task_start(c, a, algo, kind, seq, &t);
    if (st != TCOMMS_SUCCESS)
        return st;
    tcu_drive(c->ctx, tcu_task_final, t, UINT64_MAX); /* bounded by the task's own deadline */
    st = tcu_task_report(t);
    tcu_task_release(t);
    return st;
}

/* Every member's address and proposal through the store, by way of rank 0 (core->store_allgather: about 3N store
 * requests, where every rank reading every rank's key was N^2), then an endpoint to each. *cold tells whether any
 * member still needs the transport warm-up. */
static tcomms_status_t exchange_addresses(tcu_comm_t *c, const tcomms_backend_comm_args_t *args, uint32_t *cid,
                                          int *cold)
{
    tcu_ctx_t *x = c->ctx;
    char prefix[512];
    size_t len = sizeof(struct addr_record) + x->addr_len;
    unsigned char *mine = malloc(len);
    void **vals = calloc((size_t)c->size, sizeof(*vals));
    size_t *lens = calloc((size_t)c->size, sizeof(*lens));
    int missing = -1;
    tcomms_status_t st = mine && vals && lens ? TCOMMS_SUCCESS
                                             : c->core->error(TCOMMS_ERR_NO_MEMORY, "ucx: out of memory for addresses");
    struct addr_record rec = {ADDR_MAGIC, next_cid, !x->warm, 0};
    *cold = !x->warm;
    *cid = next_cid;
    snprintf(prefix, sizeof(prefix), "%s/w", args->prefix);
    if (st == TCOMMS_SUCCESS) {
        memcpy(mine, &rec, sizeof(rec));
        memcpy(mine + sizeof(rec), x->addr, x->addr_len);
        /* on failure the store's message names the key waited for, "<prefix>/w<rank>" or "<prefix>/wall" */
        st = c->core->store_allgather(args->store, prefix, c->rank, c->size, mine, len, args->timeout_ms, vals, lens,
                                      &missing);
    }
    for (int r = 0; r < c->size && st == TCOMMS_SUCCESS; r++) {
        if (r == c->rank)
            continue;
        memcpy(&rec, vals[r], lens[r] >= sizeof(rec) ? sizeof(rec) : 0);
        if (lens[r] <= sizeof(rec) || rec.magic != ADDR_MAGIC) {
            st = c->core->error(TCOMMS_ERR_PROTOCOL, "ucx: rank %d's record does not hold a UCX worker address "
                                "(%zu bytes)", r, lens[r]);
        } else {
            if (rec.next_cid > *cid)
                *cid = rec.next_cid;
            *cold |= rec.cold != 0;
            pthread_mutex_lock(&x->lock);
            c->eps[r] = tcu_ep_get(x, (unsigned char *)vals[r] + sizeof(rec), lens[r] - sizeof(rec));
            pthread_mutex_unlock(&x->lock);
            if (c->eps[r] == NULL)
                st = TCOMMS_ERR_SYSTEM; /* tcu_ep_get set the message */
        }
    }
    for (int r = 0; vals != NULL && r < c->size; r++)
        free(vals[r]);
    free(vals);
    free(lens);
    free(mine);
    return st;
}

/* A split: the parent's endpoints, and the largest proposal of the members through an all_reduce among them,
 * tagged with the parent's id (the child has none yet) and a hash of the child's prefix. */
static tcomms_status_t agree_in_parent(tcu_comm_t *c, const tcomms_backend_comm_args_t *args, uint32_t *cid)
{
    const tcu_comm_t *p = args->parent;
    for (int i = 0; i < c->size; i++)
        c->eps[i] = i == c->rank ? NULL : p->eps[args->parent_ranks[i]];
    int64_t v = next_cid;
    *cid = next_cid;
    if (c->size == 1)
        return TCOMMS_SUCCESS;
    uint32_t h = 2166136261u;
    for (const char *s = args->prefix; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    tcomms_coll_args_t a = {.type = TCOMMS_COLL_ALL_REDUCE, .sendbuf = &v, .recvbuf = &v, .count = 1,
                            .dtype = TCOMMS_INT64, .op = TCOMMS_MAX, .in_place = 1, .timeout_ms = c->timeout_ms};
    c->cid = p->cid;
    pthread_mutex_lock(&c->ctx->lock);
    tcomms_status_t st = run_now(c, &a, NULL, TCU_KIND_BOOT, h ^ (h >> 16));
    pthread_mutex_unlock(&c->ctx->lock);
    *cid = (uint32_t)v;
    return st;
}

static tcomms_status_t join(tcu_comm_t *c, const tcomms_backend_comm_args_t *args)
{
    uint32_t cid = next_cid;
    int cold = 0;
    tcomms_status_t st = TCOMMS_SUCCESS;
    if (args->parent)
        st = agree_in_parent(c, args, &cid);
    else if (c->size > 1)
        st = exchange_addresses(c, args, &cid, &cold);
    if (st != TCOMMS_SUCCESS)
        return st;
    if (cid > TCU_CID_MAX)
        return c->core->error(TCOMMS_ERR_NOT_SUPPORTED, "ucx: no communicator id left (ids up to %u are taken); "
                              "destroy communicators or restart", TCU_CID_MAX);
    c->cid = cid;
    next_cid = cid + 1;
    tcu_ctx_t *x = c->ctx;
    pthread_mutex_lock(&x->lock);
    if (c->size > 1 && !args->parent) { /* a split's agreement already was a barrier */
        tcomms_coll_args_t a = {.type = TCOMMS_COLL_BARRIER, .dtype = TCOMMS_UINT8, .timeout_ms = c->timeout_ms};
        st = run_now(c, &a, NULL, TCU_KIND_COLL, c->coll_seq++);
        a.count = (size_t)x->warmup_rounds; /* every member read the same records: all agree on `cold` */
        if (st == TCOMMS_SUCCESS && cold && a.count)
            st = run_now(c, &a, &tcu_algo_warmup, TCU_KIND_COLL, c->coll_seq++);
        x->warm |= st == TCOMMS_SUCCESS && cold;
    }
    pthread_mutex_unlock(&x->lock);
    return st;
}

static void release_ctx(tcu_ctx_t *x)
{
    tcu_create_lock();
    if (tcu_ctx_release(x))
        next_cid = 1; /* a new worker: no message can reach it under an old id */
    tcu_create_unlock();
}

tcomms_status_t tcu_comm_create(const tcomms_backend_comm_args_t *args, void **bcomm)
{
    const tcomms_core_t *core = args->core;
    if (args->size > TCU_MAX_RANKS)
        return core->error(TCOMMS_ERR_NOT_SUPPORTED, "ucx: %d ranks is more than the %d the tag layout holds",
                           args->size, TCU_MAX_RANKS);
    tcu_comm_t *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return core->error(TCOMMS_ERR_NO_MEMORY, "ucx: out of memory for a communicator");
    c->core = core;
    snprintf(c->name, sizeof(c->name), "%s", args->name ? args->name : "");
    c->rank = args->rank;
    c->size = args->size;
    c->timeout_ms = args->timeout_ms;
    c->state = args->state;
    c->live.cnext = c->live.cprev = &c->live;
    c->bigq.qnext = c->bigq.qprev = &c->bigq;
    c->eps = calloc((size_t)c->size, sizeof(*c->eps));
    c->send_seq = calloc((size_t)c->size, sizeof(*c->send_seq));
    c->recv_seq = calloc((size_t)c->size, sizeof(*c->recv_seq));
    if (!c->eps || !c->send_seq || !c->recv_seq) {
        free_comm(c);
        return core->error(TCOMMS_ERR_NO_MEMORY, "ucx: out of memory for a communicator of %d ranks", args->size);
    }
    tcomms_status_t st = tcu_select_init(c);
    if (st != TCOMMS_SUCCESS) {
        free_comm(c);
        return st;
    }
    tcu_create_lock();
    st = tcu_ctx_acquire(core, &c->ctx);
    if (st == TCOMMS_SUCCESS) {
        tcu_ctx_note_local_size(c->ctx, args->local_size);
        st = join(c, args);
    }
    tcu_create_unlock();
    if (st != TCOMMS_SUCCESS) {
        if (c->ctx)
            tcu_comm_destroy(c);
        else
            free_comm(c);
        return st;
    }
    core->log(TCOMMS_LOG_DEBUG, "ucx", "'%s': rank %d of %d ready, communicator id %u%s", c->name, c->rank,
              c->size, c->cid, args->parent ? " (split)" : "");
    *bcomm = c;
    return TCOMMS_SUCCESS;
}

static int comm_idle(void *arg)
{
    return ((tcu_comm_t *)arg)->nactive == 0;
}

tcomms_status_t tcu_comm_destroy(void *bcomm)
{
    tcu_comm_t *c = bcomm;
    tcu_ctx_t *x = c->ctx;
    pthread_mutex_lock(&x->lock);
    /* The core calls this only once every handle is freed, so what runs still are operations freed while running
     * (each ends by its deadline at the latest); once they have, every task is back on the free list. */
    tcu_drive(x, comm_idle, c, UINT64_MAX);
    if (c->pair && c->pair->stranded) { /* UCX still holds requests in it */
        tcu_task_strand(c->pair);
        c->pair = NULL;
    }
    pthread_mutex_unlock(&x->lock);
    free_comm(c);
    release_ctx(x);
    return TCOMMS_SUCCESS;
}
