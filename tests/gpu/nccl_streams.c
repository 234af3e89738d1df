/* SPDX-License-Identifier: BSD-3-Clause */
/* test_nccl's rank functions for stream-ordered completion: wait and blocking calls that return while the operation
 * cannot have run (it sits behind a host-function "gate" on the caller's stream), synchronize that blocks, CUDA graph
 * capture and replay, and a peer that never joins (TIMEOUT within timeout + 2 s, then ABORTED). No check relies on
 * how long something took except the timeout bound the issue states. */
#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "../mrank.h"
#include "gpu_util.h"
#include "nccl_cases.h"

/* A host function on a stream that holds everything behind it until `open` is set or `limit_s` has passed (so a
 * host that blocks on the stream by mistake is late, never hung). `passed` records that the stream went on. */
typedef struct gate {
    volatile int open;
    volatile int passed;
    double limit_s;
} gate_t;

static void CUDART_CB gate_fn(void *p)
{
    gate_t *g = p;
    double end = mrank_now() + g->limit_s;
    while (!__atomic_load_n(&g->open, __ATOMIC_SEQ_CST) && mrank_now() < end)
        mrank_sleep_ms(1);
    __atomic_store_n(&g->passed, 1, __ATOMIC_SEQ_CST);
}

typedef struct stream_ctx {
    tcomms_comm_t *comm;
    cudaStream_t s;
    float *in, *out, *host; /* host: pinned, read back on s */
    size_t n;
    nt_vals_t v;
    int rank;
} stream_ctx_t;

/* Fresh input and a zeroed output, complete on the device before anything is queued behind a gate. */
static int stream_reset(stream_ctx_t *x, int rep)
{
    x->v.rep = rep;
    return gpu_fill_f32(x->in, x->n, nt_in_value, &x->v) || CU(cudaMemset(x->out, 0, x->n * sizeof(float))) ||
           CU(cudaDeviceSynchronize());
}

/* Read the output back on the caller's stream: it is right only if that stream was made to wait for the op. */
static int stream_expect(stream_ctx_t *x, const char *what)
{
    if (CU(cudaMemcpyAsync(x->host, x->out, x->n * sizeof(float), cudaMemcpyDeviceToHost, x->s)) ||
        CU(cudaStreamSynchronize(x->s)))
        return 1;
    int shown = 0;
    for (size_t i = 0; i < x->n; i++)
        if ((double)x->host[i] != nt_sum_value(i, &x->v) && shown++ < 3)
            mrank_logf("FAIL rank %d: %s: element %zu = %g, expected %g", x->rank, what, i, (double)x->host[i],
                       nt_sum_value(i, &x->v));
    return shown > 0;
}

/* After the host returned from `what` with the gate shut: the caller's stream cannot be done. */
static int expect_not_done(stream_ctx_t *x, gate_t *g, const char *what)
{
    cudaError_t q = cudaStreamQuery(x->s);
    if (q == cudaErrorNotReady && !__atomic_load_n(&g->passed, __ATOMIC_SEQ_CST))
        return 0;
    return mrank_failf("FAIL rank %d: %s blocked the host: when it returned the gate had %s and the stream was %s",
                       x->rank, what, g->passed ? "passed" : "not passed", cudaGetErrorName(q));
}

static int async_wait_case(stream_ctx_t *x, const tcomms_op_opts_t *o)
{
    gate_t g = {0, 0, 20.0};
    tcomms_work_t *w = NULL;
    int fails = stream_reset(x, 1) || CU(cudaLaunchHostFunc(x->s, gate_fn, &g));
    if (fails)
        return fails;
    fails += nt_expect(tcomms_all_reduce(x->comm, x->in, x->out, x->n, TCOMMS_FLOAT32, TCOMMS_SUM, o, &w),
                       TCOMMS_SUCCESS, x->rank, "async all_reduce behind a gate");
    if (!fails) {
        fails += nt_expect(tcomms_work_wait(w, 0), TCOMMS_SUCCESS, x->rank, "tcomms_work_wait");
        fails += expect_not_done(x, &g, "tcomms_work_wait");
        fails += nt_expect(tcomms_work_test(w), TCOMMS_IN_PROGRESS, x->rank, "tcomms_work_test with the gate shut");
    }
    __atomic_store_n(&g.open, 1, __ATOMIC_SEQ_CST);
    fails += stream_expect(x, "async all_reduce read on the caller's stream after tcomms_work_wait");
    if (w)
        fails += nt_expect(tcomms_work_test(w), TCOMMS_SUCCESS, x->rank, "tcomms_work_test after the stream sync");
    tcomms_work_free(w);
    return fails;
}

