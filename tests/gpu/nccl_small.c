/* SPDX-License-Identifier: BSD-3-Clause */
/* test_nccl's rank function for the small-message path (backends/nccl/small.c): it is on where every pair of the
 * job's GPUs has peer access (the hint query says its size; by default 524288 on 2 ranks, 262144 on 3-4), off
 * where a split's hint says 0; all_reduce, all_gather, reduce_scatter and all_to_all give coll_ref's results on
 * both sides of its limit (one thread block, several, exactly the limit, one element more: NCCL), in place too; and
 * calls alternating between two streams and the internal one stay in order (each reads the previous round's
 * output). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../coll_ref.h"
#include "gpu_util.h"
#include "nccl_cases.h"

#define LIMIT 4096 /* nccl.small_bytes of the tested communicator: 4 KiB, so a few blocks and the edge are cheap */

enum { AR, AG, RS, A2A };
static const char *const names[] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"};

/* Elements sent and received by rank `rank` for a call of `type` with block `n`. */
static size_t send_len(int type, size_t n, int size)
{
    return type == RS || type == A2A ? n * (size_t)size : n;
}

static size_t recv_len(int type, size_t n, int size)
{
    return type == AG || type == A2A ? n * (size_t)size : n;
}

/* coll_ref's input at (rank, i), and what element i of rank `rank`'s output must be. */
static double input(int type, tcomms_dtype_t dt, int rank, size_t i)
{
    return type == AR || type == RS ? ref_red_value(dt, rank, i) : ref_mov_value(rank, i);
}

static double expected(int type, tcomms_dtype_t dt, tcomms_op_t op, int rank, int size, size_t n, size_t i)
{
    switch (type) {
    case AR: return ref_reduce(dt, op, size, i);
    case RS: return ref_reduce(dt, op, size, (size_t)rank * n + i);
    case AG: return ref_mov_value((int)(i / n), i % n);
    default: return ref_mov_value((int)(i / n), (size_t)rank * n + i % n); /* block `rank` of sender i / n */
    }
}

static tcomms_status_t post(tcomms_comm_t *c, int type, const void *in, void *out, size_t n, tcomms_dtype_t dt,
                            tcomms_op_t op, const tcomms_op_opts_t *o, tcomms_work_t **w)
{
    switch (type) {
    case AR: return tcomms_all_reduce(c, in, out, n, dt, op, o, w);
    case AG: return tcomms_all_gather(c, in, out, n, dt, o, w);
    case RS: return tcomms_reduce_scatter(c, in, out, n, dt, op, o, w);
    default: return tcomms_all_to_all(c, in, out, n, dt, o, w);
    }
}

