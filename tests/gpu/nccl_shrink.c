/* SPDX-License-Identifier: BSD-3-Clause */
/* test_nccl's cases of tcomms_comm_shrink: (a) a healthy parent leaves its last rank out, which calls nothing: the
 * survivors' child comes from ncclCommShrink (counted here) and works, and so does the parent afterwards; (b) the
 * last rank SIGKILLs itself after an all_reduce: the survivors' next all_reduce fails, they shrink without it (the
 * watchdog ended the parent's NCCL communicator, so the child is made afresh, with no ncclCommShrink call) and the
 * child works while the parent stays failed. The program defines ncclCommShrink and exports it, as nccl_death.c
 * does ncclCommSplit, so the module's calls bind here and go on to NCCL's own. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>

#include "../mrank.h"
#include "gpu_util.h"
#include "nccl_cases.h"

#define SHRINK_TIMEOUT_MS 5000u

static int shrink_calls; /* ncclCommShrink calls of this rank */

typedef int (*shrink_fn_t)(void *comm, int *exclude, int nexclude, void **newcomm, void *config, int flags);

int ncclCommShrink(void *comm, int *exclude, int nexclude, void **newcomm, void *config, int flags);
int ncclCommShrink(void *comm, int *exclude, int nexclude, void **newcomm, void *config, int flags)
{
    static shrink_fn_t real;
    shrink_calls++;
    if (real == NULL) {
        void *lib = dlopen("libnccl.so.2", RTLD_LAZY | RTLD_NOLOAD);
        void *sym = lib ? dlsym(lib, "ncclCommShrink") : NULL;
        *(void **)&real = sym;
    }
    return real ? real(comm, exclude, nexclude, newcomm, config, flags) : 3; /* 3: ncclInternalError */
}

/* The child of the survivors 0..size-2 (parent rank = child rank): its rank and size, then a checked all_reduce. */
static int check_child(tcomms_comm_t *child, int rank, int size, const char *what)
{
    int crank = -1, csize = -1;
    tcomms_comm_rank(child, &crank);
    tcomms_comm_size(child, &csize);
    if (crank != rank || csize != size - 1)
        return mrank_failf("FAIL rank %d: %s: child rank %d of %d, expected %d of %d", rank, what, crank, csize,
                           rank, size - 1);
    return nt_all_reduce_check(child, crank, csize, 4096, what);
}

/* Shrink `parent` without its last rank, expecting `calls` ncclCommShrink calls of this rank by then, and check
 * the child; the failures. */
static int shrink_without_last(tcomms_comm_t *parent, int rank, int size, int calls, const char *what)
{
    int last = size - 1, fails = 0;
    tcomms_comm_t *child = NULL;
    double t0 = mrank_now();
    tcomms_status_t st = tcomms_comm_shrink(parent, &last, 1, "survivors", NULL, &child);
    mrank_logf("test_nccl %s rank %d: shrink: %s after %.2f s%s%s", what, rank, tcomms_strerror(st),
               mrank_now() - t0, st == TCOMMS_SUCCESS ? "" : ": ", st == TCOMMS_SUCCESS ? "" : tcomms_last_error());
    if (nt_expect(st, TCOMMS_SUCCESS, rank, what) == 0)
        fails += check_child(child, rank, size, what);
    else
        fails++;
    if (shrink_calls != calls)
        fails += mrank_failf("FAIL rank %d: %s: %d ncclCommShrink calls, expected %d", rank, what, shrink_calls,
                             calls);
    return fails + nt_destroy(child, rank);
}

int nt_shrink_healthy(int rank, int size, void *arg)
{
    (void)arg;
    tcomms_comm_t *parent = NULL;
    if (nt_on_gpu(rank, SHRINK_TIMEOUT_MS, NULL, &parent))
        return 1;
    int fails = nt_all_reduce_check(parent, rank, size, 256, "parent all_reduce before the shrink");
    if (rank != size - 1)
        fails += shrink_without_last(parent, rank, size, 1, "shrink_healthy");
    fails += nt_all_reduce_check(parent, rank, size, 256, "parent all_reduce after the shrink");
    return fails + nt_destroy(parent, rank);
}

int nt_shrink_after_death(int rank, int size, void *arg)
{
    (void)arg;
    int last = size - 1;
    tcomms_comm_t *parent = NULL;
    if (nt_on_gpu(rank, SHRINK_TIMEOUT_MS, NULL, &parent))
        return 1;
    int fails = nt_all_reduce_check(parent, rank, size, 256, "parent all_reduce before the death");
    if (rank == last)
        raise(SIGKILL);
    float *d = NULL;
    if (gpu_alloc_f32(&d, 256))
        return fails + 1;
    double t0 = mrank_now();
    tcomms_status_t st = tcomms_all_reduce(parent, d, d, 256, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL);
    if (st == TCOMMS_SUCCESS)
        st = CU(cudaStreamSynchronize(0)) ? TCOMMS_ERR_INTERNAL : TCOMMS_SUCCESS;
    mrank_logf("test_nccl shrink_after_death rank %d: all_reduce after rank %d died: %s after %.2f s: %s", rank,
               last, tcomms_strerror(st), mrank_now() - t0, tcomms_last_error());
    /* A blocking all_reduce returns once enqueued: the failure may show only on the next call. */
    for (int i = 0; i < 3 && st == TCOMMS_SUCCESS; i++)
        st = tcomms_all_reduce(parent, d, d, 256, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL);
    if (st == TCOMMS_SUCCESS)
        fails += mrank_failf("FAIL rank %d: the parent's all_reduces went on succeeding after rank %d died", rank,
                             last);
    fails += shrink_without_last(parent, rank, size, 0, "shrink_after_death");
    fails += nt_expect(tcomms_all_reduce(parent, d, d, 256, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL),
                       TCOMMS_ERR_ABORTED, rank, "the failed parent's all_reduce after the shrink");
    CU(cudaFree(d));
    return fails + nt_destroy(parent, rank);
}
