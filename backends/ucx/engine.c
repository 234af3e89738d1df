/* SPDX-License-Identifier: BSD-3-Clause */
/* The engine's mechanics: tasks (taken from a per-communicator free list, so the hot path does not allocate),
 * advancing a task round by round, and ending it: success (with the AVG epilogue), or failure (requests cancelled,
 * the communicator broken). The messages a step posts are message.c's. Every function here runs with the context
 * lock held. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ucx.h"

#define KEEP_TASKS 64                 /* free tasks a communicator keeps at least (engine.c: recycle) */
#define KEEP_NS (1000ull * 1000 * 1000) /* ... and more while a spell of the last second needed them */
#define MSG_BYTES 512                 /* a task's error message at most */
#define KEEP_SCRATCH (64u << 20)      /* scratch bytes kept by free tasks per communicator */
#define BIG_BYTES (64u << 10)         /* a collective with a message this large or larger is "big" ... */
#define BIG_RUNNING 2                 /* ... and at most this many big ones run at once per communicator */
/* Messages from these sizes go by rendezvous, a single copy (context.c, RNDV_SEND_NBR_THRESH, says how): an
 * operation that only copies gains from 32 KiB, a reducing one from 64 KiB (it reduces eager fragments as they
 * come). On an oversubscribed host each rendezvous handshake waits for the peer to be scheduled: copies gain only
 * from 128 KiB there, reductions not below 1 MiB, UCX's FAST_CMPL threshold (docs/perf.md, issue 29's copy work). */
#define COPY_RNDV_BYTES (32u << 10)
#define COPY_RNDV_CROWDED_BYTES (128u << 10)
#define REDUCE_RNDV_BYTES (64u << 10)

const char *tcu_coll_name(tcomms_coll_type_t type)
{
    const tcomms_coll_info_t *info = tcu_coll_info(type);
    return info != NULL ? info->name : "operation";
}

/* ---- the ready list ------------------------------------------------------------------------------------------- */

/* The sweep advances the tasks on this list and no others: walking every running task after each completion made
 * the cost of an operation grow with the number in flight. In order of readiness, so no task waits for long. */
void tcu_task_ready(tcu_task_t *t)
{
    tcu_ctx_t *x = t->comm->ctx;
    x->events = 1;
    if (t->ready)
        return;
    t->ready = 1;
    t->rnext = &x->ready;
    t->rprev = x->ready.rprev;
    x->ready.rprev->rnext = t;
    x->ready.rprev = t;
}

void tcu_task_unready(tcu_task_t *t)
{
    if (!t->ready)
        return;
    t->ready = 0;
    t->rprev->rnext = t->rnext;
    t->rnext->rprev = t->rprev;
}

/* Scratch starts at recvbuf's offset modulo TCU_SCRATCH_ALIGN. A message that lands in scratch usually comes from
 * the peer's copy of the same buffer (in-place all_to_all: block q of its recvbuf into block q of our scratch), and
 * ranks allocate alike, so source and destination then share their offset within a cache line. That matters for a
 * rendezvous, which the kernel copies (process_vm_readv, cma) with rep movsb: on AMD EPYC that copy is several times
 * slower when the destination's offset within a line lies a little past the source's, and malloc's scratch (16
 * bytes into a page) against a page-aligned user buffer was such a case (docs/perf.md, "what limits the 2-rank
 * large copies"). */
static unsigned char *scratch_view(const tcu_task_t *t)
{
    if (t->scratch_mem == NULL)
        return NULL;
    return t->scratch_mem + (uintptr_t)t->a.recvbuf % TCU_SCRATCH_ALIGN;
}

