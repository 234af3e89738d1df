/* SPDX-License-Identifier: BSD-3-Clause */
/* The engine's mechanics: tasks (taken from a per-communicator free list, so the hot path does not allocate), the
 * tagged messages a step posts and the callbacks counting their completion, advancing a task round by round, and
 * ending it: success (with the AVG epilogue), or failure (requests cancelled, the communicator broken). Every
 * function here runs with the context lock held. */
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
/* A receive this large may be a rendezvous (UCX_RNDV_THRESH may be set this low), whose end the receiver's worker
 * still owes its sender after the receive completed: the progress thread lingers after such a task (progress.c). */
#define OWE_BYTES 1024u
/* Messages from these sizes go by rendezvous, a single copy (context.c, RNDV_SEND_NBR_THRESH, says how): an
 * operation that only copies gains from 32 KiB, a reducing one from 64 KiB (it reduces eager fragments as they
 * come). On an oversubscribed host each rendezvous handshake waits for the peer to be scheduled: copies gain only
 * from 128 KiB there, reductions not below 1 MiB, UCX's FAST_CMPL threshold (docs/perf.md, issue 29's copy work). */
#define COPY_RNDV_BYTES (32u << 10)
#define COPY_RNDV_CROWDED_BYTES (128u << 10)
#define REDUCE_RNDV_BYTES (64u << 10)

static unsigned char empty_message; /* UCX wants a valid address even for zero bytes */

/* UCX's requests for a round's first TCU_INLINE_REQS messages live in the task's allocation, after the struct, one
 * slot of req_slot bytes each (UCP_OP_ATTR_FIELD_REQUEST): no request from UCX's pool, none to free at the end of
 * the round. req_room is UCX's request size, the room UCX needs before the pointer it is given; 0 while unknown,
 * and then UCX allocates them all. It is set when the context opens, before any task exists, and never changes
 * (the size belongs to the UCX library, not to the context). */
#define TASK_BYTES ((sizeof(tcu_task_t) + 63) & ~(size_t)63)
#define MAX_REQ_ROOM 1024u /* a larger request than this is not worth a task's memory: UCX allocates it */
static size_t req_room, req_slot;

void tcu_task_lend_requests(ucp_context_h ucp)
{
    ucp_context_attr_t attr = {.field_mask = UCP_ATTR_FIELD_REQUEST_SIZE};
    if (req_room != 0 || ucp_context_query(ucp, &attr) != UCS_OK || attr.request_size == 0 ||
        attr.request_size > MAX_REQ_ROOM)
        return;
    req_room = attr.request_size;
    req_slot = (req_room + 63) & ~(size_t)63;
}

/* Hand UCX the memory of the request the next post keeps at t->reqs[t->nreqs]. A request that completes within its
 * post, or fails there, takes no slot: the next post reuses it. */
static void lend(tcu_task_t *t, ucp_request_param_t *p)
{
    if (req_room == 0 || t->nreqs >= TCU_INLINE_REQS)
        return;
    p->op_attr_mask |= UCP_OP_ATTR_FIELD_REQUEST;
    p->request = (unsigned char *)t + TASK_BYTES + (size_t)t->nreqs * req_slot + req_room;
}

static int lent(const tcu_task_t *t, const void *r)
{
    const unsigned char *p = r, *base = (const unsigned char *)t + TASK_BYTES;
    return p > base && p <= base + (TCU_INLINE_REQS - 1) * req_slot + req_room;
}

/* Give back a request UCX allocated; a lent one is the task's and only needs to have completed. */
static void release_request(tcu_task_t *t, void *r)
{
    if (!lent(t, r))
        ucp_request_free(r);
}

const char *tcu_coll_name(tcomms_coll_type_t type)
{
    const tcomms_coll_info_t *info = tcu_coll_info(type);
    return info != NULL ? info->name : "operation";
}

/* ---- messages ------------------------------------------------------------------------------------------------ */

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

static void note_completion(tcu_task_t *t, ucs_status_t st)
{
    if (t->stranded) { /* a lent request that outlived its failed task's round: the task is final */
        t->stranded--;
        return;
    }
    t->pending--;
    if (st != UCS_OK && st != UCS_ERR_CANCELED && t->ucs_error == 0)
        t->ucs_error = (int)st;
    if ((t->pending == 0 || st != UCS_OK) && !t->watched)
        tcu_task_ready(t);
}

static void send_done(void *req, ucs_status_t st, void *user)
{
    (void)req;
    note_completion(user, st);
}

