/* SPDX-License-Identifier: BSD-3-Clause */
/* The watchdog: one thread for every NCCL communicator of the process. Every TCOMMS_NCCL_WATCHDOG_MS (default 100)
 * it retires completed operations, checks ncclCommGetAsyncError and the deadline of each pending operation; on an
 * error or a missed deadline it fails the communicator: the failure is reported to the core (which answers every
 * later call with TCOMMS_ERR_ABORTED naming it), pending operations get an error, the NCCL communicator is aborted
 * (ncclCommAbort). A failure the core recorded itself (an operation's error, another backend's slot) ends the
 * NCCL communicator the same way at the next round. The process is never killed. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "tcn.h"

/* life_lock serialises starting and joining the thread, so a start never races a stop in progress; reg_lock guards
 * the registry and is held by the thread while it checks. Order: reg_lock, then a communicator's lock, then its
 * plock. */
static pthread_mutex_t life_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t reg_cond = PTHREAD_COND_INITIALIZER;
static tcn_comm_t *reg_head;
static int running, stopping;
static pthread_t thread;
static long interval_ms = 100;

/* Waits for the lock up to 2 s: a thread stuck inside an NCCL call on this communicator is exactly what the abort
 * must release, so the abort goes ahead without the lock then. */
static int lock_for_abort(pthread_mutex_t *m)
{
    struct timespec ts = tcn_in_ms(2000);
    return pthread_mutex_timedlock(m, &ts) == 0;
}

static void mark_pending(tcn_comm_t *c, tcomms_status_t st, tcn_op_t *culprit, uint64_t gen, const char *why)
{
    pthread_mutex_lock(&c->plock);
    for (tcn_op_t *op = c->pending.next; op != &c->pending; op = op->next) {
        if (cudaEventQuery(op->done) == cudaSuccess)
            tcn_op_settle(op, TCOMMS_SUCCESS, NULL); /* finished before the failure */
        else if (op == culprit && op->gen == gen) /* not a later use of the same pooled operation */
            tcn_op_settle(op, TCOMMS_ERR_TIMEOUT, "%s", why);
        else
            tcn_op_settle(op, st, "the communicator was aborted: %s", why);
    }
    pthread_mutex_unlock(&c->plock);
}

void tcn_comm_fail(tcn_comm_t *c, tcomms_status_t st, tcn_op_t *culprit, uint64_t culprit_gen, const char *fmt, ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    int locked = lock_for_abort(&c->lock);
    if (atomic_load(&c->ended)) { /* ended already, by another thread */
        if (locked)
            pthread_mutex_unlock(&c->lock);
        return;
    }
    int prev = tcn_device_enter(c);
    /* The core's record first, so a call that finds the NCCL communicator gone finds the reason there. */
    tcn_core->comm_fail(c->state, st, "nccl '%s' rank %d: %s", c->name, c->rank, why);
    atomic_store(&c->ended, 1);
    tcn_core->log(TCOMMS_LOG_ERROR, "nccl", "'%s' rank %d: %s; aborting the communicator (ncclCommAbort)", c->name,
                  c->rank, why);
    mark_pending(c, st == TCOMMS_ERR_TIMEOUT ? TCOMMS_ERR_ABORTED : st, culprit, culprit_gen, why);
    tcn_small_abort(c); /* only now: a kernel that gives up completes its event, which must not read as success */
    int ended = (c->nccl == NULL && c->wnccl == NULL) || tcn_end_nccl(c, 0, locked, 1000);
    c->nccl = c->wnccl = NULL;
    tcn_device_leave(prev);
    if (locked)
        pthread_mutex_unlock(&c->lock);
    if (ended)
        tcn_core->log(TCOMMS_LOG_WARN, "nccl", "'%s' rank %d: communicator aborted; its later calls return "
                      "TCOMMS_ERR_ABORTED", c->name, c->rank);
    else
        tcn_core->log(TCOMMS_LOG_ERROR, "nccl", "'%s' rank %d: ncclCommAbort has not returned after 1000 ms (a "
                      "copy-engine collective cannot be interrupted); its later calls return TCOMMS_ERR_ABORTED, "
                      "and work queued behind it on a stream may never run", c->name, c->rank);
}

/* tcomms_comm_abort: the path a failure takes, so pending operations settle as TCOMMS_ERR_ABORTED at once and
 * ncclCommAbort runs under end.c's bound (lock_for_abort bounds the wait for a thread inside an NCCL call). */
tcomms_status_t tcn_comm_abort(void *bcomm)
{
    tcn_comm_fail(bcomm, TCOMMS_ERR_ABORTED, NULL, 0, "tcomms_comm_abort was called");
    return TCOMMS_SUCCESS;
}

void tcn_fail_launch(tcn_comm_t *c, tcomms_status_t st, const char *what)
{
    if (st == TCOMMS_ERR_INTERNAL || st == TCOMMS_ERR_SYSTEM || st == TCOMMS_ERR_REMOTE)
        tcn_comm_fail(c, st, NULL, 0, "the launch of %s failed (%s)", what,
                      st == TCOMMS_ERR_REMOTE ? "a remote error" : "an NCCL or CUDA error");
}

