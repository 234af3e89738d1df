/* SPDX-License-Identifier: BSD-3-Clause */
/* NCCL communicators: eager creation (a root from a unique id passed through the tcomms store, a split child with
 * ncclCommSplit and the child's own hints, non-members of a split with NCCL_SPLIT_NOCOLOR), each followed by a
 * barrier so the communicator is ready on return; and destruction once its pending operations are over. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tcn.h"

tcomms_status_t tcn_comm_aborted(tcn_comm_t *c, const char *what)
{
    const char *why = "";
    tcn_core->comm_failed(c->state, &why);
    return tcn_core->error(TCOMMS_ERR_ABORTED, "nccl %s on '%s': the communicator was aborted after an earlier "
                           "failure: %s", what, c->name, why[0] ? why : "(no detail)");
}

static tcomms_status_t comm_new(const tcomms_backend_comm_args_t *args, int device, tcn_comm_t **out)
{
    tcn_comm_t *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return tcn_core->error(TCOMMS_ERR_NO_MEMORY, "nccl: out of memory for a communicator");
    snprintf(c->name, sizeof(c->name), "%s", args->name ? args->name : "");
    const char *keep = args->comm_prefix ? args->comm_prefix : "";
    if (snprintf(c->prefix, sizeof(c->prefix), "%s", keep) >= (int)sizeof(c->prefix)) {
        tcomms_status_t st = tcn_core->error(TCOMMS_ERR_INVALID_ARG, "nccl '%s': store prefix longer than %zu "
                                             "bytes", c->name, sizeof(c->prefix) - 1);
        free(c); /* after the message, which names it */
        return st;
    }
    c->rank = args->rank;
    c->size = args->size;
    c->device = device;
    c->timeout_ms = args->timeout_ms;
    c->state = args->state;
    c->pending.next = c->pending.prev = &c->pending;
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->plock, NULL);
    tcomms_status_t st = tcn_config_build(args->hints, c->name, &c->cfg);
    if (st == TCOMMS_SUCCESS)
        st = tcn_win_settings(c, args->size);
    if (st != TCOMMS_SUCCESS) {
        pthread_mutex_destroy(&c->lock);
        pthread_mutex_destroy(&c->plock);
        free(c);
        return st;
    }
    c->nonblocking = tcn_config_nonblocking(&c->cfg);
    *out = c;
    return TCOMMS_SUCCESS;
}

/* The internal stream (greatest priority when asked), the barrier buffer, what comm_hint reports. Device set. */
static tcomms_status_t resources(tcn_comm_t *c)
{
    cudaError_t e = cudaDeviceGetStreamPriorityRange(&c->prio_least, &c->prio_greatest);
    if (e != cudaSuccess)
        return tcn_cuda_error(e, "cudaDeviceGetStreamPriorityRange", c->name);
    int prio = c->cfg.high_priority ? c->prio_greatest : c->prio_least;
    if ((e = cudaStreamCreateWithPriority(&c->stream, cudaStreamNonBlocking, prio)) != cudaSuccess)
        return tcn_cuda_error(e, "cudaStreamCreateWithPriority", c->name);
    if ((e = cudaStreamGetPriority(c->stream, &c->prio)) != cudaSuccess)
        return tcn_cuda_error(e, "cudaStreamGetPriority", c->name);
    if ((e = cudaMalloc(&c->one, 16)) != cudaSuccess || (e = cudaMemset(c->one, 0, 16)) != cudaSuccess)
        return tcn_cuda_error(e, "cudaMalloc/cudaMemset (barrier buffer)", c->name);
    cudaDeviceGetAttribute(&c->cc_major, cudaDevAttrComputeCapabilityMajor, c->device);
    return tcn_pool_fill(c, TCN_REAP_EVERY);
}

static void release_resources(tcn_comm_t *c)
{
    if (c->stream)
        cudaStreamDestroy(c->stream);
    c->stream = NULL;
    if (!tcn_end_done(c, c->end_wait_ms)) { /* freeing device memory would wait for a device that never drains */
        tcn_core->log(TCOMMS_LOG_ERROR, "nccl", "'%s' rank %d: its NCCL communicator's end has not returned; its "
                      "device buffers are left allocated", c->name, c->rank);
        return;
    }
    if (c->one)
        cudaFree(c->one);
    tcn_scratch_free(c);
    tcn_small_free(c);
    c->one = NULL;
}

