/* SPDX-License-Identifier: BSD-3-Clause */
/* Operations (work handles): a pool of operations with their CUDA events per communicator, so a post allocates
 * nothing in the steady state; the pending list the watchdog follows; and the handle calls. wait is stream-ordered
 * (the caller's stream waits for the completion event), synchronize blocks the host, test polls. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tcn.h"

static void op_destroy(tcn_op_t *op)
{
    cudaEventDestroy(op->start);
    cudaEventDestroy(op->done);
    free(op);
}

/* Called with c->plock held, the device set. */
static tcomms_status_t op_new(tcn_comm_t *c, tcn_op_t **out)
{
    tcn_op_t *op = calloc(1, sizeof(*op));
    if (op == NULL)
        return tcn_core->error(TCOMMS_ERR_NO_MEMORY, "nccl '%s': out of memory for an operation", c->name);
    cudaError_t e = cudaEventCreateWithFlags(&op->start, cudaEventDisableTiming);
    if (e == cudaSuccess) {
        e = cudaEventCreateWithFlags(&op->done, cudaEventDisableTiming);
        if (e != cudaSuccess)
            cudaEventDestroy(op->start);
    }
    if (e != cudaSuccess) {
        free(op);
        return tcn_cuda_error(e, "cudaEventCreateWithFlags", c->name);
    }
    *out = op;
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcn_pool_fill(tcn_comm_t *c, int n)
{
    tcomms_status_t st = TCOMMS_SUCCESS;
    pthread_mutex_lock(&c->plock);
    for (int i = 0; i < n && st == TCOMMS_SUCCESS; i++) {
        tcn_op_t *op;
        if ((st = op_new(c, &op)) == TCOMMS_SUCCESS) {
            op->next = c->pool;
            c->pool = op;
        }
    }
    pthread_mutex_unlock(&c->plock);
    return st;
}

tcomms_status_t tcn_op_get(tcn_comm_t *c, int may_reap, tcn_op_t **out)
{
    tcomms_status_t st = TCOMMS_SUCCESS;
    pthread_mutex_lock(&c->plock);
    if (c->pool == NULL && c->npending && c->npending >= c->reap_at && may_reap) {
        tcn_reap(c, 1); /* operations finished since the last refill give their events back */
        c->reap_at = c->npending + TCN_REAP_EVERY;
    }
    tcn_op_t *op = c->pool;
    if (op != NULL)
        c->pool = op->next;
    else
        st = op_new(c, &op);
    if (st == TCOMMS_SUCCESS)
        op->gen++;
    pthread_mutex_unlock(&c->plock);
    if (st != TCOMMS_SUCCESS)
        return st;
    op->next = op->prev = op->gnext = NULL;
    op->comm = c;
    op->scratch = NULL;
    op->flags = 0;
    op->held = 1;
    op->watched = 0;
    op->grouped = 0;
    op->msg[0] = '\0';
    atomic_store_explicit(&op->status, TCOMMS_IN_PROGRESS, memory_order_relaxed);
    *out = op;
    return TCOMMS_SUCCESS;
}

/* Back to the pool once neither the caller nor the watchdog holds it (c->plock held). */
static void op_release(tcn_comm_t *c, tcn_op_t *op)
{
    if (op->held || op->watched || op->grouped)
        return;
    op->next = c->pool;
    c->pool = op;
}

int tcn_op_settle(tcn_op_t *op, tcomms_status_t st, const char *fmt, ...)
{
    int expected = TCOMMS_IN_PROGRESS;
    if (!atomic_compare_exchange_strong(&op->status, &expected, TCOMMS_IN_PROGRESS - 100))
        return 0;
    /* the placeholder status keeps readers at "in progress" until the message is written */
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(op->msg, sizeof(op->msg), fmt, ap);
        va_end(ap);
    }
    atomic_store(&op->status, st);
    return 1;
}

static tcomms_status_t op_status(tcn_op_t *op)
{
    int s = atomic_load_explicit(&op->status, memory_order_acquire);
    return s == TCOMMS_IN_PROGRESS - 100 ? TCOMMS_IN_PROGRESS : (tcomms_status_t)s;
}

