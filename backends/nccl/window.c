/* SPDX-License-Identifier: BSD-3-Clause */
/* Symmetric windows on an NCCL communicator of their own. NCCL 2.28 runs every all_reduce, all_gather and
 * reduce_scatter between windows with its symmetric kernels, on as few CTAs as its model allows, which at large
 * sizes lose to its ring on plain buffers (docs/perf.md, "symmetric windows and NCCL's CTA count"). So the first
 * window registration splits a second communicator off the first (same ranks, at least TCOMMS_NCCL_WINDOW_CTAS
 * CTAs) and the windows are registered there only: collectives between windows run on it, while all_reduce above
 * TCOMMS_NCCL_WINDOW_ALL_REDUCE_MAX, and all_to_all off the copy engines (window_kind), run on the first, where
 * the same memory is plain. Both communicators end
 * together (end.c) and the watchdog checks both (watchdog.c). */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

#include "tcn.h"

/* Past this size on more than two ranks, all_reduce between windows lost to the ring on the plain communicator
 * on 4 x H100 even with 32 CTAs (docs/perf.md). */
#define WIN_AR_MAX_DEFAULT (32l << 20)

tcomms_status_t tcn_win_settings(tcn_comm_t *c, int size)
{
    long ctas, ar_max;
    tcomms_status_t st = tcn_core->env_int("TCOMMS_NCCL_WINDOW_CTAS", 0, 64, 32, &ctas);
    if (st == TCOMMS_SUCCESS)
        st = tcn_core->env_int("TCOMMS_NCCL_WINDOW_ALL_REDUCE_MAX", 0, LONG_MAX,
                               size <= 2 ? LONG_MAX : WIN_AR_MAX_DEFAULT, &ar_max);
    if (st != TCOMMS_SUCCESS)
        return st;
    c->win_ctas = (int)ctas;
    c->win_ar_max = (size_t)ar_max;
    c->win_ce = tcn_config_cta_zero(&c->cfg);
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcn_win_open(tcn_comm_t *c)
{
#if TCN_HAS_WINDOW
    const char *call = "ncclCommSplit (the window communicator)";
    if (c->win_ctas == 0)
        return TCOMMS_SUCCESS;
    ncclConfig_t nc;
    tcn_config_windows(&c->cfg, c->win_ctas, &nc);
    /* A non-blocking split's init job stores the child when it ends, maybe after a failure here has returned: into
     * memory of its own, which then stays allocated. */
    ncclComm_t *cell = calloc(1, sizeof(*cell));
    if (cell == NULL)
        return tcn_core->error(TCOMMS_ERR_NO_MEMORY, "nccl '%s': out of memory for the window communicator",
                               c->name);
    uint64_t deadline = tc_now_ns() + (uint64_t)c->timeout_ms * 1000000ull;
    pthread_mutex_lock(&c->lock);
    if (c->wnccl != NULL || c->nccl == NULL || tcn_comm_broken(c)) {
        int ready = c->wnccl != NULL;
        pthread_mutex_unlock(&c->lock);
        free(cell);
        return ready ? TCOMMS_SUCCESS : tcn_comm_aborted(c, "mem_register");
    }
    ncclResult_t r = ncclCommSplit(c->nccl, 0, c->rank, cell, &nc);
    if (r != ncclSuccess && r != ncclInProgress && *cell == NULL)
        tcn_split_refused(c, call);
    if (r == ncclInProgress || (r == ncclSuccess && *cell == NULL))
        r = tcn_settle_child(cell, c, deadline);
    if (r == ncclSuccess)
        c->wnccl = *cell;
    pthread_mutex_unlock(&c->lock);
    if (r == ncclSuccess) {
        free(cell);
        tcn_core->log(TCOMMS_LOG_INFO, "nccl", "'%s' rank %d: window communicator ready (minCTAs %d, maxCTAs %d; "
                      "all_reduce above %zu bytes on the plain one)", c->name, c->rank, nc.minCTAs, nc.maxCTAs,
                      c->win_ar_max);
        return TCOMMS_SUCCESS;
    }
    tcomms_status_t st = tcn_nccl_error(c, r, call);
    tcn_split_failed(c, st, r, call); /* first: the child's abort flag must outlive the parent's abort */
    if (r == ncclInProgress) {
        uint64_t grace = tc_now_ns() + (uint64_t)c->timeout_ms * 1000000ull;
        if (tcn_settle_child(cell, c, grace) == ncclInProgress && *cell == NULL)
            return st;
    }
    if (*cell != NULL)
        ncclCommAbort(*cell);
    free(cell);
    return st;
#else
    (void)c;
    return TCOMMS_SUCCESS;
#endif
}

/* For the collectives NCCL runs between windows (symmetric kernels, or the copy engines): 1, with the bytes of the
 * send and receive buffers this rank uses (0: one it does not use, such as gather's receive buffer off the root,
 * which may be anything). 0 for the others, which run on the plain communicator. all_to_all is NCCL's send/recv
 * unless the copy engines run it (CTA policy zero): between windows that registers the memory with each peer, after
 * which NCCL 2.28.3's ncclCommAbort killed 3 of 4 ranks (SIGSEGV; docs/nccl.md), so it runs where the same memory
 * is plain. */
static int window_kind(const tcn_comm_t *c, const tcomms_coll_args_t *a, size_t *sbytes, size_t *rbytes)
{
    size_t one = a->count * tcn_core->dtype_size(a->dtype), all = one * (size_t)c->size;
    int root = a->peer == c->rank;
    switch (a->type) {
    case TCOMMS_COLL_ALL_REDUCE: *sbytes = *rbytes = one; return one <= c->win_ar_max;
    case TCOMMS_COLL_ALL_GATHER: *sbytes = one, *rbytes = all; return 1;
    case TCOMMS_COLL_REDUCE_SCATTER: *sbytes = all, *rbytes = one; return 1;
    case TCOMMS_COLL_GATHER: *sbytes = one, *rbytes = root ? all : 0; return 1;
    case TCOMMS_COLL_SCATTER: *sbytes = root ? all : 0, *rbytes = one; return 1;
    /* in place, the send side is a staged copy outside any window (ops.c) */
    case TCOMMS_COLL_ALL_TO_ALL: *sbytes = *rbytes = all; return c->win_ce && !a->in_place;
    default: return 0;
    }
}

/* Every rank must route alike, as NCCL requires of windows: every rank's buffers in windows, or none's. */
ncclComm_t tcn_route(const tcn_comm_t *c, const tcomms_coll_args_t *a)
{
    size_t sb = 0, rb = 0;
    if (c->wnccl == NULL || !window_kind(c, a, &sb, &rb))
        return c->nccl;
    if ((sb && !tcn_mem_in_window(c, a->sendbuf, sb)) || (rb && !tcn_mem_in_window(c, a->recvbuf, rb)))
        return c->nccl;
    return c->wnccl;
}

ncclResult_t tcn_settle_comm(tcn_comm_t *c, uint64_t deadline_ns)
{
    ncclResult_t r = c->nccl != NULL ? tcn_settle(c->nccl, ncclInProgress, deadline_ns) : ncclSuccess;
    if (r == ncclSuccess && c->wnccl != NULL)
        r = tcn_settle(c->wnccl, ncclInProgress, deadline_ns);
    return r;
}
