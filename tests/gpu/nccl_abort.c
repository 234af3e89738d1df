/* SPDX-License-Identifier: BSD-3-Clause */
/* test_nccl's rank function for tcomms_comm_abort on NCCL (backends/nccl/watchdog.c: tcn_comm_abort): a split child
 * whose all_reduce rank 1 never joins is aborted from a second thread while the main thread blocks in
 * tcomms_work_synchronize; the synchronize returns TCOMMS_ERR_ABORTED within 1 s of the abort, later calls on the
 * child are ABORTED naming the abort, and the parent still reduces right (children and parents are independent, as
 * with ncclCommAbort). Then every rank aborts the idle parent: its next call is ABORTED at once, and destroying
 * both returns in bounded time. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

#include "../mrank.h"
#include "../mrank_world.h"
#include "gpu_util.h"
#include "nccl_cases.h"

#define ABORT_AFTER_MS 300
#define PROMPT_S 1.0
#define ABORT_BOUND_S 5.0 /* tcn_comm_fail waits up to 2 s for the lock and 1 s for ncclCommAbort */
#define COUNT 1024

/* TCOMMS_ERR_ABORTED whose message names the abort. */
static int refused(tcomms_status_t st, int rank, const char *what)
{
    if (st == TCOMMS_ERR_ABORTED && strstr(tcomms_last_error(), "tcomms_comm_abort") != NULL)
        return 0;
    return mrank_failf("FAIL rank %d: %s after the abort returned %s (%s), expected TCOMMS_ERR_ABORTED naming "
                       "tcomms_comm_abort", rank, what, tcomms_strerror(st), tcomms_last_error());
}

/* The main thread blocks in synchronize on an all_reduce rank 1 skips; another thread aborts the child. */
static int abort_while_synchronizing(tcomms_comm_t *child, float *d, int rank)
{
    int fails = 0;
    tcomms_work_t *w = NULL;
    tcomms_status_t st = tcomms_all_reduce(child, d, d, COUNT, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, &w);
    if (st != TCOMMS_SUCCESS)
        return nt_expect(st, TCOMMS_SUCCESS, rank, "posting the child's all_reduce rank 1 skips");
    mrank_aborter_t a;
    if (mrank_abort_later(&a, child, ABORT_AFTER_MS) != 0) {
        tcomms_work_free(w);
        return mrank_failf("FAIL rank %d: pthread_create", rank);
    }
    st = tcomms_work_synchronize(w, 0);
    double back = mrank_now();
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", tcomms_last_error());
    mrank_abort_join(&a);
    fails += nt_expect(a.st, TCOMMS_SUCCESS, rank, "tcomms_comm_abort on the child");
    if (st != TCOMMS_ERR_ABORTED)
        fails += mrank_failf("FAIL rank %d: synchronize returned %s (%s), expected TCOMMS_ERR_ABORTED", rank,
                             tcomms_strerror(st), msg);
    if (a.at == 0 || back < a.at || back - a.at > PROMPT_S)
        fails += mrank_failf("FAIL rank %d: synchronize returned %.3f s after the abort (bound %.1f s)", rank,
                             back - a.at, PROMPT_S);
    if (a.took > ABORT_BOUND_S)
        fails += mrank_failf("FAIL rank %d: tcomms_comm_abort took %.2f s", rank, a.took);
    if ((st = tcomms_work_test(w)) != TCOMMS_ERR_ABORTED)
        fails += mrank_failf("FAIL rank %d: test after the abort returned %s", rank, tcomms_strerror(st));
    tcomms_work_free(w);
    fails += refused(tcomms_all_reduce(child, d, d, COUNT, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL), rank,
                     "the child's next all_reduce");
    mrank_logf("test_nccl abort rank %d: synchronize %s %.3f s after the abort, which took %.3f s", rank,
               tcomms_strerror(st), back - a.at, a.took);
    return fails;
}

int nt_abort(int rank, int size, void *arg)
{
    volatile int *done = arg;
    tcomms_comm_t *parent = NULL, *child = NULL;
    float *d = NULL;
    if (gpu_bind(rank % gpu_count) || nt_create(&parent, "nccl", -1, NULL, NULL) || gpu_alloc_f32(&d, COUNT))
        return 1;
    int all[64], fails = 0;
    for (int r = 0; r < size; r++)
        all[r] = r;
    if (nt_expect(tcomms_comm_split(parent, all, size, "child", NULL, &child), TCOMMS_SUCCESS, rank, "split"))
        return 1;
    if (rank != 1)
        fails += abort_while_synchronizing(child, d, rank);
    if (mrank_host_barrier(done, size, 1, 60) != 0)
        return fails + mrank_failf("FAIL rank %d: the other ranks did not finish the child's abort", rank);
    fails += nt_all_reduce_check(parent, rank, size, COUNT, "the parent after its child's abort");
    /* nothing pending: the abort still refuses what comes after it, at once */
    double t0 = mrank_now();
    fails += nt_expect(tcomms_comm_abort(parent), TCOMMS_SUCCESS, rank, "tcomms_comm_abort on the idle parent");
    fails += refused(tcomms_all_reduce(parent, d, d, COUNT, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL), rank,
                     "the parent's next all_reduce");
    if (mrank_now() - t0 > ABORT_BOUND_S)
        fails += mrank_failf("FAIL rank %d: aborting the idle parent took %.2f s", rank, mrank_now() - t0);
    mrank_host_barrier(done, size, 2, 60);
    t0 = mrank_now();
    fails += nt_destroy(child, rank) + nt_destroy(parent, rank);
    if (mrank_now() - t0 > 2 * ABORT_BOUND_S + 2)
        fails += mrank_failf("FAIL rank %d: destroying the aborted communicators took %.2f s", rank,
                             mrank_now() - t0);
    fails += CU(cudaFree(d));
    return fails;
}