void *tcu_scratch(tcu_task_t *t, size_t bytes)
{
    if (bytes > t->cap_scratch || t->scratch_mem == NULL) {
        size_t cap = bytes < 256 ? 256 : bytes;
        void *p;
        if (cap > SIZE_MAX - TCU_SCRATCH_ALIGN || posix_memalign(&p, TCU_SCRATCH_ALIGN, cap + TCU_SCRATCH_ALIGN) != 0)
            return NULL;
        unsigned char *old = scratch_view(t);
        if (old != NULL) /* keep what the task wrote there, as realloc would */
            memcpy((unsigned char *)p + (old - t->scratch_mem), old, t->cap_scratch);
        free(t->scratch_mem);
        t->scratch_mem = p;
        t->cap_scratch = cap;
    }
    t->scratch = scratch_view(t);
    return t->scratch;
}

/* ---- ending a task ------------------------------------------------------------------------------------------- */

/* A communicator keeps its finished tasks for reuse, as many as were live at once in its busy spells (from one idle
 * moment, no task live, to the next) of the last KEEP_NS, at least KEEP_TASKS. A program that keeps 10^5 operations
 * in flight, with a blocking call between its rounds, then reuses its tasks instead of allocating and freeing them
 * each round, a cost that grew with the number in flight (docs/perf.md, issue 29); one that goes back to a few
 * operations at a time gives the surplus back at its first idle moment after KEEP_NS. Scratch is kept up to
 * KEEP_SCRATCH. */
static void trim(tcu_comm_t *c)
{
    uint64_t now = c->ctx->last_post_ns; /* the clock as the last post read it: no clock read at every idle moment */
    if (c->keep < KEEP_TASKS)
        c->keep = KEEP_TASKS;
    if (c->peak * 2 >= c->keep) { /* this spell needed about as many: keep them longer */
        if (c->peak > c->keep)
            c->keep = c->peak;
        c->keep_ns = now;
    } else if (now - c->keep_ns > KEEP_NS) {
        c->keep = c->peak > KEEP_TASKS ? c->peak : KEEP_TASKS;
        c->keep_ns = now;
    }
    c->peak = 0;
    while (c->nfree > c->keep) {
        tcu_task_t *t = c->free;
        c->free = t->cnext;
        c->nfree--;
        c->kept_scratch -= t->cap_scratch;
        tcu_task_destroy(t);
    }
}

/* A task whose lent requests UCX still holds (a failure could not cancel them: sends in flight) waits on its
 * context's list until the worker is gone (tcu_task_free_stranded): UCX may still write into it and call back. */
void tcu_task_strand(tcu_task_t *t)
{
    tcu_ctx_t *x = t->comm->ctx;
    t->qnext = x->stranded;
    x->stranded = t;
}

void tcu_task_free_stranded(tcu_ctx_t *x)
{
    while (x->stranded) {
        tcu_task_t *t = x->stranded;
        x->stranded = t->qnext;
        t->stranded = 0;
        tcu_task_destroy(t);
    }
}

static void recycle(tcu_task_t *t)
{
    tcu_comm_t *c = t->comm;
    t->cprev->cnext = t->cnext;
    t->cnext->cprev = t->cprev;
    if (t == c->pair) { /* not on the free list: idle again (pair.c) */
        t->cnext = t->cprev = NULL;
        return;
    }
    c->nlive--;
    if (t->stranded) {
        tcu_task_strand(t);
        return;
    }
    if (c->kept_scratch + t->cap_scratch > KEEP_SCRATCH) {
        free(t->scratch_mem);
        t->scratch = t->scratch_mem = NULL;
        t->cap_scratch = 0;
    }
    c->kept_scratch += t->cap_scratch;
    t->cnext = c->free;
    c->free = t;
    c->nfree++;
    if (c->nlive == 0)
        trim(c);
}

/* Big collectives beyond BIG_RUNNING wait in posting order, on the communicator's queue. Running more at once gains
 * nothing on a busy core (every one of them moves data through the same CPU), and each needs its own scratch: twenty
 * 2 MiB all_reduces posted together would fault in twenty fresh scratch buffers instead of reusing two. Any rank's
 * oldest unfinished collective is always running, so all of them end; point-to-point never waits (a rank may post a
 * receive before the send its peer waits for). A count and a queue rather than a walk over the communicator's
 * tasks: those include every finished one whose handle is still held. */
