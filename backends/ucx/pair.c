/* SPDX-License-Identifier: BSD-3-Clause */
/* Blocking small collectives on 2 ranks: all_reduce, all_gather, reduce_scatter and all_to_all are one exchange
 * there, and the generic start (a task from the free list, the facts of the type and dtype looked up again, the
 * algorithm's general step) and the generic wait (lists, deadline, ready list, sweep) cost more than the exchange
 * itself (docs/perf.md, issue 29). Such a call runs on the communicator's own pair task, with the facts of the last
 * call kept: it posts the exchange and polls its two messages itself, and when they complete within a few polls,
 * as most do, it does the local work and returns, the task never linked anywhere. Otherwise the task becomes an
 * ordinary running task of the engine (linked, with its deadline) and the call waits as any other: deadlines,
 * abort, a broken communicator, failed endpoints, the shape check and the error reports treat it as any other.
 * The messages are exactly the ones the algorithm select.c picks sends (tags, slots, lengths), so a rank that makes
 * the same call non-blocking, and runs that algorithm, takes them. */
#include <stdlib.h>
#include <string.h>

#include "ucx.h"

/* Messages up to this size (all_reduce: below recursive doubling's limit in select.c, which tcu_pair_fits asks):
 * eager under every threshold of engine.c (no rendezvous, no big-collective slot). */
#define PAIR_MAX_BYTES (16u << 10)

/* The slot of each type's exchange in the algorithm it stands for: recursive doubling's first round
 * (allreduce.c, SLOT_ROUNDS), the first step of the others. */
#define ALLREDUCE_SLOT 2u

/* A call polls its messages this many times before its task joins the engine's lists: as many as tcu_drive makes
 * before its first clock reading, so that no call goes longer without one. */
#define OWN_POLLS 16

extern const tcu_algo_t tcu_allreduce_recursive_doubling;
extern const tcu_algo_t tcu_allgather_ring;
extern const tcu_algo_t tcu_allgather_linear;
extern const tcu_algo_t tcu_reduce_scatter_ring;
extern const tcu_algo_t tcu_alltoall_pairwise;
extern const tcu_algo_t tcu_alltoall_linear;

/* Does the algorithm select.c picks send, on 2 ranks, the one exchange tcu_pair_run posts? */
static int same_exchange(tcomms_coll_type_t type, const tcu_algo_t *algo)
{
    switch (type) {
    case TCOMMS_COLL_ALL_REDUCE:
        return algo == &tcu_allreduce_recursive_doubling;
    case TCOMMS_COLL_ALL_GATHER:
        return algo == &tcu_allgather_linear || algo == &tcu_allgather_ring;
    case TCOMMS_COLL_REDUCE_SCATTER:
        return algo == &tcu_reduce_scatter_ring;
    case TCOMMS_COLL_ALL_TO_ALL:
        return algo == &tcu_alltoall_linear || algo == &tcu_alltoall_pairwise;
    default:
        return 0;
    }
}

int tcu_pair_fits(tcu_comm_t *c, const tcomms_coll_args_t *a)
{
    struct tcu_pair_facts *f = &c->pair_facts;
    uint32_t key = 1u + ((uint32_t)a->type << 16 | (uint32_t)a->dtype << 8 | (uint32_t)a->op);
    if (key == f->key && a->count == f->count)
        return f->fits;
    if (c->size != 2 || c->forced[a->type] != NULL)
        return 0; /* a forced algorithm runs as itself (tests/test_ucx_algo) */
    f->key = key;
    f->count = a->count;
    f->esize = c->core->dtype_size(a->dtype);
    f->fits = a->count > 0 && a->count <= PAIR_MAX_BYTES / f->esize &&
              same_exchange(a->type, tcu_select(c, a, f->esize));
    if (f->fits) {
        f->shape = tcu_shape(a);
        f->reduce = a->type == TCOMMS_COLL_ALL_REDUCE || a->type == TCOMMS_COLL_REDUCE_SCATTER
                        ? c->core->reduce_fn(a->dtype, a->op)
                        : NULL;
    }
    return f->fits;
}