static int blocking_case(stream_ctx_t *x, const tcomms_op_opts_t *o)
{
    gate_t g = {0, 0, 20.0};
    int fails = stream_reset(x, 2) || CU(cudaLaunchHostFunc(x->s, gate_fn, &g));
    if (fails)
        return fails;
    fails += nt_expect(tcomms_all_reduce(x->comm, x->in, x->out, x->n, TCOMMS_FLOAT32, TCOMMS_SUM, o, NULL),
                       TCOMMS_SUCCESS, x->rank, "blocking all_reduce behind a gate");
    fails += expect_not_done(x, &g, "a blocking all_reduce");
    __atomic_store_n(&g.open, 1, __ATOMIC_SEQ_CST);
    return fails + stream_expect(x, "blocking all_reduce read on the caller's stream");
}

/* The gate opens by itself after 0.5 s: synchronize may return only after the stream passed it. */
static int synchronize_case(stream_ctx_t *x, const tcomms_op_opts_t *o)
{
    gate_t g = {0, 0, 0.5};
    tcomms_work_t *w = NULL;
    int fails = stream_reset(x, 3) || CU(cudaLaunchHostFunc(x->s, gate_fn, &g));
    if (fails)
        return fails;
    fails += nt_expect(tcomms_all_reduce(x->comm, x->in, x->out, x->n, TCOMMS_FLOAT32, TCOMMS_SUM, o, &w),
                       TCOMMS_SUCCESS, x->rank, "async all_reduce behind a self-opening gate");
    if (fails)
        return fails;
    fails += nt_expect(tcomms_work_synchronize(w, 0), TCOMMS_SUCCESS, x->rank, "tcomms_work_synchronize");
    if (!__atomic_load_n(&g.passed, __ATOMIC_SEQ_CST))
        fails += mrank_failf("FAIL rank %d: tcomms_work_synchronize returned before the stream passed the gate",
                             x->rank);
    fails += nt_expect(tcomms_work_test(w), TCOMMS_SUCCESS, x->rank, "tcomms_work_test after synchronize");
    fails += gpu_expect_f32(x->out, x->n, nt_sum_value, &x->v, "all_reduce after tcomms_work_synchronize");
    tcomms_work_free(w);
    return fails;
}

static int stream_setup(stream_ctx_t *x, int rank, int size)
{
    memset(x, 0, sizeof *x);
    x->rank = rank;
    x->n = 1u << 16;
    x->v = (nt_vals_t){rank, size, 0};
    if (gpu_bind(rank % gpu_count) || nt_create(&x->comm, "nccl", -1, NULL, NULL))
        return 1;
    return CU(cudaStreamCreateWithFlags(&x->s, cudaStreamNonBlocking)) || gpu_alloc_f32(&x->in, x->n) ||
           gpu_alloc_f32(&x->out, x->n) || CU(cudaMallocHost((void **)&x->host, x->n * sizeof(float)));
}

static int stream_teardown(stream_ctx_t *x)
{
    int fails = 0;
    if (x->s)
        fails += CU(cudaStreamSynchronize(x->s)) + CU(cudaStreamDestroy(x->s));
    CU(cudaFree(x->in));
    CU(cudaFree(x->out));
    if (x->host)
        CU(cudaFreeHost(x->host));
    return fails + nt_destroy(x->comm, x->rank);
}

int nt_stream_semantics(int rank, int size, void *arg)
{
    (void)arg;
    stream_ctx_t x;
    int fails = stream_setup(&x, rank, size);
    tcomms_op_opts_t o = {TCOMMS_OP_OPT_STREAM, 0, NULL, TCOMMS_DEVICE_CUDA};
    o.stream = x.s;
    if (!fails)
        fails += async_wait_case(&x, &o);
    if (!fails)
        fails += blocking_case(&x, &o);
    if (!fails)
        fails += synchronize_case(&x, &o);
    return fails + stream_teardown(&x);
}

