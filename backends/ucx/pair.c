/* SPDX-License-Identifier: BSD-3-Clause */
/* Blocking small collectives on 2 ranks: all_reduce, all_gather, reduce_scatter and all_to_all are one exchange
 * there, and the generic start (a task from the free list, the facts of the type and dtype looked up again, the
 * algorithm's general step) cost more than the exchange itself (docs/perf.md, issue 29). Such a call runs on the
 * communicator's own pair task, with the facts of the last call kept, and a step that posts the exchange directly.
 * It is still a task of the engine: deadlines, abort, a broken communicator, failed endpoints, the shape check and
 * the error reports treat it as any other. The messages are exactly the ones the algorithm select.c picks sends
 * (tags, slots, lengths), so a rank that makes the same call non-blocking, and runs that algorithm, takes them. */
#include <stdlib.h>
#include <string.h>

#include "ucx.h"

/* Messages up to this size (all_reduce: below recursive doubling's limit in select.c, which tcu_pair_fits asks):
 * eager under every threshold of engine.c (no rendezvous, no big-collective slot). */
#define PAIR_MAX_BYTES (16u << 10)

/* The slot of each type's exchange in the algorithm it stands for: recursive doubling's first round
 * (allreduce.c, SLOT_ROUNDS), the first step of the others. */
#define ALLREDUCE_SLOT 2u

extern const tcu_algo_t tcu_allreduce_recursive_doubling;
extern const tcu_algo_t tcu_allgather_ring;
extern const tcu_algo_t tcu_allgather_linear;
extern const tcu_algo_t tcu_reduce_scatter_ring;
extern const tcu_algo_t tcu_alltoall_pairwise;
extern const tcu_algo_t tcu_alltoall_linear;

/* Does the algorithm select.c picks send, on 2 ranks, the one exchange pair_step posts? */
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

/* The exchange's send: our block, or the peer's block of sendbuf. Sent before anything else the call does (the
 * peer waits for it): a rank's time from its peer's message to its own next send is the pair's round trip, and
 * what either rank does after its send overlaps the peer's part (docs/perf.md, issue 29, "the receive-to-send
 * path"). An unknown type sends nothing: pair_step fails it. */
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

tcu_task_t *tcu_pair_start(tcu_comm_t *c, const tcomms_coll_args_t *a, uint32_t seq)
{
    tcu_task_t *t = c->pair;
    if (t == NULL && (t = c->pair = tcu_task_alloc()) == NULL)
        return NULL;
    if (t->cnext != NULL) /* still held: an earlier call's failure, not yet reported */
        return NULL;
    const struct tcu_pair_facts *f = &c->pair_facts;
    t->esize = f->esize;
    t->reduce = f->reduce;
    t->sync = 0;
    t->big = 0;
    t->watched = 1;
    tcu_task_arm(t, c, &tcu_algo_pair, TCU_KIND_COLL, tcu_coll_low(seq, f->shape));
    pair_send(t, a); /* a failure it records fails the task at enlist's first step */
    t->a = *a;       /* no count arrays: none of the four types has them */
    tcu_task_enlist(t);
    return t;
}

/* The caller's wait watches the task's messages itself and advances it when they are done: no ready list and no
 * sweep for a task whose caller is looking at it anyway. tcu_drive's wait is otherwise the same (clock, deadlines,
 * yield, sleep). A failed message (ucs_error) is advanced the same way, into tcu_task_fail. */
static int pair_done(void *arg)
{
    tcu_task_t *t = arg;
    if (t->status == TCOMMS_IN_PROGRESS && (t->pending == 0 || t->ucs_error))
        tcu_task_advance(t); /* the local work and the end, or the failure */
    return t->status != TCOMMS_IN_PROGRESS;
}

int tcu_pair_wait(tcu_task_t *t, uint64_t timeout_ns)
{
    int done = tcu_drive(t->comm->ctx, pair_done, t, timeout_ns);
    t->watched = 0; /* from here on, a handle's wait: completions put it on the ready list again */
    if (!done && (t->pending == 0 || t->ucs_error))
        tcu_task_ready(t);
    return done;
}

/* Round 0 posts the exchange's receive (tcu_pair_start sent first: the peer waits for it); round 1 does the local
 * work. Out of place the
 * incoming block lands in recvbuf; in place, where recvbuf still holds what we send or reduce, in scratch. The
 * reductions take their operands in the order of the algorithms they stand for (allreduce.c rd_step,
 * reduce_scatter.c ring_step), so every rank computes the same bits either way. */
static int pair_step(tcu_task_t *t)
{
    const tcomms_coll_args_t *a = &t->a;
    int me = t->rank, peer = 1 - me;
    size_t n = a->count, b = n * t->esize;
    const unsigned char *in = a->sendbuf;
    unsigned char *out = a->recvbuf;
    unsigned char *landed = out;
    if (a->in_place && a->type != TCOMMS_COLL_ALL_GATHER && (landed = tcu_scratch(t, b)) == NULL)
        return TCOMMS_ERR_NO_MEMORY;
    switch (a->type) {
    case TCOMMS_COLL_ALL_REDUCE: /* recursive doubling's one round */
        if (t->round == 0) {
            tcu_recv(t, peer, ALLREDUCE_SLOT, landed, b);
            return TCU_MORE;
        }
        t->reduce(out, in, landed, n);
        return TCU_DONE;
    case TCOMMS_COLL_ALL_GATHER: /* linear (or ring): our block from sendbuf, the peer's into place */
        if (t->round == 0) {
            tcu_recv(t, peer, 0, out + (size_t)peer * b, b);
            if (!a->in_place)
                memcpy(out + (size_t)me * b, in, b);
            return TCU_MORE;
        }
        return TCU_DONE;
    case TCOMMS_COLL_REDUCE_SCATTER: /* the ring's one step: the peer's block goes, ours comes back */
        if (t->round == 0) {
            tcu_recv(t, peer, 0, landed, b);
            return TCU_MORE;
        }
        t->reduce(out, landed, in + (size_t)me * b, n);
        return TCU_DONE;
    case TCOMMS_COLL_ALL_TO_ALL: /* linear: block peer goes, the peer's block for us comes */
        if (t->round == 0) {
            tcu_recv(t, peer, 0, a->in_place ? landed : out + (size_t)peer * b, b);
            if (!a->in_place)
                memcpy(out + (size_t)me * b, in + (size_t)me * b, b);
            return TCU_MORE;
        }
        if (a->in_place)
            memcpy(out + (size_t)peer * b, landed, b);
        return TCU_DONE;
    default:
        return tcu_fail(t, TCOMMS_ERR_INTERNAL, "no pair exchange for this operation");
    }
}

const tcu_algo_t tcu_algo_pair = {"pair", pair_step};