/* Rank 0 makes the id and publishes it under the communicator's prefix; the others read it. */
static tcomms_status_t exchange_id(tcn_comm_t *c, const tcomms_backend_comm_args_t *args, ncclUniqueId *id)
{
    char key[512];
    snprintf(key, sizeof(key), "%s/uid", args->prefix);
    if (c->rank == 0) {
        ncclResult_t r = ncclGetUniqueId(id);
        if (r != ncclSuccess)
            return tcn_nccl_error(c, r, "ncclGetUniqueId");
        return tcn_core->store_set(args->store, key, id, sizeof(*id));
    }
    void *v = NULL;
    size_t len = 0;
    tcomms_status_t st = tcn_core->store_get(args->store, key, &v, &len, args->timeout_ms);
    if (st != TCOMMS_SUCCESS)
        return st;
    if (len == sizeof(*id))
        memcpy(id, v, sizeof(*id));
    free(v);
    if (len != sizeof(*id))
        return tcn_core->error(TCOMMS_ERR_PROTOCOL, "nccl '%s': store key '%s' holds %zu bytes, not an NCCL "
                               "unique id (%zu)", c->name, key, len, sizeof(*id));
    return TCOMMS_SUCCESS;
}

/* Free a communicator NCCL created but that will not be used (failed init or barrier). */
static void abandon(tcn_comm_t *c)
{
    if (c->wnccl)
        ncclCommAbort(c->wnccl);
    if (c->nccl)
        ncclCommAbort(c->nccl);
    c->nccl = c->wnccl = NULL;
}

/* The result of a creation call: settle a non-blocking one, abort what exists on failure. */
static tcomms_status_t created(tcn_comm_t *c, ncclComm_t settle_on, ncclResult_t r, uint64_t deadline,
                               const char *call)
{
    if (r == ncclInProgress && settle_on)
        r = tcn_settle(settle_on, r, deadline);
    if (r == ncclSuccess)
        return TCOMMS_SUCCESS;
    tcomms_status_t st = tcn_nccl_error(c, r, call);
    abandon(c);
    return st;
}

static tcomms_status_t init_root(tcn_comm_t *c, const tcomms_backend_comm_args_t *args)
{
    ncclUniqueId id;
    tcomms_status_t st = exchange_id(c, args, &id);
    if (st != TCOMMS_SUCCESS)
        return st;
    uint64_t deadline = tc_now_ns() + (uint64_t)args->timeout_ms * 1000000ull;
    ncclResult_t r = ncclCommInitRankConfig(&c->nccl, c->size, id, c->rank, &c->cfg.nc);
    return created(c, c->nccl, r, deadline, "ncclCommInitRankConfig");
}

/* ncclCommSplit waits for every rank of the parent, ncclCommShrink for every survivor. Before either, each of those
 * ranks votes through the store whether its own preparation succeeded, so a rank that failed (bad child hints, no
 * memory) fails the call everywhere within the timeout, instead of leaving the others inside NCCL. The counter key
 * (failures count 2^32) of a split lives under the parent's lasting prefix (args->prefix is deleted after each
 * creation: a vote under the parent's creation prefix was once wiped by the parent's own cleanup, racing the first
 * split); a shrink's goes under args->prefix, the child's, since only the survivors count its calls. The last voter
 * publishes the outcome under a second key, which the others wait for in one store request each: polling the
 * counter would cost the store server a request per rank and millisecond while the slowest rank comes. Parent rank
 * 0 deletes the previous split's keys once every rank has voted in this one, so two keys per parent remain. */
