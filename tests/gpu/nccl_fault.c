/* SPDX-License-Identifier: BSD-3-Clause */
/* test_nccl's launch failures. The test program defines ncclAllReduce itself (exported, like nccl_death.c's
 * ncclCommSplit), so a rank can make the module's next launch fail as NCCL would refuse it; every other call goes
 * on to NCCL's own. A refusal that leaves the communicator usable (ncclInvalidArgument, on every rank) is
 * TCOMMS_ERR_INVALID_ARG and the next call works. One after which NCCL wants an abort (ncclSystemError, on the
 * last rank only) is TCOMMS_ERR_SYSTEM there and aborts its communicator (later calls TCOMMS_ERR_ABORTED). The
 * other ranks' all_reduce waits for it and must end by the timeout, never hang: on 2 ranks the watchdog aborts
 * it; on more, a peer's abort can end it first, and NCCL then reports nothing (docs/nccl.md), so only the stream
 * draining is required there. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>

#include "../mrank.h"
#include "gpu_util.h"
#include "nccl_cases.h"

#define FAULT_TIMEOUT_MS 3000u
#define NCCL_SYSTEM_ERROR 2     /* ncclSystemError */
#define NCCL_INVALID_ARGUMENT 4 /* ncclInvalidArgument */

static int fail_next; /* the ncclResult_t the next ncclAllReduce returns without launching; 0 = none */

/* NCCL's signature with its types as the ABI passes them (enums as int, pointers), so nccl.h is not needed. */
typedef int (*all_reduce_fn_t)(const void *, void *, size_t, int, int, void *, void *);

int ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, int datatype, int op, void *comm,
                  void *stream);
int ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, int datatype, int op, void *comm, void *stream)
{
    static all_reduce_fn_t real;
    if (fail_next) {
        int r = fail_next;
        fail_next = 0;
        return r;
    }
    if (real == NULL) {
        void *lib = dlopen("libnccl.so.2", RTLD_LAZY | RTLD_NOLOAD);
        void *sym = lib ? dlsym(lib, "ncclAllReduce") : NULL;
        *(void **)&real = sym; /* POSIX: dlsym's object pointer holds the function's address */
    }
    return real ? real(sendbuff, recvbuff, count, datatype, op, comm, stream) : 3; /* 3: ncclInternalError */
}

int nt_launch_failure(int rank, int size, void *arg)
{
    (void)arg;
    enum { N = 256 };
    int victim = size - 1;
    tcomms_comm_t *c = NULL;
    tcomms_hints_t *h = NULL;
    float *d = NULL;
    /* the small-message path would launch its own kernel, not ncclAllReduce: off here */
    int made = tcomms_hints_create(&h) == TCOMMS_SUCCESS &&
               tcomms_hints_set(h, "nccl.small_bytes", "0") == TCOMMS_SUCCESS &&
               nt_on_gpu(rank, FAULT_TIMEOUT_MS, h, &c) == 0;
    tcomms_hints_free(h);
    if (!made)
        return 1 + nt_destroy(c, rank);
    if (gpu_alloc_f32(&d, N))
        return 1 + nt_destroy(c, rank);
    fail_next = NCCL_INVALID_ARGUMENT;
    int fails = nt_expect(tcomms_all_reduce(c, d, d, N, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL),
                          TCOMMS_ERR_INVALID_ARG, rank, "all_reduce refused with ncclInvalidArgument");
    fails += nt_all_reduce_check(c, rank, size, N, "all_reduce after ncclInvalidArgument");
    fail_next = rank == victim ? NCCL_SYSTEM_ERROR : 0;
    double t0 = mrank_now();
    tcomms_status_t st = tcomms_all_reduce(c, d, d, N, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL);
    if (rank == victim)
        fails += nt_expect(st, TCOMMS_ERR_SYSTEM, rank, "all_reduce refused with ncclSystemError");
    else /* stream-ordered: posted; the watchdog aborts it at the deadline, and the stream drains */
        fails += nt_expect(st, TCOMMS_SUCCESS, rank, "all_reduce whose peer's launch failed");
    double bound = FAULT_TIMEOUT_MS / 1000.0 + 5;
    while (cudaStreamQuery(0) == cudaErrorNotReady && mrank_now() - t0 < bound)
        mrank_sleep_ms(10);
    double took = mrank_now() - t0;
    if (cudaStreamQuery(0) == cudaErrorNotReady)
        fails += mrank_failf("FAIL rank %d: launch_failure: the stream still waits %.0f s on (timeout %.1f s)", rank,
                             bound, FAULT_TIMEOUT_MS / 1000.0);
    mrank_sleep_ms(rank == victim ? 0 : 300); /* past the watchdog's next round */
    tcomms_status_t after = tcomms_all_reduce(c, d, d, N, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL);
    if (rank == victim || size == 2)
        fails += nt_expect(after, TCOMMS_ERR_ABORTED, rank, "all_reduce after the failed launch");
    else if (after == TCOMMS_SUCCESS) /* not aborted: this launch waits for the victim; let the watchdog end it */
        mrank_sleep_ms((int)FAULT_TIMEOUT_MS + 500);
    mrank_logf("test_nccl launch_failure rank %d: %s, stream drained after %.2f s; then %s%s%s", rank,
               tcomms_strerror(st), took, tcomms_strerror(after), after == TCOMMS_SUCCESS ? "" : ": ",
               after == TCOMMS_SUCCESS ? "" : tcomms_last_error());
    if (!fails) /* cudaFree waits for the device: not while a kernel may be stuck */
        CU(cudaFree(d));
    return fails + nt_destroy(c, rank);
}
