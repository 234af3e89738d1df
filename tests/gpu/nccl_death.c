/* SPDX-License-Identifier: BSD-3-Clause */
/* test_nccl's cases of a rank lost inside ncclCommSplit, after the module's split vote (which cannot see it): the
 * others must fail their split within the timeout and find the parent aborted, never wait. The rank dies, or (with
 * blocking=0 communicators, the only way NCCL's split can be polled) stalls past the timeout. The test program
 * defines ncclCommSplit itself and exports it (-export-dynamic), so the module's calls bind here ahead of
 * libnccl's: the chosen rank dies or sleeps here; every call then goes on to NCCL's own. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>

#include "../mrank.h"
#include "gpu_util.h"
#include "nccl_cases.h"

#define DEATH_TIMEOUT_MS 5000u

static int die_in_split;   /* this rank kills itself on entering ncclCommSplit */
static int stall_in_split; /* milliseconds this rank sleeps on entering it */

/* NCCL's signature with its types as the ABI passes them (pointers, int), so nccl.h is not needed here. */
typedef int (*split_fn_t)(void *comm, int color, int key, void **newcomm, void *config);

int ncclCommSplit(void *comm, int color, int key, void **newcomm, void *config);
int ncclCommSplit(void *comm, int color, int key, void **newcomm, void *config)
{
    static split_fn_t real;
    if (die_in_split)
        raise(SIGKILL);
    if (stall_in_split > 0)
        mrank_sleep_ms(stall_in_split);
    if (real == NULL) {
        void *lib = dlopen("libnccl.so.2", RTLD_LAZY | RTLD_NOLOAD);
        void *sym = lib ? dlsym(lib, "ncclCommSplit") : NULL;
        *(void **)&real = sym; /* POSIX: dlsym's object pointer holds the function's address */
    }
    return real ? real(comm, color, key, newcomm, config) : 3; /* 3: ncclInternalError */
}

/* The parent on every rank's GPU with a short timeout; rank size-1 (never rank 0, whose process serves the store)
 * dies inside the split, as a member of it (`member`) or as its only non-member. Every survivor is a member:
 * NCCL 2.28 itself crashes in a surviving non-member (its NCCL_SPLIT_NOCOLOR job has no communicator, and the
 * failure path of NCCL's init writes the error into it: a NULL dereference), which no caller can prevent. */
static int split_death(int rank, int size, int member)
{
    int victim = size - 1, ranks[8], n = member ? size : size - 1;
    tcomms_comm_t *parent = NULL, *child = NULL;
    if (nt_on_gpu(rank, DEATH_TIMEOUT_MS, NULL, &parent))
        return 1;
    int fails = nt_all_reduce_check(parent, rank, size, 256, "parent all_reduce before the split");
    for (int k = 0; k < n; k++)
        ranks[k] = k;
    die_in_split = rank == victim;
    double t0 = mrank_now();
    tcomms_status_t st = tcomms_comm_split(parent, ranks, rank < n ? n : 0, "orphan", NULL, &child);
    double took = mrank_now() - t0, bound = 2.0 * DEATH_TIMEOUT_MS / 1000 + 5;
    if (rank == victim)
        return 1 + mrank_failf("FAIL rank %d: was to die inside ncclCommSplit, but the split returned %s (the "
                               "test's ncclCommSplit was not the one the module called)", rank, tcomms_strerror(st));
    const char *who = member ? "split with a member lost inside it" : "split with its non-member lost inside it";
    if (st == TCOMMS_SUCCESS)
        fails += mrank_failf("FAIL rank %d: %s: succeeded", rank, who);
    else
        mrank_logf("test_nccl split_death rank %d (%s lost): %s after %.2f s: %s", rank,
                   member ? "member" : "non-member", tcomms_strerror(st), took, tcomms_last_error());
    if (child)
        fails += mrank_failf("FAIL rank %d: %s: got a communicator", rank, who);
    if (took > bound)
        fails += mrank_failf("FAIL rank %d: %s: took %.1f s, more than %.0f s", rank, who, took, bound);
    float *d = NULL;
    if (gpu_alloc_f32(&d, 16))
        return fails + 1;
    t0 = mrank_now();
    fails += nt_expect(tcomms_all_reduce(parent, d, d, 16, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL),
                       TCOMMS_ERR_ABORTED, rank, "parent all_reduce after the failed split");
    fails += nt_destroy(parent, rank);
    if (mrank_now() - t0 > bound)
        fails += mrank_failf("FAIL rank %d: all_reduce and destroy of the aborted parent took %.1f s", rank,
                             mrank_now() - t0);
    CU(cudaFree(d));
    return fails;
}