static tcomms_status_t split_vote(tcn_comm_t *p, const tcomms_backend_comm_args_t *args, int ok, int shrink)
{
    char key[sizeof(p->prefix) + 512], outcome[sizeof(key) + 8];
    int voters = shrink ? args->size : p->size;
    if (shrink) {
        snprintf(key, sizeof(key), "%s/nccl-shrink", args->prefix);
        snprintf(outcome, sizeof(outcome), "%s/nccl-shrink/all", args->prefix);
    } else {
        snprintf(key, sizeof(key), "%s/nccl-split%u", p->prefix, p->splits);
        snprintf(outcome, sizeof(outcome), "%s/nccl-split%u/all", p->prefix, p->splits++);
    }
    int64_t v = 0;
    tcomms_status_t st = tcn_core->store_add(args->store, key, ok ? 1 : (INT64_C(1) << 32) + 1, &v);
    if (st == TCOMMS_SUCCESS && (v & 0xffffffff) == voters) /* the last vote */
        st = tcn_core->store_set(args->store, outcome, &v, sizeof(v));
    if (!ok || st != TCOMMS_SUCCESS)
        return st; /* a failing rank has its own error to return; the others count it */
    if ((v & 0xffffffff) < voters) {
        void *all = NULL;
        size_t len = 0;
        st = tcn_core->store_get(args->store, outcome, &all, &len, args->timeout_ms);
        if (st == TCOMMS_ERR_TIMEOUT) {
            tcn_core->store_add(args->store, key, 0, &v);
            return tcn_core->error(TCOMMS_ERR_TIMEOUT, "nccl '%s' rank %d: %s: %lld of the %d ranks arrived within "
                                   "%u ms", p->name, p->rank, shrink ? "shrink" : "split",
                                   (long long)(v & 0xffffffff), voters, args->timeout_ms);
        }
        if (st == TCOMMS_SUCCESS && len != sizeof(v))
            st = tcn_core->error(TCOMMS_ERR_PROTOCOL, "nccl '%s': store key %s holds %zu bytes, expected %zu",
                                 p->name, outcome, len, sizeof(v));
        if (st == TCOMMS_SUCCESS)
            memcpy(&v, all, sizeof(v));
        free(all);
        if (st != TCOMMS_SUCCESS)
            return st;
    }
    /* Every rank counted here had finished the previous vote: its keys are read by no one now. */
    if (!shrink && p->rank == 0 && p->splits > 1) {
        snprintf(key, sizeof(key), "%s/nccl-split%u", p->prefix, p->splits - 2);
        snprintf(outcome, sizeof(outcome), "%s/nccl-split%u/all", p->prefix, p->splits - 2);
        tcn_core->store_del(args->store, key);
        tcn_core->store_del(args->store, outcome);
    }
    if ((v >> 32) != 0)
        return tcn_core->error(TCOMMS_ERR_REMOTE, "nccl '%s' rank %d: %s abandoned: %lld rank(s) failed before it "
                               "(their own errors say why)", p->name, p->rank, shrink ? "shrink" : "split",
                               (long long)(v >> 32));
    return TCOMMS_SUCCESS;
}

#if TCN_HAS_SPLIT
/* After a failed ncclCommSplit, peers may still wait inside theirs for this rank (a ring exchange over the parent's
 * connections passes a dead rank's loss on only to its neighbour). Aborting the parent closes those connections, so
 * each of them fails in turn instead of waiting; the parent's later calls return TCOMMS_ERR_ABORTED.
 * NCCL (2.28 at least) points the parent at the child's abort flag while the split runs, and a failed split leaves
 * that pointer set: so the parent is aborted while the child still exists (init_split aborts the child after), and
 * never after a split that failed before returning a child, whose flag NCCL has freed already (tcn_split_refused). */
tcomms_status_t tcn_split_failed(tcn_comm_t *p, tcomms_status_t st, ncclResult_t r, const char *call)
{
    tcn_comm_fail(p, st, NULL, 0, "%s failed on this rank (%s)", call,
                  r == ncclInProgress ? "not done by the timeout" : ncclGetErrorString(r));
    return st;
}

/* ncclCommSplit failed before making a child (a config it refused, no memory): NCCL freed the child's abort flag,
 * which the parent still points to, so ncclCommAbort on the parent writes freed memory (heap corruption, seen with
 * NCCL 2.28.3). The parent's NCCL communicator is given up here, under p->lock, and left allocated: the caller
 * then fails the tcomms communicator without ending it. config.c refuses beforehand what NCCL's config check
 * refuses, so only NCCL's own failures come here. */
