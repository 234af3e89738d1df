/* SPDX-License-Identifier: BSD-3-Clause */
/* test_nccl `flight_blocking` and `flight_handle`: the flight record on NCCL (lib/flight_ask.c). Every rank runs
 * all_reduce #1 and broadcast #2; the last rank then skips all_reduce #3 and sleeps outside tcomms, answering only
 * from its listener thread. The others, with a 3 s timeout:
 *   blocking: a blocking all_reduce #3 returns once queued, the watchdog fails the communicator, and the next call's
 *             TCOMMS_ERR_ABORTED names #3 as where the ranks diverge and the last rank as never having posted it;
 *   handle:   tcomms_work_synchronize of all_reduce #3 gives TCOMMS_ERR_TIMEOUT naming the last rank likewise.
 * The reference is the script: which rank skipped which operation is known in advance. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "gpu_util.h"
#include "../mrank.h"
#include "nccl_cases.h"

#define FLIGHT_TIMEOUT_MS 3000u

static int lacks(const char *msg, int rank, const char *needle)
{
    if (strstr(msg, needle) != NULL)
        return 0;
    return mrank_failf("FAIL rank %d: flight: the message lacks \"%s\": %s", rank, needle, msg);
}

static int flight(int rank, int size, void *arg, int with_handle)
{
    volatile int *done = (volatile int *)arg + 1000; /* set once every checking rank is through */
    volatile int *through = (volatile int *)arg + 1001;
    tcomms_comm_t *comm = NULL;
    float *d = NULL;
    tcomms_work_t *w = NULL;
    int late = size - 1, fails = 0;
    if (nt_on_gpu(rank, FLIGHT_TIMEOUT_MS, NULL, &comm) || gpu_alloc_f32(&d, 4))
        return 1;
    fails += nt_expect(tcomms_all_reduce(comm, d, d, 4, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL), TCOMMS_SUCCESS, rank,
                       "all_reduce #1");
    fails += nt_expect(tcomms_broadcast(comm, d, 1, TCOMMS_INT32, 0, NULL, &w), TCOMMS_SUCCESS, rank, "broadcast #2");
    fails += nt_expect(tcomms_work_synchronize(w, 0), TCOMMS_SUCCESS, rank, "broadcast #2's synchronize");
    tcomms_work_free(w);
    char never[64];
    snprintf(never, sizeof(never), "rank %d never posted #3", late);
    if (fails == 0 && rank == late) {
        while (!*done)
            usleep(20000);
    } else if (fails == 0 && !with_handle) {
        fails += nt_expect(tcomms_all_reduce(comm, d, d, 4, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL), TCOMMS_SUCCESS,
                           rank, "all_reduce #3, queued");
        sleep(FLIGHT_TIMEOUT_MS / 1000 + 2); /* past the watchdog's look at #3's deadline */
        tcomms_status_t st = tcomms_all_reduce(comm, d, d, 4, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL);
        const char *msg = tcomms_last_error();
        mrank_logf("test_nccl: flight_blocking, rank %d: the next call: status %d: %s", rank, st, msg);
        fails += nt_expect(st, TCOMMS_ERR_ABORTED, rank, "the call after all_reduce #3 timed out");
        fails += lacks(msg, rank, "the ranks diverge at all_reduce #3 on 'world' (16 B float32 sum)") +
                 lacks(msg, rank, never);
    } else if (fails == 0) {
        fails += nt_expect(tcomms_all_reduce(comm, d, d, 4, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, &w), TCOMMS_SUCCESS,
                           rank, "all_reduce #3, posted");
        tcomms_status_t st = tcomms_work_synchronize(w, 0);
        const char *msg = tcomms_last_error();
        mrank_logf("test_nccl: flight_handle, rank %d: synchronize: status %d: %s", rank, st, msg);
        fails += nt_expect(st, TCOMMS_ERR_TIMEOUT, rank, "all_reduce #3's synchronize");
        fails += lacks(msg, rank, "all_reduce #3 on 'world' (16 B float32 sum) timed out after 3.0 s") +
                 lacks(msg, rank, never);
        tcomms_work_free(w);
    }
    if (rank != late && __atomic_add_fetch(through, 1, __ATOMIC_SEQ_CST) == size - 1)
        *done = 1;
    CU(cudaFree(d));
    return fails + nt_destroy(comm, rank);
}

int nt_flight_blocking(int rank, int size, void *arg)
{
    return flight(rank, size, arg, 0);
}

int nt_flight_handle(int rank, int size, void *arg)
{
    return flight(rank, size, arg, 1);
}