/* The exchange's send: our block, or the peer's block of sendbuf. Sent before the receive and the local work (the
 * peer waits for it): a rank's time from its peer's message to its own next send is the pair's round trip, and
 * what either rank does after its send overlaps the peer's part (docs/perf.md, issue 29, "the receive-to-send
 * path"). */
static void pair_send(tcu_task_t *t, const tcomms_coll_args_t *a)
{
    int peer = 1 - t->rank;
    size_t b = a->count * t->esize;
    const unsigned char *in = a->sendbuf;
    switch (a->type) {
    case TCOMMS_COLL_ALL_REDUCE:
        tcu_send(t, peer, ALLREDUCE_SLOT, in, b);
        break;
    case TCOMMS_COLL_ALL_GATHER:
        tcu_send(t, peer, 0, in, b);
        break;
    case TCOMMS_COLL_REDUCE_SCATTER:
    case TCOMMS_COLL_ALL_TO_ALL:
        tcu_send(t, peer, 0, in + (size_t)peer * b, b);
        break;
    default:
        break;
    }
}

/* Where the peer's block lands: in its place in recvbuf, except in place, where recvbuf still holds what we send or
 * reduce (all_gather aside, whose peer block has its own place): in scratch, taken by tcu_pair_run. */
static unsigned char *landing(const tcu_task_t *t)
{
    const tcomms_coll_args_t *a = &t->a;
    size_t b = a->count * t->esize;
    switch (a->type) {
    case TCOMMS_COLL_ALL_GATHER:
        return (unsigned char *)a->recvbuf + (size_t)(1 - t->rank) * b;
    case TCOMMS_COLL_ALL_TO_ALL:
        return a->in_place ? t->scratch : (unsigned char *)a->recvbuf + (size_t)(1 - t->rank) * b;
    default:
        return a->in_place ? t->scratch : a->recvbuf;
    }
}

/* Round 0: the exchange's receive (tcu_pair_run sent first: the peer waits for it), and our own block's copy. */
static void pair_recv(tcu_task_t *t)
{
    const tcomms_coll_args_t *a = &t->a;
    int me = t->rank;
    size_t b = a->count * t->esize;
    tcu_recv(t, 1 - me, a->type == TCOMMS_COLL_ALL_REDUCE ? ALLREDUCE_SLOT : 0, landing(t), b);
    if (a->in_place)
        return;
    if (a->type == TCOMMS_COLL_ALL_GATHER)
        memcpy((unsigned char *)a->recvbuf + (size_t)me * b, a->sendbuf, b);
    else if (a->type == TCOMMS_COLL_ALL_TO_ALL)
        memcpy((unsigned char *)a->recvbuf + (size_t)me * b, (const unsigned char *)a->sendbuf + (size_t)me * b, b);
}

/* Round 1: the local work. The reductions take their operands in the order of the algorithms they stand for
 * (allreduce.c rd_step, reduce_scatter.c ring_step), so every rank computes the same bits either way. */
static void pair_local(tcu_task_t *t)
{
    const tcomms_coll_args_t *a = &t->a;
    size_t n = a->count, b = n * t->esize;
    switch (a->type) {
    case TCOMMS_COLL_ALL_REDUCE: /* recursive doubling's one round */
        t->reduce(a->recvbuf, a->sendbuf, landing(t), n);
        break;
    case TCOMMS_COLL_REDUCE_SCATTER: /* the ring's one step: the peer's block went, ours came back */
        t->reduce(a->recvbuf, landing(t), (const unsigned char *)a->sendbuf + (size_t)t->rank * b, n);
        break;
    case TCOMMS_COLL_ALL_TO_ALL: /* linear: block peer went, the peer's block for us came */
        if (a->in_place)
            memcpy((unsigned char *)a->recvbuf + (size_t)(1 - t->rank) * b, t->scratch, b);
        break;
    default: /* all_gather: all in place already */
        break;
    }
}