/* One blocking call checked against coll_ref; in place where `inplace` (NCCL's aliasing). */
static int one_case(tcomms_comm_t *c, int rank, int size, int type, tcomms_dtype_t dt, tcomms_op_t op, size_t n,
                    int inplace)
{
    size_t es = ref_esize(dt), sl = send_len(type, n, size), rl = recv_len(type, n, size);
    size_t total = sl > rl ? sl : rl;
    unsigned char *host = malloc(total * es);
    void *dev = NULL, *out = NULL;
    int fails = host == NULL || CU(cudaMalloc(&dev, total * es)) || CU(cudaMalloc(&out, rl * es));
    if (fails)
        goto done;
    /* in place: all_gather sends from its own block of the output, reduce_scatter receives into its own block */
    size_t in_off = inplace && type == AG ? (size_t)rank * n : 0, out_off = inplace && type == RS ? rank * n : 0;
    for (size_t i = 0; i < total; i++)
        ref_store(dt, host, i, 0);
    for (size_t i = 0; i < sl; i++)
        ref_store(dt, host, in_off + i, input(type, dt, rank, i));
    fails = CU(cudaMemcpy(dev, host, total * es, cudaMemcpyHostToDevice));
    void *in = (char *)dev + in_off * es, *res = inplace ? (char *)dev + out_off * es : out;
    if (!fails)
        fails = nt_expect(post(c, type, in, inplace ? (type == RS ? res : dev) : out, n, dt, op, NULL, NULL),
                          TCOMMS_SUCCESS, rank, names[type]);
    if (!fails)
        fails = CU(cudaMemcpy(host, res, rl * es, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (size_t i = 0; !fails && i < rl; i++) {
        double got = ref_load(dt, host, i), want = expected(type, dt, op, rank, size, n, i);
        if (got != want && bad++ < 3)
            mrank_logf("FAIL rank %d: %s %s %s n=%zu%s: element %zu = %g, expected %g", rank, names[type],
                       ref_dtype_name(dt), ref_op_name(op), n, inplace ? " in place" : "", i, got, want);
    }
    fails += bad > 0;
done:
    cudaFree(dev);
    cudaFree(out);
    free(host);
    return fails;
}

static int hint_is(tcomms_comm_t *c, int rank, const char *want)
{
    char buf[32] = "";
    if (nt_expect(tcomms_comm_hint(c, TCOMMS_DEVICE_CUDA, "nccl.small_bytes", buf, sizeof buf), TCOMMS_SUCCESS, rank,
                  "tcomms_comm_hint(nccl.small_bytes)"))
        return 1;
    if (strcmp(buf, want) == 0)
        return 0;
    return mrank_failf("FAIL rank %d: nccl.small_bytes reads %s, expected %s", rank, buf, want);
}

/* Three rounds a step: blocking on s1, with a handle on the internal stream after s1, blocking on s2 after
 * waiting for it; each input is the previous output, so a call that overtook the one before reads stale data. */
static int streams_case(tcomms_comm_t *c, int rank, int size)
{
    enum { N = 300, STEPS = 20 };
    float *buf = NULL, host[N];
    cudaStream_t s1 = NULL, s2 = NULL;
    cudaEvent_t ev = NULL;
    int fails = CU(cudaMalloc((void **)&buf, sizeof host)) || CU(cudaStreamCreate(&s1)) || CU(cudaStreamCreate(&s2)) ||
                CU(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    for (int i = 0; i < N; i++)
        host[i] = 1.0f;
    if (!fails)
        fails = CU(cudaMemcpy(buf, host, sizeof host, cudaMemcpyHostToDevice));
    tcomms_op_opts_t o1 = {TCOMMS_OP_OPT_STREAM, 0, s1, TCOMMS_DEVICE_CUDA}, o2 = o1;
    o2.stream = s2;
    for (int step = 0; step < STEPS && !fails; step++) {
        tcomms_work_t *w = NULL;
        fails += nt_expect(tcomms_all_reduce(c, buf, buf, N, TCOMMS_FLOAT32, TCOMMS_MAX, &o1, NULL), TCOMMS_SUCCESS,
                           rank, "all_reduce on s1");
        fails += nt_expect(tcomms_all_reduce(c, buf, buf, N, TCOMMS_FLOAT32, TCOMMS_SUM, &o1, &w), TCOMMS_SUCCESS,
                           rank, "all_reduce with a handle");
        fails += w ? nt_expect(tcomms_work_wait(w, 0), TCOMMS_SUCCESS, rank, "tcomms_work_wait") : 0;
        tcomms_work_free(w);
        fails += CU(cudaEventRecord(ev, s1)) || CU(cudaStreamWaitEvent(s2, ev, 0));
        fails += nt_expect(tcomms_all_reduce(c, buf, buf, N, TCOMMS_FLOAT32, TCOMMS_MIN, &o2, NULL), TCOMMS_SUCCESS,
                           rank, "all_reduce on s2");
        fails += CU(cudaEventRecord(ev, s2)) || CU(cudaStreamWaitEvent(s1, ev, 0));
    }
    if (!fails)
        fails = CU(cudaStreamSynchronize(s1)) || CU(cudaMemcpy(host, buf, sizeof host, cudaMemcpyDeviceToHost));
    double want = 1;
    for (int step = 0; step < STEPS; step++)
        want *= size; /* max keeps it, the sum multiplies it by size, min keeps it */
    for (int i = 0; i < N && !fails; i++)
        if ((double)host[i] != want)
            fails = mrank_failf("FAIL rank %d: streams: element %d = %g, expected %g", rank, i, (double)host[i], want);
    cudaFree(buf);
    if (s1)
        cudaStreamDestroy(s1);
    if (s2)
        cudaStreamDestroy(s2);
    if (ev)
        cudaEventDestroy(ev);
    return fails;
}

/* Do all GPUs of the job reach each other? Then the path must be on. */
static int all_peers(int size)
{
    for (int a = 0; a < size; a++)
        for (int b = 0; b < size; b++) {
            int ok = 0;
            if (a % gpu_count != b % gpu_count &&
                (cudaDeviceCanAccessPeer(&ok, a % gpu_count, b % gpu_count) != cudaSuccess || !ok))
                return 0;
        }
    return 1;
}

int nt_small_path(int rank, int size, void *arg)
{
    (void)arg;
    tcomms_comm_t *c = NULL, *off = NULL;
    tcomms_hints_t *h = NULL, *h0 = NULL;
    int fails = nt_expect(tcomms_hints_create(&h), TCOMMS_SUCCESS, rank, "hints") ||
                nt_expect(tcomms_hints_create(&h0), TCOMMS_SUCCESS, rank, "hints") ||
                nt_expect(tcomms_hints_set(h, "nccl.small_bytes", "4096"), TCOMMS_SUCCESS, rank, "hints_set") ||
                nt_expect(tcomms_hints_set(h0, "nccl.smallBytes", "0"), TCOMMS_SUCCESS, rank, "hints_set") ||
                nt_on_gpu(rank, NT_OP_TIMEOUT_MS, h, &c) ||
                nt_expect(tcomms_comm_split_color(c, 0, rank, "small-off", h0, &off), TCOMMS_SUCCESS, rank, "split");
    if (!fails && !all_peers(size)) {
        printf("test_nccl: SKIP small-message path on %d ranks: some GPUs of the job have no peer access\n", size);
        goto done;
    }
    fails = fails || hint_is(c, rank, "4096") || hint_is(off, rank, "0");
    if (!fails && getenv("TCOMMS_NCCL_SMALL_BYTES") == NULL) { /* the default: on up to 4 ranks, off above */
        tcomms_comm_t *d = NULL;
        fails = nt_expect(tcomms_comm_split_color(c, 0, rank, "small-default", NULL, &d), TCOMMS_SUCCESS, rank,
                          "split") || hint_is(d, rank, size == 2 ? "524288" : size <= 4 ? "262144" : "0");
        fails += nt_destroy(d, rank);
    }
    static const tcomms_dtype_t dts[] = {TCOMMS_FLOAT32, TCOMMS_BFLOAT16, TCOMMS_INT32, TCOMMS_UINT8, TCOMMS_FLOAT64};
    for (int type = AR; type <= A2A && !fails; type++)
        for (size_t d = 0; d < sizeof dts / sizeof dts[0] && !fails; d++) {
            size_t es = ref_esize(dts[d]);
            const size_t ns[] = {13, 1000 / es, 3 * 1024 / es + 5, LIMIT / es, LIMIT / es + 1};
            for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
                for (int inplace = 0; inplace < 2; inplace++) {
                    fails += one_case(c, rank, size, type, dts[d], TCOMMS_SUM, ns[k], inplace);
                    if (k == 0 && !inplace) /* the same through NCCL, which the path must agree with */
                        fails += one_case(off, rank, size, type, dts[d], TCOMMS_SUM, ns[k], 0);
                }
        }
    static const tcomms_op_t ops[] = {TCOMMS_PROD, TCOMMS_MIN, TCOMMS_MAX, TCOMMS_AVG};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0] && !fails; k++)
        for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
            if (ops[k] != TCOMMS_AVG || dts[d] == TCOMMS_FLOAT32 || dts[d] == TCOMMS_BFLOAT16)
                fails += one_case(c, rank, size, AR, dts[d], ops[k], 777 / ref_esize(dts[d]), 0) +
                         one_case(c, rank, size, RS, dts[d], ops[k], 301, 1);
    if (!fails)
        fails = streams_case(c, rank, size);
done:
    fails += nt_destroy(c, rank) + nt_destroy(off, rank);
    tcomms_hints_free(h);
    tcomms_hints_free(h0);
    return fails;
}