/* A received message shorter than its buffer: the sender's count differs from ours. A longer one UCX reports
 * itself (UCS_ERR_MESSAGE_TRUNCATED). */
static void note_short(tcu_task_t *t, size_t got, size_t posted, int peer)
{
    if (got == posted || t->ucs_error != 0)
        return;
    t->ucs_error = TCU_ERR_SHORT_MESSAGE;
    t->error_peer = peer;
}

/* The posted length of `req`: from the round's requests, or, for a completion UCX runs inside the very call that
 * posts it (a rendezvous whose data a synchronous copy brings at once), from what tcu_recv noted before the call. */
static void recv_done(void *req, ucs_status_t st, const ucp_tag_recv_info_t *info, void *user)
{
    tcu_task_t *t = user;
    if (st == UCS_OK) {
        int i = t->nreqs - 1;
        while (i >= 0 && t->reqs[i].req != req)
            i--;
        if (i >= 0)
            note_short(t, info->length, t->reqs[i].bytes, t->reqs[i].peer);
        else if (t->posting)
            note_short(t, info->length, t->post_bytes, t->post_peer);
    }
    note_completion(t, st);
}

/* Keep an in-flight request for the round; an immediate error or no room for it fails the task after the step. */
static void track(tcu_task_t *t, void *r, int peer, int send, unsigned slot, size_t bytes)
{
    if (r == NULL)
        return; /* completed at once */
    if (UCS_PTR_IS_ERR(r)) {
        if (t->ucs_error == 0) {
            t->ucs_error = (int)UCS_PTR_STATUS(r);
            t->error_peer = peer;
        }
        return;
    }
    if (t->nreqs == t->cap_reqs) {
        int cap = 2 * t->cap_reqs < 8 ? 8 : 2 * t->cap_reqs;
        struct tcu_req *grown = t->reqs == t->inline_reqs ? malloc((size_t)cap * sizeof(*grown))
                                                          : realloc(t->reqs, (size_t)cap * sizeof(*grown));
        if (grown != NULL && t->reqs == t->inline_reqs)
            memcpy(grown, t->inline_reqs, sizeof(t->inline_reqs));
        if (grown == NULL) {
            ucp_request_cancel(t->comm->ctx->worker, r);
            ucp_request_free(r);
            if (t->ucs_error == 0)
                t->ucs_error = (int)UCS_ERR_NO_MEMORY;
            return;
        }
        t->reqs = grown;
        t->cap_reqs = cap;
    }
    t->reqs[t->nreqs++] = (struct tcu_req){r, peer, send, slot, bytes};
    t->pending++;
}

static uint64_t message_tag(const tcu_task_t *t, int src, unsigned slot)
{
    return t->tag_base | ((uint64_t)(uint32_t)src << TCU_SRC_SHIFT) | (t->p2p ? 0u : (slot & 0xFFu));
}

static int peer_unusable(tcu_task_t *t, int peer)
{
    tcu_ep_t *e = t->comm->eps[peer];
    if (e && !e->failed)
        return 0;
    if (t->ucs_error == 0) {
        t->ucs_error = e ? e->failed : (int)UCS_ERR_INVALID_PARAM;
        t->error_peer = peer;
    }
    return 1;
}

void tcu_send(tcu_task_t *t, int peer, unsigned slot, const void *buf, size_t bytes)
{
    if (t->ucs_error || peer_unusable(t, peer))
        return;
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                                             UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_MEMORY_TYPE |
                                             (bytes < t->rndv_from ? UCP_OP_ATTR_FLAG_FAST_CMPL : 0),
                             .cb.send = send_done,
                             .user_data = t,
                             .datatype = ucp_dt_make_contig(1),
                             .memory_type = UCS_MEMORY_TYPE_HOST};
    lend(t, &p);
    ucp_ep_h ep = t->comm->eps[peer]->ep;
    const void *from = bytes ? buf : &empty_message;
    uint64_t tag = message_tag(t, t->rank, slot);
    void *r = t->sync ? ucp_tag_send_sync_nbx(ep, from, bytes, tag, &p) : ucp_tag_send_nbx(ep, from, bytes, tag, &p);
    track(t, r, peer, 1, slot, bytes);
}

/* A message already waiting is taken through a probe, which tells its length (UCX 1.13 leaves recv_info unset
 * when a receive completes at once); one still to come is checked by recv_done. Either way one tag lookup: the
 * probe removes what it finds. */