static int is_big(const tcu_comm_t *c, const tcomms_coll_args_t *a, size_t esize)
{
    size_t bytes = a->count * esize;
    const tcomms_coll_info_t *info = tcu_coll_info(a->type);
    if (info->count_arrays == 0 && (info->flags & (TCOMMS_COLL_SEND_PER_RANK | TCOMMS_COLL_RECV_PER_RANK)))
        bytes *= (size_t)c->size;
    return bytes >= BIG_BYTES;
}

static void enqueue_big(tcu_task_t *t)
{
    tcu_comm_t *c = t->comm;
    t->queued = 1;
    t->qnext = &c->bigq;
    t->qprev = c->bigq.qprev;
    c->bigq.qprev->qnext = t;
    c->bigq.qprev = t;
}

static void dequeue_big(tcu_task_t *t)
{
    t->queued = 0;
    t->qprev->qnext = t->qnext;
    t->qnext->qprev = t->qprev;
}

/* The oldest queued task of `done`'s communicator takes its slot and starts at the next sweep, with `done`'s
 * scratch when that is larger than its own: scratch already faulted in passes from one big collective to the
 * next. */
static void start_queued(tcu_task_t *done)
{
    tcu_comm_t *c = done->comm;
    c->big_running--;
    tcu_task_t *t = c->bigq.qnext;
    if (t == &c->bigq)
        return;
    if (done->cap_scratch > t->cap_scratch) {
        unsigned char *p = t->scratch_mem;
        size_t cap = t->cap_scratch;
        t->scratch_mem = done->scratch_mem;
        t->cap_scratch = done->cap_scratch;
        done->scratch_mem = p;
        done->cap_scratch = cap;
        t->scratch = scratch_view(t);
        done->scratch = scratch_view(done);
    }
    dequeue_big(t);
    c->big_running++;
    tcu_task_ready(t);
}

static void finish(tcu_task_t *t)
{
    t->aprev->anext = t->anext;
    t->anext->aprev = t->aprev;
    t->anext = t->aprev = t;
    t->comm->ctx->nactive--;
    t->comm->ctx->task_ended |= t->owes;
    t->comm->nactive--;
    t->comm->in_flight -= t->kind == TCU_KIND_COLL;
    tcu_task_unready(t);
    if (t->queued)
        dequeue_big(t);
    else if (t->big)
        start_queued(t);
    if (!t->held)
        recycle(t);
}

/* The task's error message; a fixed one when there was no memory to write it. */
static const char *task_why(const tcu_task_t *t)
{
    return t->msg != NULL ? t->msg : "ucx: an operation failed, and there was no memory left to describe how";
}

static void vfail(tcu_task_t *t, tcomms_status_t status, const char *fmt, va_list ap)
{
    if (t->status != TCOMMS_IN_PROGRESS)
        return;
    tcu_task_drop_requests(t);
    tcu_comm_t *c = t->comm;
    if (t->msg == NULL)
        t->msg = malloc(MSG_BYTES);
    if (t->msg != NULL) {
        int n = snprintf(t->msg, MSG_BYTES, "ucx %s (%s) on '%s' (rank %d of %d): ", tcu_coll_name(t->a.type),
                         t->algo->name, c->name, c->rank, c->size);
        if (n >= 0 && (size_t)n < MSG_BYTES)
            vsnprintf(t->msg + n, MSG_BYTES - (size_t)n, fmt, ap);
    }
    t->status = status;
    tcu_comm_break(c, status, task_why(t));
    finish(t);
}

void tcu_task_fail(tcu_task_t *t, tcomms_status_t status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(t, status, fmt, ap);
    va_end(ap);
}

int tcu_fail(tcu_task_t *t, tcomms_status_t status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(t, status, fmt, ap);
    va_end(ap);
    return (int)status;
}

