/* SPDX-License-Identifier: BSD-3-Clause */
/* Small helpers every file of the NCCL backend shares: the deadlines of timed waits, polling back-off, the device
 * guard that makes a communicator's GPU current on whatever thread calls in, and the translation of CUDA/NCCL
 * results into tcomms statuses with messages that name the call and the communicator. */
#include <sched.h>
#include <time.h>

#include "tcn.h"

struct timespec tcn_in_ms(long ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long ns = ts.tv_nsec + (ms % 1000) * 1000000L;
    ts.tv_sec += ms / 1000 + ns / 1000000000L;
    ts.tv_nsec = ns % 1000000000L;
    return ts;
}

void tcn_backoff(unsigned round)
{
    if (round < 64)
        return; /* a GPU operation of a few microseconds: keep polling */
    if (round < 256) {
        sched_yield();
        return;
    }
    /* 10 us doubling up to 1 ms: the caller asked to block the host anyway */
    unsigned shift = (round - 256) / 32;
    long ns = 10000L << (shift > 7 ? 7 : shift);
    struct timespec ts = {0, ns > 1000000L ? 1000000L : ns};
    nanosleep(&ts, NULL);
}

/* cudaGetDevice costs far less than a redundant cudaSetDevice, and the common case is "already current". */
int tcn_device_enter(const tcn_comm_t *c)
{
    int cur = -1;
    if (cudaGetDevice(&cur) == cudaSuccess && cur == c->device)
        return -1;
    cudaSetDevice(c->device);
    return cur;
}

void tcn_device_leave(int prev)
{
    if (prev >= 0)
        cudaSetDevice(prev);
}

tcomms_status_t tcn_cuda_error(cudaError_t err, const char *call, const char *comm_name)
{
    tcomms_status_t st = err == cudaErrorMemoryAllocation ? TCOMMS_ERR_NO_MEMORY
                         : err == cudaErrorInvalidValue || err == cudaErrorInvalidResourceHandle
                             ? TCOMMS_ERR_INVALID_ARG
                             : TCOMMS_ERR_INTERNAL;
    return tcn_core->error(st, "nccl%s%s%s: %s failed: %s (%s)", comm_name ? " '" : "", comm_name ? comm_name : "",
                           comm_name ? "'" : "", call, cudaGetErrorString(err), cudaGetErrorName(err));
}

tcomms_status_t tcn_nccl_error(const tcn_comm_t *c, ncclResult_t res, const char *call)
{
    tcomms_status_t st;
    switch (res) {
    case ncclInvalidArgument:
    case ncclInvalidUsage:
        st = TCOMMS_ERR_INVALID_ARG;
        break;
    case ncclSystemError:
        st = TCOMMS_ERR_SYSTEM;
        break;
    case ncclRemoteError:
        st = TCOMMS_ERR_REMOTE;
        break;
    case ncclInProgress:
        st = TCOMMS_ERR_TIMEOUT; /* only reaches here when a non-blocking call outlived its deadline */
        break;
    default:
        st = TCOMMS_ERR_INTERNAL;
        break;
    }
    const char *last = c && c->nccl ? ncclGetLastError(c->nccl) : ncclGetLastError(NULL);
    return tcn_core->error(st, "nccl '%s' rank %d: %s failed: %s%s%s", c ? c->name : "", c ? c->rank : -1, call,
                           res == ncclInProgress ? "still in progress at its deadline" : ncclGetErrorString(res),
                           last && *last ? ": " : "", last ? last : "");
}

ncclResult_t tcn_settle(ncclComm_t comm, ncclResult_t res, uint64_t deadline_ns)
{
    for (unsigned round = 0; res == ncclInProgress; round++) {
        if (tc_now_ns() >= deadline_ns)
            return ncclInProgress;
        tcn_backoff(round + 256);
        ncclResult_t q = ncclCommGetAsyncError(comm, &res);
        if (q != ncclSuccess)
            return q;
    }
    return res;
}