void tcu_recv(tcu_task_t *t, int peer, unsigned slot, void *buf, size_t bytes)
{
    if (t->ucs_error || peer_unusable(t, peer))
        return;
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                                             UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_MEMORY_TYPE,
                             .cb.recv = recv_done,
                             .user_data = t,
                             .datatype = ucp_dt_make_contig(1),
                             .memory_type = UCS_MEMORY_TYPE_HOST};
    lend(t, &p);
    ucp_worker_h w = t->comm->ctx->worker;
    void *into = bytes ? buf : &empty_message;
    t->owes |= bytes >= OWE_BYTES;
    ucp_tag_recv_info_t info;
    ucp_tag_message_h msg = ucp_tag_probe_nb(w, message_tag(t, peer, slot), UINT64_MAX, 1, &info);
    t->posting = 1;
    t->post_bytes = bytes;
    t->post_peer = peer;
    void *r;
    if (msg != NULL) {
        note_short(t, info.length < bytes ? info.length : bytes, bytes, peer); /* longer: UCX's own error */
        r = ucp_tag_msg_recv_nbx(w, into, bytes, msg, &p);
    } else {
        r = ucp_tag_recv_nbx(w, into, bytes, message_tag(t, peer, slot), UINT64_MAX, &p);
    }
    t->posting = 0;
    track(t, r, peer, 0, slot, bytes);
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

/* Cancel what is still in flight and hand every request back to UCX: no callback refers to the task afterwards,
 * except those of lent requests that the cancel could not end (UCX cancels receives, not sends in flight), which
 * the task counts in `stranded`; it is then not reused (recycle). */
static void drop_requests(tcu_task_t *t)
{
    ucp_worker_h w = t->comm->ctx->worker;
    for (int i = 0; i < t->nreqs; i++)
        if (ucp_request_check_status(t->reqs[i].req) == UCS_INPROGRESS)
            ucp_request_cancel(w, t->reqs[i].req);
    for (int i = 0; i < t->nreqs; i++) {
        void *r = t->reqs[i].req;
        if (!lent(t, r))
            ucp_request_free(r);
        else if (ucp_request_check_status(r) == UCS_INPROGRESS)
            t->stranded++;
    }
    t->nreqs = 0;
    t->pending = 0;
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
    drop_requests(t);
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

/* A receive of this collective still waits while its peer's message for the same operation and slot came with
 * another shape (it sits unexpected: the exact tag never takes it): the ranks disagree about the call. */
int tcu_task_check_shape(tcu_task_t *t)
{
    if (t->kind != TCU_KIND_COLL || t->status != TCOMMS_IN_PROGRESS)
        return 0;
    const uint64_t mask = ~((uint64_t)0xFF << TCU_SHAPE_SHIFT);
    for (int i = 0; i < t->nreqs; i++) {
        const struct tcu_req *q = &t->reqs[i];
        if (q->send || ucp_request_check_status(q->req) != UCS_INPROGRESS)
            continue;
        ucp_tag_recv_info_t info;
        if (ucp_tag_probe_nb(t->comm->ctx->worker, message_tag(t, q->peer, q->slot), mask, 0, &info) == NULL)
            continue;
        char theirs[96], ours[96];
        tcu_shape_describe(t->core, (unsigned)(info.sender_tag >> TCU_SHAPE_SHIFT) & 0xFFu, t->size, theirs,
                           sizeof(theirs));
        tcu_shape_describe(t->core, (unsigned)(t->tag_base >> TCU_SHAPE_SHIFT) & 0xFFu, t->size, ours, sizeof(ours));
        tcu_task_fail(t, TCOMMS_ERR_MISMATCH, "rank %d called %s where this rank called %s: the ranks disagree about "
                      "this collective (TCOMMS_CHECK_CALLS=1 compares every call)", q->peer, theirs, ours);
        return 1;
    }
    return 0;
}

static int is_reducing(tcomms_coll_type_t type)
{
    return (tcu_coll_info(type)->flags & TCOMMS_COLL_REDUCES) != 0;
}

/* AVG reduced as SUM; divide where the result landed (a.count is this rank's result length for every type). */
static void complete(tcu_task_t *t)
{
    if (t->a.op == TCOMMS_AVG && is_reducing(t->a.type) && t->a.count &&
        (t->a.type != TCOMMS_COLL_REDUCE || t->rank == t->a.peer))
        t->core->avg_finish(t->a.recvbuf, t->a.count, t->a.dtype, t->size);
    t->status = TCOMMS_SUCCESS;
    finish(t);
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
        for (int i = 0; i < t->nreqs; i++)
            release_request(t, t->reqs[i].req);
        t->nreqs = 0;
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
    if (posix_memalign(&p, 64, TASK_BYTES + TCU_INLINE_REQS * req_slot) != 0)
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
