/* SPDX-License-Identifier: BSD-3-Clause */
/* A task's tagged messages: the sends and receives a step posts, UCX's requests for the first of them lent from the
 * task's own memory, the callbacks that count their completion, and the requests' end (released after a round,
 * cancelled on a failure); and the probe that tells a peer's message of another shape. Every function here runs
 * with the context lock held. */
#include <stdlib.h>
#include <string.h>

#include "ucx.h"

/* A receive this large may be a rendezvous (UCX_RNDV_THRESH may be set this low), whose end the receiver's worker
 * still owes its sender after the receive completed: the progress thread lingers after such a task (progress.c). */
#define OWE_BYTES 1024u

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

size_t tcu_task_bytes(void)
{
    return TASK_BYTES + TCU_INLINE_REQS * req_slot;
}

/* Give back the round's requests UCX allocated; a lent one is the task's and only needs to have completed. */
void tcu_task_release_requests(tcu_task_t *t)
{
    for (int i = 0; i < t->nreqs; i++)
        if (!lent(t, t->reqs[i].req))
            ucp_request_free(t->reqs[i].req);
    t->nreqs = 0;
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

/* The posted length of `req`: for a completion UCX runs inside the very call that posts it (a message already
 * waiting: tcu_recv), what tcu_recv noted before the call; else from the round's requests. */
static void recv_done(void *req, ucs_status_t st, const ucp_tag_recv_info_t *info, void *user)
{
    tcu_task_t *t = user;
    if (st == UCS_OK && t->posting) {
        note_short(t, info->length, t->post_bytes, t->post_peer);
    } else if (st == UCS_OK) {
        int i = t->nreqs - 1;
        while (i >= 0 && t->reqs[i].req != req)
            i--;
        if (i >= 0)
            note_short(t, info->length, t->reqs[i].bytes, t->reqs[i].peer);
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

/* A receive never completes "immediately" (UCP_OP_ATTR_FLAG_NO_IMM_CMPL): UCX 1.13 leaves recv_info unset when it
 * does, so the length of a message that was already waiting would go unchecked; denied that, UCX runs recv_done
 * inside the call, with the length, and returns the completed request, which the round keeps as any other. One tag
 * lookup either way, and no probe before it. */
void tcu_recv(tcu_task_t *t, int peer, unsigned slot, void *buf, size_t bytes)
{
    if (t->ucs_error || peer_unusable(t, peer))
        return;
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                                             UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_MEMORY_TYPE |
                                             UCP_OP_ATTR_FLAG_NO_IMM_CMPL,
                             .cb.recv = recv_done,
                             .user_data = t,
                             .datatype = ucp_dt_make_contig(1),
                             .memory_type = UCS_MEMORY_TYPE_HOST};
    lend(t, &p);
    t->owes |= bytes >= OWE_BYTES;
    t->posting = 1;
    t->post_bytes = bytes;
    t->post_peer = peer;
    void *r = ucp_tag_recv_nbx(t->comm->ctx->worker, bytes ? buf : &empty_message, bytes,
                               message_tag(t, peer, slot), UINT64_MAX, &p);
    t->posting = 0;
    track(t, r, peer, 0, slot, bytes);
}

/* Cancel what is still in flight and hand every request back to UCX: no callback refers to the task afterwards,
 * except those of lent requests that the cancel could not end (UCX cancels receives, not sends in flight), which
 * the task counts in `stranded`; it is then not reused (recycle). */
void tcu_task_drop_requests(tcu_task_t *t)
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