static tcomms_hints_t *nonblocking(void)
{
    tcomms_hints_t *h = NULL;
    if (tcomms_hints_create(&h) != TCOMMS_SUCCESS || tcomms_hints_set(h, "blocking", "0") != TCOMMS_SUCCESS) {
        tcomms_hints_free(h);
        return NULL;
    }
    return h;
}

/* blocking=0 parent and child. First a split that works (NCCL hands out the child only when its init job ends),
 * then one where rank size-1 sleeps inside ncclCommSplit until 3 s past the timeout: the others' split must end in
 * TIMEOUT at about the timeout, the sleeper's in an error once it wakes (the others have aborted), and every parent
 * must then be aborted. */
int nt_split_stall(int rank, int size, void *arg)
{
    (void)arg;
    int victim = size - 1, ranks[8];
    tcomms_hints_t *h = nonblocking();
    tcomms_comm_t *parent = NULL, *child = NULL;
    if (h == NULL || nt_on_gpu(rank, DEATH_TIMEOUT_MS, h, &parent)) {
        tcomms_hints_free(h);
        return 1;
    }
    int fails = nt_all_reduce_check(parent, rank, size, 256, "blocking=0 parent all_reduce before the split");
    for (int k = 0; k < size; k++)
        ranks[k] = k;
    if (nt_expect(tcomms_comm_split(parent, ranks, size, "nonblocking", h, &child), TCOMMS_SUCCESS, rank,
                  "split with blocking=0") == 0) {
        fails += nt_all_reduce_check(child, rank, size, 256, "blocking=0 child all_reduce");
        fails += nt_all_reduce_check(parent, rank, size, 256, "blocking=0 parent all_reduce after the split");
        fails += nt_destroy(child, rank);
    } else {
        fails++;
    }
    child = NULL;
    stall_in_split = rank == victim ? (int)DEATH_TIMEOUT_MS + 3000 : 0;
    double t0 = mrank_now();
    tcomms_status_t st = tcomms_comm_split(parent, ranks, size, "stalled", h, &child);
    double took = mrank_now() - t0, timeout = DEATH_TIMEOUT_MS / 1000.0;
    tcomms_hints_free(h);
    mrank_logf("test_nccl split_stall rank %d%s: %s after %.2f s: %s", rank, rank == victim ? " (slept)" : "",
               tcomms_strerror(st), took, st == TCOMMS_SUCCESS ? "" : tcomms_last_error());
    if (rank != victim && st != TCOMMS_ERR_TIMEOUT)
        fails += nt_expect(st, TCOMMS_ERR_TIMEOUT, rank, "split with a rank stalled inside it");
    if (rank == victim && st == TCOMMS_SUCCESS)
        fails += mrank_failf("FAIL rank %d: the split succeeded after the others gave up", rank);
    if (child)
        fails += mrank_failf("FAIL rank %d: split_stall: got a communicator", rank) + nt_destroy(child, rank);
    if (took > 2 * timeout + 5 || (rank != victim && took < timeout - 0.5))
        fails += mrank_failf("FAIL rank %d: split_stall: ended after %.1f s (timeout %.0f s)", rank, took, timeout);
    float *d = NULL;
    if (gpu_alloc_f32(&d, 16))
        return fails + 1;
    fails += nt_expect(tcomms_all_reduce(parent, d, d, 16, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL),
                       TCOMMS_ERR_ABORTED, rank, "parent all_reduce after the stalled split");
    CU(cudaFree(d));
    return fails + nt_destroy(parent, rank);
}

int nt_split_death_member(int rank, int size, void *arg)
{
    (void)arg;
    return split_death(rank, size, 1);
}

int nt_split_death_nonmember(int rank, int size, void *arg)
{
    (void)arg;
    return split_death(rank, size, 0);
}