/* ---- CUDA graphs ---------------------------------------------------------------------------------------------- */

/* Capture an all_reduce on the caller's stream (blocking form, or posted with a handle and waited inside the
 * capture), then replay it 3 times with new inputs. */
static int graph_case(stream_ctx_t *x, int with_work)
{
    const char *what = with_work ? "captured async all_reduce + work_wait" : "captured blocking all_reduce";
    tcomms_op_opts_t o = {TCOMMS_OP_OPT_STREAM, 0, x->s, TCOMMS_DEVICE_CUDA};
    tcomms_work_t *w = NULL;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    if (CU(cudaStreamBeginCapture(x->s, cudaStreamCaptureModeThreadLocal)))
        return 1;
    tcomms_status_t st = tcomms_all_reduce(x->comm, x->in, x->out, x->n, TCOMMS_FLOAT32, TCOMMS_SUM, &o,
                                           with_work ? &w : NULL);
    if (st == TCOMMS_SUCCESS && w)
        st = tcomms_work_wait(w, 0);
    int fails = nt_expect(st, TCOMMS_SUCCESS, x->rank, what);
    fails += CU(cudaStreamEndCapture(x->s, &graph));
    tcomms_work_free(w);
    if (!fails)
        fails += CU(cudaGraphInstantiateWithFlags(&exec, graph, 0));
    for (int rep = 0; !fails && rep < 3; rep++) {
        fails += stream_reset(x, 10 + rep + 3 * with_work);
        fails += CU(cudaGraphLaunch(exec, x->s));
        fails += stream_expect(x, what);
    }
    if (exec)
        CU(cudaGraphExecDestroy(exec));
    if (graph)
        CU(cudaGraphDestroy(graph));
    return fails;
}

int nt_graph_capture(int rank, int size, void *arg)
{
    (void)arg;
    stream_ctx_t x;
    int fails = stream_setup(&x, rank, size);
    if (!fails)
        fails += graph_case(&x, 0);
    if (!fails)
        fails += graph_case(&x, 1);
    return fails + stream_teardown(&x);
}

/* ---- a peer that never joins ---------------------------------------------------------------------------------- */

#define SHORT_TIMEOUT_MS 2000u

static int is_error(tcomms_status_t st)
{
    return st == TCOMMS_ERR_TIMEOUT || st == TCOMMS_ERR_ABORTED || st == TCOMMS_ERR_REMOTE;
}

/* A peer never posts. The others post an async collective with a 2 s timeout: synchronize must fail within 4 s,
 * the work must end in an error, and the next operation must be ABORTED; destroy must return. The collective is an
 * all_reduce (NCCL's kernels poll the abort flag) skipped by rank 1, which stays and leaves once the others are
 * done; or with `ce` an all_gather between windows on a nccl.cta_policy=zero communicator, which NCCL 2.28 runs on
 * the copy engines, after one that every rank joins (NCCL sets its copy engines up at the first, collectively),
 * and rank size-1 dies in between. The survivors' streams then wait on the lost peer's flags in memory (stream
 * memory operations), which no abort reaches: NCCL's abort does not return, and the error must come anyway, within
 * 5 s (the watchdog waits 1 s for the abort). */