tcomms_status_t tcn_check_async(tcn_comm_t *c)
{
    if (atomic_load(&c->ended) || pthread_mutex_trylock(&c->lock) != 0)
        return TCOMMS_SUCCESS; /* failed already, or busy posting: the next round looks again */
    ncclResult_t async = ncclSuccess;
    if (c->nccl)
        ncclCommGetAsyncError(c->nccl, &async);
    if (c->wnccl && (async == ncclSuccess || async == ncclInProgress))
        ncclCommGetAsyncError(c->wnccl, &async);
    pthread_mutex_unlock(&c->lock);
    if (async == ncclSuccess || async == ncclInProgress)
        return TCOMMS_SUCCESS;
    tcomms_status_t st = async == ncclRemoteError ? TCOMMS_ERR_REMOTE : TCOMMS_ERR_ABORTED;
    tcn_comm_fail(c, st, NULL, 0, "NCCL reported an asynchronous error: %s", ncclGetErrorString(async));
    return st;
}

/* One round for one communicator: retire, then look for an operation past its deadline. */
static void check_comm(tcn_comm_t *c, uint64_t now)
{
    tcn_op_t *late = NULL;
    uint32_t late_ms = 0;
    uint64_t late_gen = 0;
    tcomms_coll_type_t type = TCOMMS_COLL_BARRIER;
    cudaSetDevice(c->device); /* so this thread never creates a context on a GPU the process does not use */
    pthread_mutex_lock(&c->plock);
    tcn_reap(c, 1 << 30);
    for (tcn_op_t *op = c->pending.next; op != &c->pending && late == NULL; op = op->next) {
        if (now < op->deadline_ns || cudaEventQuery(op->done) != cudaErrorNotReady)
            continue;
        late = op;
        late_ms = op->timeout_ms;
        late_gen = op->gen;
        type = op->type;
    }
    pthread_mutex_unlock(&c->plock);
    if (late) /* a poster may retire and reuse it meanwhile: late_gen tells */
        tcn_comm_fail(c, TCOMMS_ERR_TIMEOUT, late, late_gen, "%s did not complete within its timeout of %u ms",
                      tcn_coll_name(type), late_ms);
    else
        tcn_check_async(c);
}

static void *watchdog_main(void *arg)
{
    (void)arg;
    /* A capture in global mode on another thread must not make this thread's event queries illegal (or be
     * invalidated by them): this thread only ever looks at events recorded outside captures. */
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    cudaThreadExchangeStreamCaptureMode(&mode);
    pthread_mutex_lock(&reg_lock);
    while (!stopping) {
        struct timespec ts = tcn_in_ms(interval_ms);
        pthread_cond_timedwait(&reg_cond, &reg_lock, &ts);
        if (stopping)
            break;
        uint64_t now = tc_now_ns();
        for (tcn_comm_t *c = reg_head; c; c = c->wnext) {
            const char *why = "";
            tcomms_status_t broken = tcn_core->comm_failed(c->state, &why);
            if (atomic_load(&c->ended))
                continue;
            if (broken != TCOMMS_SUCCESS) /* the core recorded it: end what NCCL still runs for it */
                tcn_comm_fail(c, broken == TCOMMS_ERR_TIMEOUT ? TCOMMS_ERR_ABORTED : broken, NULL, 0, "%s", why);
            else
                check_comm(c, now);
        }
    }
    pthread_mutex_unlock(&reg_lock);
    return NULL;
}

tcomms_status_t tcn_watch_add(tcn_comm_t *c, long ms)
{
    pthread_mutex_lock(&life_lock);
    pthread_mutex_lock(&reg_lock);
    if (!running) {
        interval_ms = ms;
        stopping = 0;
        int err = pthread_create(&thread, NULL, watchdog_main, NULL);
        if (err != 0) {
            pthread_mutex_unlock(&reg_lock);
            pthread_mutex_unlock(&life_lock);
            return tcn_core->error(TCOMMS_ERR_SYSTEM, "nccl: cannot start the watchdog thread: %s", strerror(err));
        }
        running = 1;
        tcn_core->log(TCOMMS_LOG_DEBUG, "nccl", "watchdog started (every %ld ms)", ms);
    }
    c->wprev = NULL;
    c->wnext = reg_head;
    if (reg_head)
        reg_head->wprev = c;
    reg_head = c;
    pthread_mutex_unlock(&reg_lock);
    pthread_mutex_unlock(&life_lock);
    return TCOMMS_SUCCESS;
}

void tcn_watch_remove(tcn_comm_t *c)
{
    pthread_mutex_lock(&life_lock);
    pthread_mutex_lock(&reg_lock);
    if (c->wprev)
        c->wprev->wnext = c->wnext;
    else if (reg_head == c)
        reg_head = c->wnext;
    if (c->wnext)
        c->wnext->wprev = c->wprev;
    c->wnext = c->wprev = NULL;
    int join = running && reg_head == NULL;
    if (join) {
        stopping = 1;
        running = 0;
        pthread_cond_signal(&reg_cond);
    }
    pthread_mutex_unlock(&reg_lock);
    if (join)
        pthread_join(thread, NULL);
    pthread_mutex_unlock(&life_lock);
}