static void fail_ucs(tcu_task_t *t)
{
    ucs_status_t st = (ucs_status_t)t->ucs_error;
    int peer = t->error_peer;
    const char *what = "a message to or from";
    for (int i = 0; i < t->nreqs; i++) {
        if (ucp_request_check_status(t->reqs[i].req) == st) {
            peer = t->reqs[i].peer;
            what = t->reqs[i].send ? "a send to" : "a receive from";
            break;
        }
    }
    if (st == UCS_ERR_MESSAGE_TRUNCATED || st == TCU_ERR_SHORT_MESSAGE)
        tcu_task_fail(t, TCOMMS_ERR_INVALID_ARG, "a message from rank %d is %s than its receive buffer: counts "
                      "or dtypes differ between ranks", peer, st == TCU_ERR_SHORT_MESSAGE ? "shorter" : "longer");
    else if (st == UCS_ERR_NO_MEMORY)
        tcu_task_fail(t, TCOMMS_ERR_NO_MEMORY, "out of memory posting a message to rank %d", peer);
    else
        tcu_task_fail(t, TCOMMS_ERR_REMOTE, "%s rank %d failed: %s", what, peer, ucs_status_string(st));
}

static int is_reducing(tcomms_coll_type_t type)
{
    return (tcu_coll_info(type)->flags & TCOMMS_COLL_REDUCES) != 0;
}

/* AVG reduced as SUM; divide where the result landed (a.count is this rank's result length for every type). */
static void epilogue(tcu_task_t *t)
{
    if (t->a.op == TCOMMS_AVG && is_reducing(t->a.type) && t->a.count &&
        (t->a.type != TCOMMS_COLL_REDUCE || t->rank == t->a.peer))
        t->core->avg_finish(t->a.recvbuf, t->a.count, t->a.dtype, t->size);
}

static void complete(tcu_task_t *t)
{
    epilogue(t);
    t->status = TCOMMS_SUCCESS;
    finish(t);
}

void tcu_task_end_locally(tcu_task_t *t)
{
    epilogue(t);
    t->status = TCOMMS_SUCCESS;
    if (t->owes) { /* what enlist and finish tell the progress thread: linger for what the worker may owe */
        tcu_ctx_t *x = t->comm->ctx;
        x->task_ended = 1;
        x->last_post_ns = tc_now_coarse_ns();
        if (x->deep_sleep)
            tcu_thread_wake(x);
    }
}

void tcu_task_advance(tcu_task_t *t)
{
    while (t->status == TCOMMS_IN_PROGRESS) {
        if (t->ucs_error) {
            fail_ucs(t);
            return;
        }
        if (t->pending > 0)
            return;
        tcu_task_release_requests(t);
        int r = t->algo->step(t);
        if (t->status != TCOMMS_IN_PROGRESS)
            return; /* the step called tcu_fail */
        if (t->ucs_error) {
            fail_ucs(t);
            return;
        }
        if (r < 0) {
            tcu_task_fail(t, (tcomms_status_t)r, "step %d failed%s", t->round,
                          r == TCOMMS_ERR_NO_MEMORY ? ": out of memory for scratch" : "");
            return;
        }
        if (r == TCU_DONE) {
            if (t->nreqs)
                tcu_task_fail(t, TCOMMS_ERR_INTERNAL, "step %d posted messages and returned TCU_DONE", t->round);
            else
                complete(t);
            return;
        }
        t->round++;
    }
}

/* ---- starting and releasing tasks ---------------------------------------------------------------------------- */

/* Post time for the deadline, from the coarse clock, which the fast path reads for less than tc_now_ns
 * (docs/perf.md, "Measurements behind the code"). It lags the precise one by up to its resolution (one kernel tick,
 * 1/HZ), which the slack covers: a deadline fires at most that much late, never early. */
#define COARSE_SLACK_NS (10ull * 1000 * 1000)

/* The layout engine.h gives a task by cache line holds only if the task starts a line. */
_Static_assert(offsetof(tcu_task_t, comm) == 3 * 64 && offsetof(tcu_task_t, rprev) + sizeof(void *) <= 4 * 64,
               "a completion's fields fill line 3 of a task");