/* The step of a pair task that became an ordinary running one: tcu_pair_run posted its exchange (round 0), so the
 * engine calls this only for the local work. */
static int pair_step(tcu_task_t *t)
{
    pair_local(t);
    return TCU_DONE;
}

/* Past its own polls, the caller's wait still watches the task's messages itself and advances it when they are
 * done: no ready list and no sweep for a task whose caller is looking at it anyway. tcu_drive's wait is otherwise
 * the same (clock, deadlines, yield, sleep). A failed message (ucs_error) is advanced the same way, into
 * tcu_task_fail. */
static int pair_done(void *arg)
{
    tcu_task_t *t = arg;
    if (t->status == TCOMMS_IN_PROGRESS && (t->pending == 0 || t->ucs_error))
        tcu_task_advance(t); /* the local work and the end, or the failure */
    return t->status != TCOMMS_IN_PROGRESS;
}

/* The call's messages ended (both, or one failed) within OWN_POLLS polls of the worker: nothing else needs the
 * task meanwhile (completions only count down `pending`, and a sweep other tasks need runs as in tcu_drive). A
 * broken communicator or a failed endpoint hands it to the engine, whose sweep knows what to fail. */
static int own_wait(tcu_task_t *t)
{
    tcu_ctx_t *x = t->comm->ctx;
    x->wait_epoch++; /* the progress thread sees a caller */
    for (int polls = 0; t->pending > 0 && !t->ucs_error; polls++) {
        if (polls == OWN_POLLS)
            return 0;
        ucp_worker_progress(x->worker);
        if (x->events) {
            if (x->broken || x->ep_failed)
                return 0;
            tcu_sweep(x);
        }
    }
    return !t->ucs_error;
}

int tcu_pair_run(tcu_comm_t *c, const tcomms_coll_args_t *a, uint32_t seq, uint64_t timeout_ns, tcu_task_t **out)
{
    tcu_task_t *t = c->pair;
    if (t == NULL && (t = c->pair = tcu_task_alloc()) == NULL)
        return 0;
    if (t->cnext != NULL) /* still held: an earlier call's failure, not yet reported */
        return 0;
    const struct tcu_pair_facts *f = &c->pair_facts;
    t->a = *a; /* no count arrays: none of the four types has them */
    t->esize = f->esize;
    if (a->in_place && a->type != TCOMMS_COLL_ALL_GATHER && tcu_scratch(t, a->count * t->esize) == NULL)
        return 0; /* the generic start reports it */
    t->reduce = f->reduce;
    t->sync = 0;
    t->big = 0;
    t->watched = 1;
    tcu_task_arm(t, c, &tcu_algo_pair, TCU_KIND_COLL, tcu_coll_low(seq, f->shape));
    pair_send(t, a);
    pair_recv(t); /* round 0; a failure to post is in ucs_error */
    t->round = 1;
    if (own_wait(t)) {
        tcu_task_release_requests(t);
        pair_local(t);
        tcu_task_end_locally(t);
        *out = NULL;
        return 1;
    }
    tcu_task_enlist(t); /* with round 1 pending: it fails at once on ucs_error, or ends if the messages did */
    *out = t;
    int done = tcu_drive(c->ctx, pair_done, t, timeout_ns);
    t->watched = 0; /* from here on, a handle's wait: completions put it on the ready list again */
    if (!done && (t->pending == 0 || t->ucs_error))
        tcu_task_ready(t);
    if (done && t->status == TCOMMS_SUCCESS) {
        tcu_task_release(t);
        *out = NULL;
    }
    return 1;
}

const tcu_algo_t tcu_algo_pair = {"pair", pair_step};