void tcn_op_finish(tcn_op_t *op, tcomms_status_t launch, const char *why)
{
    tcn_comm_t *c = op->comm;
    if (launch != TCOMMS_SUCCESS)
        tcn_op_settle(op, launch, "%s", why ? why : "the launch failed");
    if (op->scratch) {
        cudaFreeAsync(op->scratch, op->run);
        op->scratch = NULL;
    }
    /* A blocking operation inside a capture needs no event: it is ordered on the caller's stream already. An
     * asynchronous one records even then, so work_wait can join the internal stream back into the capture. */
    if (!(op->flags & TCN_OP_BLOCKING) || !(op->flags & TCN_OP_CAPTURED)) {
        cudaError_t e = cudaEventRecord(op->done, op->run);
        if (e != cudaSuccess)
            tcn_op_settle(op, TCOMMS_ERR_INTERNAL, "cudaEventRecord after the launch failed: %s",
                          cudaGetErrorString(e));
        else
            op->flags |= TCN_OP_RECORDED;
    }
    int captured = (op->flags & TCN_OP_CAPTURED) != 0;
    if (!captured)
        op->deadline_ns = tc_now_ns() + (uint64_t)op->timeout_ms * 1000000ull;
    pthread_mutex_lock(&c->plock);
    op->grouped = 0;
    if (captured) { /* runs at replay: the watchdog has nothing to follow */
        op_release(c, op);
    } else {
        op->watched = 1;
        op->next = &c->pending;
        op->prev = c->pending.prev;
        c->pending.prev->next = op;
        c->pending.prev = op;
        c->npending++;
    }
    pthread_mutex_unlock(&c->plock);
}

/* Is `op` over? Its status when final; else its event, settling it when complete. */
static tcomms_status_t poll_op(tcn_op_t *op)
{
    tcomms_status_t st = op_status(op);
    if (st != TCOMMS_IN_PROGRESS || !(op->flags & TCN_OP_RECORDED))
        return st;
    cudaError_t e = cudaEventQuery(op->done);
    if (e == cudaErrorNotReady)
        return TCOMMS_IN_PROGRESS;
    if (e == cudaSuccess)
        tcn_op_settle(op, TCOMMS_SUCCESS, NULL);
    else
        tcn_op_settle(op, TCOMMS_ERR_INTERNAL, "cudaEventQuery: %s (a CUDA error on the device)",
                      cudaGetErrorString(e));
    return op_status(op);
}

static void retire(tcn_comm_t *c, tcn_op_t *op)
{
    op->prev->next = op->next;
    op->next->prev = op->prev;
    c->npending--;
    op->watched = 0;
    op_release(c, op);
}

/* A stream runs its work in order, so when one operation has finished every earlier one on its stream has. Up to
 * 128 pending operations on the oldest one's stream are searched (binary search by event queries) for the newest
 * finished one, and it and all before it are retired together: an event query costs the poster about a
 * microsecond, and this way the pool refills with a few queries per many operations rather than one each. */
int tcn_reap(tcn_comm_t *c, int max)
{
    int n = 0;
    while (c->pending.next != &c->pending) {
        tcn_op_t *op = c->pending.next;
        tcomms_status_t st = op_status(op);
        if (st != TCOMMS_IN_PROGRESS) { /* settled already (by a wait, the watchdog or a failure) */
            retire(c, op);
            n++;
            continue;
        }
        if (!(op->flags & TCN_OP_RECORDED) || max-- <= 0)
            return n;
        tcn_op_t *same[128];
        int k = 0;
        for (tcn_op_t *q = op; q != &c->pending && k < 128; q = q->next)
            if (q->run == op->run && (q->flags & TCN_OP_RECORDED) && op_status(q) == TCOMMS_IN_PROGRESS)
                same[k++] = q;
        /* the oldest first: when the GPU runs behind, one query says nothing is to retire */
        cudaError_t e0 = cudaEventQuery(op->done);
        if (e0 == cudaErrorNotReady)
            return n;
        if (e0 != cudaSuccess) { /* a device error: poll_op gives it to this operation, the next round retires it */
            poll_op(op);
            continue;
        }
        int lo = 1, hi = k; /* same[0, lo) finished; same[hi, k) not */
        while (lo < hi) {
            int mid = lo + (hi - lo) / 2;
            cudaError_t e = cudaEventQuery(same[mid]->done);
            if (e == cudaSuccess) {
                lo = mid + 1;
            } else if (e == cudaErrorNotReady) {
                hi = mid;
            } else { /* a device error: let poll_op give it to this operation and stop searching */
                poll_op(same[mid]);
                break;
            }
        }
        for (int i = 0; i < lo; i++) {
            tcn_op_settle(same[i], TCOMMS_SUCCESS, NULL);
            retire(c, same[i]);
            n++;
        }
    }
    return n;
}

void tcn_pool_drain(tcn_comm_t *c)
{
    pthread_mutex_lock(&c->plock);
    while (c->pool) {
        tcn_op_t *op = c->pool;
        c->pool = op->next;
        op_destroy(op);
    }
    pthread_mutex_unlock(&c->plock);
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->plock);
    free(c);
}