_Static_assert(offsetof(tcu_task_t, inline_reqs) == 4 * 64 && sizeof(struct tcu_req) * TCU_INLINE_REQS <= 64,
               "the inline requests fill line 4 of a task");
_Static_assert(offsetof(tcu_task_t, scratch) + sizeof(void *) <= 6 * 64, "a post's fields end with line 5");

tcu_task_t *tcu_task_alloc(void)
{
    void *p;
    if (posix_memalign(&p, 64, tcu_task_bytes()) != 0)
        return NULL;
    tcu_task_t *t = memset(p, 0, sizeof(tcu_task_t));
    t->reqs = t->inline_reqs;
    t->cap_reqs = TCU_INLINE_REQS;
    return t;
}

static tcu_task_t *take_task(tcu_comm_t *c)
{
    tcu_task_t *t = c->free;
    if (t) {
        c->free = t->cnext;
        c->nfree--;
        c->kept_scratch -= t->cap_scratch;
    } else if ((t = tcu_task_alloc()) == NULL) {
        return NULL;
    }
    if (++c->nlive > c->peak)
        c->peak = c->nlive;
    return t;
}

/* Copy the v-variant arrays: the caller's may go away when post() returns. */
static int keep_arrays(tcu_task_t *t, int n)
{
    const size_t **fields[4] = {&t->a.sendcounts, &t->a.sdispls, &t->a.recvcounts, &t->a.rdispls};
    size_t need = 4 * (size_t)n;
    if (need > t->cap_varrays) {
        size_t *p = realloc(t->varrays, need * sizeof(*p));
        if (p == NULL)
            return -1;
        t->varrays = p;
        t->cap_varrays = need;
    }
    for (int k = 0; k < 4; k++) {
        if (*fields[k] == NULL)
            continue;
        memcpy(t->varrays + (size_t)k * n, *fields[k], (size_t)n * sizeof(size_t));
        *fields[k] = t->varrays + (size_t)k * n;
    }
    return 0;
}

tcomms_status_t tcu_task_start(tcu_comm_t *c, const tcomms_coll_args_t *a, const tcu_algo_t *algo, int kind,
                               uint32_t seq, tcu_task_t **out)
{
    tcu_task_t *t = take_task(c);
    if (t == NULL)
        return c->core->error(TCOMMS_ERR_NO_MEMORY, "ucx %s on '%s': out of memory for a task",
                              tcu_coll_name(a->type), c->name);
    t->a = *a;
    if (tcu_coll_info(a->type)->count_arrays == 0)
        t->a.sendcounts = t->a.sdispls = t->a.recvcounts = t->a.rdispls = NULL;
    else if (keep_arrays(t, c->size) != 0) {
        c->nlive--;
        tcu_task_destroy(t);
        return c->core->error(TCOMMS_ERR_NO_MEMORY, "ucx %s on '%s': out of memory copying counts",
                              tcu_coll_name(a->type), c->name);
    }
    t->scratch = scratch_view(t); /* kept from an earlier task: at this task's offset */
    t->esize = c->core->dtype_size(a->dtype);
    t->reduce = is_reducing(a->type) ? c->core->reduce_fn(a->dtype, a->op) : NULL;
    t->sync = kind == TCU_KIND_COLL && tcu_shape_rooted(a->type);
    uint32_t low = seq; /* send/recv: the per-peer sequence */
    if (kind == TCU_KIND_BOOT)
        low = (seq & TCU_BOOT_HASH_MASK) << TCU_SHAPE_SHIFT;
    else if (kind == TCU_KIND_COLL)
        low = tcu_coll_low(seq, tcu_shape(a));
    t->big = kind == TCU_KIND_COLL && is_big(c, a, t->esize);
    tcu_task_launch(t, c, algo, kind, low);
    *out = t;
    return TCOMMS_SUCCESS;
}

/* The two halves of tcu_task_launch, inline there, so that the generic path pays no call for the split (pair.c
 * calls them apart: ucx.h). */