void tcn_split_refused(tcn_comm_t *p, const char *call)
{
    tcn_core->log(TCOMMS_LOG_WARN, "nccl", "'%s' rank %d: %s failed before making the child; NCCL left the parent "
                  "unsafe to end, so its NCCL communicator is left allocated", p->name, p->rank, call);
    p->nccl = NULL;
}

/* A non-blocking ncclCommSplit returns (ncclSuccess or ncclInProgress) before the child exists: NCCL's init job
 * stores it into *child when it ends, failed or not. Wait for it up to the deadline, then for the child's state and,
 * when the parent is non-blocking too, for the parent's (busy until the job is collected). */
ncclResult_t tcn_settle_child(ncclComm_t *child, const tcn_comm_t *p, uint64_t deadline)
{
    for (unsigned round = 0;; round++) {
        ncclComm_t made = __atomic_load_n(child, __ATOMIC_ACQUIRE);
        if (made != NULL) {
            ncclResult_t r = tcn_settle(made, ncclInProgress, deadline);
            return r == ncclSuccess && p->nonblocking ? tcn_settle(p->nccl, ncclInProgress, deadline) : r;
        }
        if (tc_now_ns() >= deadline)
            return ncclInProgress;
        tcn_backoff(round + 256);
    }
}
#endif

#if TCN_HAS_SPLIT
/* The child from the parent's NCCL communicator: ncclCommSplit, or ncclCommShrink leaving out the parent ranks
 * missing from args->parent_ranks. */
static ncclResult_t derive_call(tcn_comm_t *c, tcn_comm_t *p, const tcomms_backend_comm_args_t *args, int shrink)
{
    if (!shrink) /* children of one split have disjoint member lists: the first member's parent rank tells them apart */
        return ncclCommSplit(p->nccl, args->parent_ranks[0], args->rank, &c->nccl, &c->cfg.nc);
#if TCN_HAS_SHRINK
    int *exclude = malloc((size_t)p->size * sizeof(*exclude)), n = 0;
    if (exclude == NULL)
        return ncclSystemError;
    for (int r = 0, i = 0; r < p->size; r++) {
        if (i < args->size && args->parent_ranks[i] == r)
            i++;
        else
            exclude[n++] = r;
    }
    ncclResult_t r = ncclCommShrink(p->nccl, exclude, n, &c->nccl, &c->cfg.nc, NCCL_SHRINK_DEFAULT);
    free(exclude);
    return r;
#else
    return ncclInvalidUsage; /* unreached: tcn_comm_shrink makes the child afresh */
#endif
}
#endif

