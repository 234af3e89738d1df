/* SPDX-License-Identifier: BSD-3-Clause */
/* What multi-rank test children do with tcomms itself: the root communicator they start from (the environment
 * mrank_run sets names its rank, size and rendezvous), and a second thread that aborts a communicator while the
 * first waits on it (test_abort, and test_nccl's nccl_abort.c). */
#ifndef TESTS_MRANK_WORLD_H
#define TESTS_MRANK_WORLD_H

#include <pthread.h>
#include <stdint.h>
#include <tcomms/tcomms.h>

/* A root on `backend` (NULL or "": the default selection) with operations bounded by `timeout_ms`, or NULL after
 * logging "FAIL rank R: ..." with the library's message. */
tcomms_comm_t *mrank_world(const char *backend, uint32_t timeout_ms, int rank);

/* tcomms_comm_abort(comm) on a thread of its own, `after_ms` after mrank_abort_later: long enough for the caller to
 * be surely waiting on `comm` by then. */
typedef struct mrank_aborter {
    tcomms_comm_t *comm;
    int after_ms;
    double at;          /* mrank_now() when tcomms_comm_abort was called; 0 until then */
    double took;        /* seconds the call took */
    tcomms_status_t st; /* what it returned */
    pthread_t thread;
} mrank_aborter_t;

/* Start the aborting thread; 0, or -1 when it could not be created (nothing to join then). */
int mrank_abort_later(mrank_aborter_t *a, tcomms_comm_t *comm, int after_ms);

/* Wait for the aborting thread to finish: a->at, took and st are final afterwards. */
void mrank_abort_join(mrank_aborter_t *a);

#endif