static inline void arm(tcu_task_t *t, tcu_comm_t *c, const tcu_algo_t *algo, int kind, uint32_t low)
{
    t->rank = c->rank;
    t->size = c->size;
    t->round = 0;
    memset(t->state, 0, sizeof(t->state));
    t->comm = c;
    t->core = c->core;
    t->algo = algo;
    t->kind = kind;
    t->p2p = kind == TCU_KIND_P2P;
    int crowded = tcu_oversubscribed(c->ctx);
    t->rndv_from = t->reduce ? (crowded ? SIZE_MAX : REDUCE_RNDV_BYTES)
                             : (crowded ? COPY_RNDV_CROWDED_BYTES : COPY_RNDV_BYTES);
    t->tag_base = tcu_tag(kind, c->cid, 0, low);
    t->status = TCOMMS_IN_PROGRESS;
    t->ucs_error = 0;
    t->error_peer = -1;
    t->pending = t->ready = t->nreqs = t->posting = t->owes = 0;
    t->held = 1;
    t->queued = 0;
}

static inline void enlist(tcu_task_t *t)
{
    tcu_comm_t *c = t->comm;
    tcu_ctx_t *x = c->ctx;
    x->last_post_ns = tc_now_coarse_ns();
    t->deadline_ns = x->last_post_ns + COARSE_SLACK_NS + (uint64_t)t->a.timeout_ms * 1000000ull;
    if (t->big && c->big_running >= BIG_RUNNING)
        enqueue_big(t);
    else
        c->big_running += t->big;
    t->cnext = &c->live;
    t->cprev = c->live.cprev;
    c->live.cprev->cnext = t;
    c->live.cprev = t;
    t->anext = &x->active;
    t->aprev = x->active.aprev;
    x->active.aprev->anext = t;
    x->active.aprev = t;
    x->nactive++;
    c->nactive++;
    c->in_flight += t->kind == TCU_KIND_COLL;
    /* the first look at this task's deadline and at the shapes of what its peers sent (tcu_task_check_shape) */
    uint64_t check = x->last_post_ns + TCU_CHECK_EVERY_NS;
    if (t->deadline_ns < check)
        check = t->deadline_ns;
    if (check < x->next_check_ns)
        x->next_check_ns = check;
    if (x->deep_sleep) /* the first post after a quiet second: let the thread tick again */
        tcu_thread_wake(x);
    if (!t->queued)
        tcu_task_advance(t);
}

void tcu_task_launch(tcu_task_t *t, tcu_comm_t *c, const tcu_algo_t *algo, int kind, uint32_t low)
{
    arm(t, c, algo, kind, low);
    enlist(t);
}

void tcu_task_arm(tcu_task_t *t, tcu_comm_t *c, const tcu_algo_t *algo, int kind, uint32_t low)
{
    arm(t, c, algo, kind, low);
}

void tcu_task_enlist(tcu_task_t *t)
{
    enlist(t);
}

void tcu_task_release(tcu_task_t *t)
{
    t->held = 0;
    if (t->status != TCOMMS_IN_PROGRESS)
        recycle(t);
}

void tcu_task_destroy(tcu_task_t *t)
{
    free(t->msg);
    if (t->reqs != t->inline_reqs)
        free(t->reqs);
    free(t->varrays);
    free(t->scratch_mem);
    free(t);
}

tcomms_status_t tcu_task_report(tcu_task_t *t)
{
    if (t->status == TCOMMS_SUCCESS || t->status == TCOMMS_IN_PROGRESS)
        return t->status;
    return t->core->error(t->status, "%s", task_why(t));
}

void tcu_comm_break(tcu_comm_t *c, tcomms_status_t status, const char *msg)
{
    if (c->core->comm_fail(c->state, status, "%s", msg))
        c->ctx->events = c->ctx->broken = 1; /* the sweep fails the communicator's other running tasks */
}

int tcu_task_final(void *arg)
{
    return ((tcu_task_t *)arg)->status != TCOMMS_IN_PROGRESS;
}