static tcomms_status_t init_split(tcn_comm_t *c, tcn_comm_t *p, const tcomms_backend_comm_args_t *args, int shrink)
{
#if TCN_HAS_SPLIT
    const char *call = shrink ? "ncclCommShrink" : "ncclCommSplit";
    uint64_t deadline = tc_now_ns() + (uint64_t)args->timeout_ms * 1000000ull;
    pthread_mutex_lock(&p->lock);
    if (p->nccl == NULL || tcn_comm_broken(p)) {
        pthread_mutex_unlock(&p->lock);
        return tcn_comm_aborted(p, shrink ? "shrink" : "split");
    }
    ncclResult_t r = derive_call(c, p, args, shrink);
    if (r != ncclSuccess && r != ncclInProgress && c->nccl == NULL)
        tcn_split_refused(p, call);
    if (r == ncclInProgress || (r == ncclSuccess && c->nccl == NULL))
        r = tcn_settle_child(&c->nccl, p, deadline);
    pthread_mutex_unlock(&p->lock);
    if (r == ncclSuccess)
        return TCOMMS_SUCCESS;
    tcomms_status_t st = tcn_nccl_error(c, r, call);
    tcn_split_failed(p, st, r, call); /* first: the child's abort flag must outlive the parent's abort */
    if (r == ncclInProgress) {
        /* Aborting the parent ends the child's init job, which then stores the child: abort that too. */
        uint64_t grace = tc_now_ns() + (uint64_t)args->timeout_ms * 1000000ull;
        if (tcn_settle_child(&c->nccl, p, grace) == ncclInProgress && c->nccl == NULL)
            c->orphan = 1;
    }
    abandon(c);
    return st;
#else
    (void)p;
    (void)args;
    (void)shrink;
    return tcn_core->error(TCOMMS_ERR_NOT_SUPPORTED, "nccl '%s': split needs ncclCommSplit (NCCL 2.18); this "
                           "module was built with NCCL %d.%d.%d", c->name, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
#endif
}

/* A one-element all_reduce on the internal stream, waited for up to the timeout: the communicator is ready on
 * return, and a member that never arrives is a TIMEOUT here rather than a hang later. */
static tcomms_status_t barrier(tcn_comm_t *c)
{
    cudaEvent_t ev;
    cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (e != cudaSuccess)
        return tcn_cuda_error(e, "cudaEventCreateWithFlags", c->name);
    uint64_t deadline = tc_now_ns() + (uint64_t)c->timeout_ms * 1000000ull;
    tcomms_status_t st = TCOMMS_SUCCESS;
    ncclResult_t r = ncclAllReduce(c->one, c->one, 1, ncclInt32, ncclSum, c->nccl, c->stream);
    if (r == ncclInProgress)
        r = tcn_settle(c->nccl, r, deadline);
    if (r != ncclSuccess)
        st = tcn_nccl_error(c, r, "ncclAllReduce (creation barrier)");
    else if ((e = cudaEventRecord(ev, c->stream)) != cudaSuccess)
        st = tcn_cuda_error(e, "cudaEventRecord", c->name);
    for (unsigned round = 0; st == TCOMMS_SUCCESS; round++) {
        e = cudaEventQuery(ev);
        if (e == cudaSuccess)
            break;
        if (e != cudaErrorNotReady) {
            st = tcn_cuda_error(e, "cudaEventQuery (creation barrier)", c->name);
            break;
        }
        ncclResult_t async = ncclSuccess;
        if (ncclCommGetAsyncError(c->nccl, &async) == ncclSuccess && async != ncclSuccess && async != ncclInProgress)
            st = tcn_nccl_error(c, async, "the creation barrier (asynchronous error)");
        else if (tc_now_ns() >= deadline)
            st = tcn_core->error(TCOMMS_ERR_TIMEOUT, "nccl '%s' rank %d: the creation barrier did not complete "
                                 "within %u ms (a member never joined?)", c->name, c->rank, c->timeout_ms);
        tcn_backoff(round);
    }
    if (st != TCOMMS_SUCCESS)
        abandon(c); /* lets the kernel exit, so the event can be destroyed */
    cudaEventDestroy(ev);
    return st;
}

static void log_ready(const tcn_comm_t *c, const char *how)
{
    tcn_core->log(TCOMMS_LOG_INFO, "nccl", "'%s': rank %d of %d ready on cuda:%d%s (NCCL %d.%d.%d headers, %s, "
                  "internal stream priority %d of [%d, %d])", c->name, c->rank, c->size, c->device, how,
                  NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH,
                  c->nonblocking ? "non-blocking" : "blocking", c->prio, c->prio_least, c->prio_greatest);
}

/* The small path's limit where neither the environment nor a hint sets one (tcn.h). */
static long small_default(int size)
{
    return size == 2 ? TCN_SMALL_DEFAULT_BYTES_2 : size <= TCN_SMALL_DEFAULT_RANKS ? TCN_SMALL_DEFAULT_BYTES : 0;
}

/* A root (p NULL), a split child (p the parent), or a shrink's child from a parent healthy on every survivor. */
static tcomms_status_t create(const tcomms_backend_comm_args_t *args, tcn_comm_t *p, int shrink, void **bcomm)
{
    int device = p ? p->device : args->device.index, ndev = 0;
    long watch_ms, small_bytes; /* read before any NCCL call, so a bad value fails every rank alike and early */
    tcomms_status_t st = tcn_core->env_int("TCOMMS_NCCL_WATCHDOG_MS", 1, 60000, 100, &watch_ms);
    if (st == TCOMMS_SUCCESS)
        st = tcn_core->env_int("TCOMMS_NCCL_SMALL_BYTES", 0, 1 << 20,
                               small_default(args->size), &small_bytes);
    if (st != TCOMMS_SUCCESS) {
        if (p)
            split_vote(p, args, 0, shrink);
        return st;
    }
    if (p == NULL) {
        cudaError_t e = cudaGetDeviceCount(&ndev);
        if (e != cudaSuccess || ndev == 0)
            return e != cudaSuccess ? tcn_cuda_error(e, "cudaGetDeviceCount", args->name)
                                    : tcn_core->error(TCOMMS_ERR_BACKEND_UNAVAILABLE, "nccl: no CUDA device");
        device = (device < 0 ? args->local_rank : device) % ndev;
    } else if (tcn_comm_broken(p)) {
        split_vote(p, args, 0, shrink);
        return tcn_comm_aborted(p, shrink ? "shrink" : "split");
    }
    tcn_comm_t *c = NULL;
    st = comm_new(args, device, &c);
    if (st != TCOMMS_SUCCESS) {
        if (p)
            split_vote(p, args, 0, shrink);
        return st;
    }
    int prev = tcn_device_enter(c);
    st = resources(c);
    if (p) {
        tcomms_status_t vote = split_vote(p, args, st == TCOMMS_SUCCESS, shrink);
        st = st == TCOMMS_SUCCESS ? vote : st;
    }
    if (st == TCOMMS_SUCCESS)
        st = p ? init_split(c, p, args, shrink) : init_root(c, args);
    if (st == TCOMMS_SUCCESS)
        st = tcn_small_setup(c, args, c->cfg.small_bytes >= 0 ? c->cfg.small_bytes : small_bytes);
    if (st == TCOMMS_SUCCESS)
        st = barrier(c);
    if (st == TCOMMS_SUCCESS)
        st = tcn_watch_add(c, watch_ms);
    if (st != TCOMMS_SUCCESS && c->orphan) {
        tcn_core->log(TCOMMS_LOG_WARN, "nccl", "'%s' rank %d: NCCL never ended the aborted split's init job; its "
                      "record is left allocated for it", c->name, c->rank);
        tcn_device_leave(prev);
        return st;
    }
    if (st != TCOMMS_SUCCESS) {
        abandon(c);
        release_resources(c);
        tcn_device_leave(prev);
        tcn_pool_drain(c);
        return st;
    }
    tcn_device_leave(prev);
    log_ready(c, p == NULL ? "" : shrink ? " (shrink)" : " (split)");
    *bcomm = c;
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcn_comm_create(const tcomms_backend_comm_args_t *args, void **bcomm)
{
    return create(args, args->parent, 0, bcomm);
}

/* A parent that failed on some survivor never comes here: the watchdog has ended its NCCL communicator already
 * (ncclCommAbort, what NCCL_SHRINK_ABORT would do first), and the core makes the child through comm_create. */
tcomms_status_t tcn_comm_shrink(void *parent, const tcomms_backend_comm_args_t *args, void **bcomm)
{
#if TCN_HAS_SHRINK
    return create(args, parent, 1, bcomm);
#else
    (void)parent; /* NCCL before 2.27: the survivors' child afresh, through a unique id in the store */
    tcomms_backend_comm_args_t fresh = *args;
    fresh.parent = NULL;
    fresh.parent_ranks = NULL;
    return create(&fresh, NULL, 0, bcomm);
#endif
}

tcomms_status_t tcn_comm_split_nonmember(void *parent, const tcomms_backend_comm_args_t *args)
{
#if TCN_HAS_SPLIT
    tcn_comm_t *p = parent;
    tcn_config_t cfg;
    tcomms_status_t st = tcn_config_build(args->hints, args->name, &cfg);
    tcomms_status_t vote = split_vote(p, args, st == TCOMMS_SUCCESS, 0);
    if (st != TCOMMS_SUCCESS || vote != TCOMMS_SUCCESS)
        return st != TCOMMS_SUCCESS ? st : vote;
    int prev = tcn_device_enter(p);
    uint64_t deadline = tc_now_ns() + (uint64_t)args->timeout_ms * 1000000ull;
    pthread_mutex_lock(&p->lock);
    if (p->nccl == NULL || tcn_comm_broken(p)) {
        pthread_mutex_unlock(&p->lock);
        tcn_device_leave(prev);
        return tcn_comm_aborted(p, "split");
    }
    ncclComm_t none = NULL;
    ncclResult_t r = ncclCommSplit(p->nccl, NCCL_SPLIT_NOCOLOR, p->rank, &none, &cfg.nc);
    if (r == ncclInProgress || (r == ncclSuccess && p->nonblocking)) /* the job may still run: see tcn_settle_child */
        r = tcn_settle(p->nccl, ncclInProgress, deadline);
    if (r != ncclSuccess)
        st = tcn_nccl_error(p, r, "ncclCommSplit (NCCL_SPLIT_NOCOLOR)");
    if (none)
        ncclCommDestroy(none); /* NCCL gives none to a NOCOLOR rank; never leak one if it did */
    pthread_mutex_unlock(&p->lock);
    tcn_device_leave(prev);
    return r == ncclSuccess ? st : tcn_split_failed(p, st, r, "ncclCommSplit (NCCL_SPLIT_NOCOLOR)");
#else
    (void)parent;
    return tcn_core->error(TCOMMS_ERR_NOT_SUPPORTED, "nccl '%s': split needs ncclCommSplit (NCCL 2.18)",
                           args->name ? args->name : "");
#endif
}

/* Wait until the watchdog list is empty: each operation ends by its deadline, when the watchdog aborts the
 * communicator at the latest; a watchdog that fell behind is covered by failing it here. */
static void drain_pending(tcn_comm_t *c)
{
    for (unsigned round = 0;; round++) {
        pthread_mutex_lock(&c->plock);
        tcn_reap(c, 1 << 30);
        size_t n = c->npending;
        uint64_t late = n ? c->pending.next->deadline_ns + 5000000000ull : 0;
        pthread_mutex_unlock(&c->plock);
        if (n == 0)
            return;
        if (tc_now_ns() > late)
            tcn_comm_fail(c, TCOMMS_ERR_ABORTED, NULL, 0, "destroyed while an operation was still running 5 s past "
                          "its timeout");
        tcn_backoff(round < 256 ? 256 : round);
    }
}

tcomms_status_t tcn_comm_destroy(void *bcomm)
{
    tcn_comm_t *c = bcomm;
    int prev = tcn_device_enter(c);
    drain_pending(c);
    tcn_watch_remove(c);
    pthread_mutex_lock(&c->lock);
    if (c->nccl && c->nonblocking) {
        uint64_t deadline = tc_now_ns() + (uint64_t)c->timeout_ms * 1000000ull;
        ncclResult_t r = c->wnccl ? tcn_settle(c->wnccl, ncclCommFinalize(c->wnccl), deadline) : ncclSuccess;
        if (r == ncclSuccess)
            r = tcn_settle(c->nccl, ncclCommFinalize(c->nccl), deadline);
        if (r != ncclSuccess) {
            tcn_core->log(TCOMMS_LOG_WARN, "nccl", "'%s' rank %d: ncclCommFinalize: %s; aborting instead", c->name,
                          c->rank, ncclGetErrorString(r));
            abandon(c);
        }
    }
    if (c->nccl != NULL)
        tcn_scratch_free(c); /* deregisters: before the NCCL communicator goes */
    /* An aborted communicator's abort gets 5 s more; a destroy waiting on a lost peer gets the timeout, once. */
    c->end_wait_ms = 5000;
    if ((c->nccl || c->wnccl) && !tcn_end_nccl(c, 1, 0, (long)c->timeout_ms)) {
        tcn_core->log(TCOMMS_LOG_ERROR, "nccl", "'%s' rank %d: ncclCommDestroy did not return within %u ms (a peer "
                      "lost?); it is left running", c->name, c->rank, c->timeout_ms);
        c->end_wait_ms = 0;
    }
    c->nccl = c->wnccl = NULL;
    pthread_mutex_unlock(&c->lock);
    release_resources(c);
    tcn_device_leave(prev);
    tcn_core->log(TCOMMS_LOG_DEBUG, "nccl", "'%s': rank %d destroyed", c->name, c->rank);
    tcn_pool_drain(c);
    return TCOMMS_SUCCESS;
}