static int peer_timeout(int rank, int size, volatile int *done, int ce)
{
    const char *what = ce ? "an all_gather on the copy engines" : "an all_reduce";
    tcomms_comm_t *c = NULL;
    tcomms_mem_reg_t *reg = NULL;
    float *d = NULL;
    size_t count = ce ? (size_t)2 << 20 : 1024; /* copy-engine thresholds: 8 MiB blocks, as nccl_ce.c */
    if (ce ? nt_ce_comm(rank, &c) || nt_window(c, rank, (size_t)size * count * sizeof(float), &d, &reg)
           : gpu_bind(rank % gpu_count) || nt_create(&c, "nccl", -1, NULL, NULL) || gpu_alloc_f32(&d, count))
        return 1;
    int fails = 0, lost = ce ? size - 1 : 1;
    if (ce) {
        fails += nt_expect(tcomms_all_gather(c, d + (size_t)rank * count, d, count, TCOMMS_FLOAT32, NULL, NULL),
                           TCOMMS_SUCCESS, rank, "an all_gather on the copy engines, every rank in") +
                 CU(cudaStreamSynchronize(0));
        if (rank == lost) /* run with mrank_run_ex, this rank expected killed */
            raise(SIGKILL);
    }
    if (rank != lost && !fails) {
        tcomms_op_opts_t o = {TCOMMS_OP_OPT_TIMEOUT, SHORT_TIMEOUT_MS, NULL, TCOMMS_DEVICE_CUDA};
        tcomms_work_t *w = NULL;
        double t0 = mrank_now();
        tcomms_status_t st = ce ? tcomms_all_gather(c, d + (size_t)rank * count, d, count, TCOMMS_FLOAT32, &o, &w)
                                : tcomms_all_reduce(c, d, d, count, TCOMMS_FLOAT32, TCOMMS_SUM, &o, &w);
        fails += nt_expect(st, TCOMMS_SUCCESS, rank, ce ? "posting the all_gather the lost rank misses"
                                                        : "posting the all_reduce rank 1 skips");
        st = w ? tcomms_work_synchronize(w, 0) : TCOMMS_ERR_INVALID_ARG;
        /* the copy engines: NCCL's abort does not return; the watchdog waits 1 s for it */
        double took = mrank_now() - t0, bound = SHORT_TIMEOUT_MS / 1000.0 + (ce ? 3.0 : 2.0);
        if (w && !is_error(st))
            fails += mrank_failf("FAIL rank %d: synchronize of %s a peer skipped returned %s", rank, what,
                                 tcomms_strerror(st));
        if (w && took > bound)
            fails += mrank_failf("FAIL rank %d: the error came after %.2f s, bound %.1f s", rank, took, bound);
        /* The watchdog aborts the communicator: wait for the work to end, up to the same bound. */
        while (w && tcomms_work_test(w) == TCOMMS_IN_PROGRESS && mrank_now() < t0 + bound + 1.0)
            mrank_sleep_ms(10);
        if (w && !is_error(st = tcomms_work_test(w)))
            fails += mrank_failf("FAIL rank %d: tcomms_work_test after the timeout returned %s", rank,
                                 tcomms_strerror(st));
        tcomms_work_free(w);
        /* By timeout + 2 s the watchdog must have aborted the communicator, whatever the work reported first. */
        while (mrank_now() < t0 + bound)
            mrank_sleep_ms(10);
        fails += nt_expect(tcomms_all_reduce(c, d, d, 1024, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL),
                           TCOMMS_ERR_ABORTED, rank, "an all_reduce after the timeout");
        mrank_logf("test_nccl %speer_timeout rank %d: error %s after %.2f s (op timeout %.1f s)", ce ? "ce_" : "",
                   rank, tcomms_strerror(st), took, SHORT_TIMEOUT_MS / 1000.0);
    }
    if (!ce && mrank_host_barrier(done, size, 1, 60) != 0)
        fails += mrank_failf("FAIL rank %d: the other ranks did not finish the timeout case", rank);
    double t1 = mrank_now();
    /* Freeing waits for the device: not while work the watchdog failed to abort may be stuck. On the copy
     * engines it is stuck for good: the window stays. */
    if (!fails && !ce)
        fails += CU(cudaFree(d));
    tcomms_status_t st = tcomms_comm_destroy(c);
    if (st != TCOMMS_SUCCESS && rank == lost)
        fails += nt_expect(st, TCOMMS_SUCCESS, rank, "destroy on the rank that skipped");
    double freed = mrank_now() - t1;
    mrank_logf("test_nccl %speer_timeout rank %d: destroy returned %s after %.2f s", ce ? "ce_" : "", rank,
               tcomms_strerror(st), freed);
    if (freed > 10.0) /* the wait for a stuck abort is 5 s */
        fails += mrank_failf("FAIL rank %d: destroy took %.2f s", rank, freed);
    (void)reg;
    return fails;
}

int nt_peer_timeout(int rank, int size, void *arg)
{
    return peer_timeout(rank, size, arg, 0);
}

int nt_ce_peer_timeout(int rank, int size, void *arg)
{
    int version = gpu_nccl_version();
    if (version >= 0 && version < 22800) {
        if (rank == 0)
            mrank_logf("SKIP test_nccl ce_peer_timeout: NCCL %d has no copy-engine collectives (2.28)", version);
        return 0;
    }
    return peer_timeout(rank, size, arg, 1);
}