static tcomms_status_t report(tcn_op_t *op, tcomms_status_t st)
{
    if (st == TCOMMS_SUCCESS || st == TCOMMS_IN_PROGRESS)
        return st;
    return tcn_core->error(st, "nccl %s on '%s': %s", tcn_coll_name(op->type), op->comm->name, op->msg);
}

/* Waiting on an operation whose group has not ended would wait for something never launched. */
static tcomms_status_t not_launched(tcn_op_t *op, const char *call)
{
    return tcn_core->error(TCOMMS_ERR_INVALID_ARG, "nccl %s on '%s': %s before tcomms_group_end, which launches "
                           "it", tcn_coll_name(op->type), op->comm->name, call);
}

tcomms_status_t tcn_work_test(void *bwork)
{
    tcn_op_t *op = bwork;
    if ((op->flags & TCN_OP_CAPTURED) && op_status(op) == TCOMMS_IN_PROGRESS)
        return TCOMMS_SUCCESS; /* captured: complete as far as eager work is concerned; it runs at replay */
    int prev = tcn_device_enter(op->comm);
    tcomms_status_t st = poll_op(op);
    tcn_device_leave(prev);
    return report(op, st);
}

tcomms_status_t tcn_work_wait(void *bwork, uint32_t timeout_ms)
{
    (void)timeout_ms; /* stream-ordered: the host does not wait, the watchdog enforces the operation's timeout */
    tcn_op_t *op = bwork;
    tcomms_status_t st = op_status(op);
    if (st != TCOMMS_IN_PROGRESS)
        return report(op, st);
    if (!(op->flags & TCN_OP_RECORDED) && !((op->flags & TCN_OP_BLOCKING) && (op->flags & TCN_OP_CAPTURED)))
        return not_launched(op, "tcomms_work_wait");
    if (op->flags & TCN_OP_BLOCKING)
        return TCOMMS_SUCCESS; /* it ran on the caller's stream */
    int prev = tcn_device_enter(op->comm);
    cudaError_t e = cudaStreamWaitEvent(op->caller, op->done, 0);
    tcn_device_leave(prev);
    if (e != cudaSuccess)
        return tcn_cuda_error(e, "cudaStreamWaitEvent(caller's stream, completion event)", op->comm->name);
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcn_work_synchronize(void *bwork, uint32_t timeout_ms)
{
    tcn_op_t *op = bwork;
    if (op->flags & TCN_OP_CAPTURED)
        return tcn_work_wait(op, timeout_ms); /* nothing runs before a replay: join the capture instead */
    if (!(op->flags & TCN_OP_RECORDED) && op_status(op) == TCOMMS_IN_PROGRESS)
        return not_launched(op, "tcomms_work_synchronize");
    uint64_t start = tc_now_ns(), deadline = start + (uint64_t)timeout_ms * 1000000ull, next_async = start;
    int prev = tcn_device_enter(op->comm);
    for (unsigned round = 0;; round++) {
        tcomms_status_t st = poll_op(op);
        if (st != TCOMMS_IN_PROGRESS) {
            tcn_device_leave(prev);
            return report(op, st);
        }
        uint64_t now = tc_now_ns();
        if (now >= op->deadline_ns && !atomic_load(&op->comm->ended)) {
            /* Judge the deadline now rather than at the watchdog's next round: a peer aborting at its own
             * deadline can let this kernel run to an end with partial data, which must not read as success. */
            tcn_comm_fail(op->comm, TCOMMS_ERR_TIMEOUT, op, op->gen, "%s did not complete within its timeout of %u ms",
                          tcn_coll_name(op->type), op->timeout_ms);
            continue;
        }
        if (now >= next_async) { /* between the watchdog's rounds, notice a failed peer sooner */
            tcn_check_async(op->comm);
            next_async = now + 10000000ull;
        }
        if (now >= deadline) {
            tcn_device_leave(prev);
            return tcn_core->error(TCOMMS_ERR_TIMEOUT, "nccl %s on '%s': not complete after a %u ms "
                                   "synchronize (it keeps running; its own timeout is %u ms)",
                                   tcn_coll_name(op->type), op->comm->name, timeout_ms, op->timeout_ms);
        }
        tcn_backoff(round);
    }
}

void tcn_work_free(void *bwork)
{
    tcn_op_t *op = bwork;
    tcn_comm_t *c = op->comm;
    pthread_mutex_lock(&c->plock);
    op->held = 0;
    op_release(c, op);
    pthread_mutex_unlock(&c->plock);
}
