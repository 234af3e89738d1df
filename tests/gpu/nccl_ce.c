/* SPDX-License-Identifier: BSD-3-Clause */
/* test_nccl's copy-engine case: all_to_all, all_gather, gather and scatter between symmetric windows on a
 * communicator that asks for nccl.cta_policy=zero. From NCCL 2.28 the module calls ncclAlltoAll, ncclGather and
 * ncclScatter, and NCCL may run these and ncclAllGather on the copy engines instead of SM kernels (what lib/fsdp's
 * all-gather communicators rely on). Blocking calls on the legacy default stream, which NCCL's copy-engine path
 * cannot use (ops.c, ce_detour), then an all_to_all captured in a CUDA graph and replayed, each checked element by
 * element against values made from (sender, receiver, offset). Blocks of 8 MiB, so NCCL's size thresholds for
 * copy-engine collectives are passed. */
#include <cuda_runtime_api.h>

#include "../mrank.h"
#include "gpu_util.h"
#include "nccl_cases.h"

/* A buffer of blocks of `count` elements: block j of rank `rank` holds what sender s sends to receiver d, with
 * (s, d) = (rank, j) on the send side and (j, rank) on the receive side; `one` marks a single block (s, d) =
 * (rank, peer) or (peer, rank). */
typedef struct ce_vals {
    int rank, peer, size, received, one;
    size_t count;
} ce_vals_t;

static double ce_value(size_t i, const void *arg)
{
    const ce_vals_t *v = arg;
    size_t j = v->one ? (size_t)v->peer : i / v->count, off = i % v->count;
    size_t s = v->received ? j : (size_t)v->rank, d = v->received ? (size_t)v->rank : j;
    return (double)((s * (size_t)v->size + d + 1) * 4096 + off % 4093); /* < 2^24: exact in float */
}

/* all_gather: block j of the result is rank j's block. */
static double ag_value(size_t i, const void *arg)
{
    const ce_vals_t *v = arg;
    size_t j = v->received ? i / v->count : (size_t)v->rank;
    return (double)((j + 1) * 4096 + i % v->count % 4093);
}

/* What a receive buffer holds before the operation: no value ce_value or ag_value gives. */
static double poison(size_t i, const void *arg)
{
    (void)arg;
    return -1.0 - (double)(i % 7);
}

int nt_window(tcomms_comm_t *c, int rank, size_t bytes, float **buf, tcomms_mem_reg_t **reg)
{
    if (nt_expect(tcomms_mem_alloc(c, TCOMMS_DEVICE_CUDA, bytes, (void **)buf), TCOMMS_SUCCESS, rank,
                  "tcomms_mem_alloc(cuda)"))
        return 1;
    return nt_expect(tcomms_mem_register(c, TCOMMS_DEVICE_CUDA, *buf, bytes, TCOMMS_MEM_REG_WINDOW, reg),
                     TCOMMS_SUCCESS, rank, "window registration");
}

int nt_window_release(tcomms_comm_t *c, int rank, float *buf, tcomms_mem_reg_t *reg)
{
    int fails = reg ? nt_expect(tcomms_mem_deregister(reg), TCOMMS_SUCCESS, rank, "tcomms_mem_deregister") : 0;
    return fails + (buf ? nt_expect(tcomms_mem_free(c, TCOMMS_DEVICE_CUDA, buf), TCOMMS_SUCCESS, rank,
                                    "tcomms_mem_free")
                        : 0);
}

static int exchange(tcomms_comm_t *c, int rank, int size, float *s, float *r, size_t blk)
{
    size_t n = (size_t)size * blk;
    ce_vals_t sent = {rank, 0, size, 0, 0, blk}, got = sent;
    got.received = 1;
    int fails = gpu_fill_f32(s, n, ce_value, &sent) + gpu_fill_f32(r, n, poison, NULL);
    fails += nt_expect(tcomms_all_to_all(c, s, r, blk, TCOMMS_FLOAT32, NULL, NULL), TCOMMS_SUCCESS, rank,
                       "all_to_all between windows");
    fails += CU(cudaStreamSynchronize(0));
    fails += gpu_expect_f32(r, n, ce_value, &got, "all_to_all between windows");

    fails += gpu_fill_f32(s, blk, ag_value, &sent) + gpu_fill_f32(r, n, poison, NULL);
    fails += nt_expect(tcomms_all_gather(c, s, r, blk, TCOMMS_FLOAT32, NULL, NULL), TCOMMS_SUCCESS, rank,
                       "all_gather between windows");
    fails += CU(cudaStreamSynchronize(0));
    fails += gpu_expect_f32(r, n, ag_value, &got, "all_gather between windows");

    int root = size - 1; /* gather: every rank's block to the last rank */
    ce_vals_t mine = {rank, root, size, 0, 1, blk}, gathered = {rank, 0, size, 1, 0, blk};
    fails += gpu_fill_f32(s, blk, ce_value, &mine) + gpu_fill_f32(r, n, poison, NULL);
    /* every rank passes its window, used or not: NCCL's copy engines address the root's by the caller's offset */
    fails += nt_expect(tcomms_gather(c, s, r, blk, TCOMMS_FLOAT32, root, NULL, NULL),
                       TCOMMS_SUCCESS, rank, "gather into a window");
    fails += CU(cudaStreamSynchronize(0));
    if (rank == root)
        fails += gpu_expect_f32(r, n, ce_value, &gathered, "gather into a window");

    root = 0; /* scatter: rank 0's block j to rank j */
    ce_vals_t spread = {rank, 0, size, 0, 0, blk}, mine_in = {rank, root, size, 1, 1, blk};
    fails += gpu_fill_f32(s, n, ce_value, &spread) + gpu_fill_f32(r, blk, poison, NULL);
    fails += nt_expect(tcomms_scatter(c, s, r, blk, TCOMMS_FLOAT32, root, NULL, NULL),
                       TCOMMS_SUCCESS, rank, "scatter from a window");
    fails += CU(cudaStreamSynchronize(0));
    return fails + gpu_expect_f32(r, blk, ce_value, &mine_in, "scatter from a window");
}

/* The same all_to_all captured on a stream of the caller's into a CUDA graph, then replayed twice. */
static int captured(tcomms_comm_t *c, int rank, int size, float *s, float *r, size_t blk)
{
    const char *what = "captured all_to_all between windows";
    size_t n = (size_t)size * blk;
    ce_vals_t sent = {rank, 0, size, 0, 0, blk}, got = sent;
    got.received = 1;
    cudaStream_t st = NULL;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    if (CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking)))
        return 1;
    tcomms_op_opts_t o = {TCOMMS_OP_OPT_STREAM, 0, st, TCOMMS_DEVICE_CUDA};
    int fails = CU(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    if (!fails) {
        fails += nt_expect(tcomms_all_to_all(c, s, r, blk, TCOMMS_FLOAT32, &o, NULL), TCOMMS_SUCCESS, rank, what);
        fails += CU(cudaStreamEndCapture(st, &graph));
    }
    if (!fails)
        fails += CU(cudaGraphInstantiateWithFlags(&exec, graph, 0));
    for (int rep = 0; !fails && rep < 2; rep++) {
        fails += gpu_fill_f32(s, n, ce_value, &sent) + gpu_fill_f32(r, n, poison, NULL);
        fails += CU(cudaGraphLaunch(exec, st)) + CU(cudaStreamSynchronize(st));
        fails += gpu_expect_f32(r, n, ce_value, &got, what);
    }
    if (exec)
        CU(cudaGraphExecDestroy(exec));
    if (graph)
        CU(cudaGraphDestroy(graph));
    return fails + CU(cudaStreamDestroy(st));
}

int nt_ce_comm(int rank, tcomms_comm_t **out)
{
    tcomms_hints_t *h = NULL;
    int fails = nt_expect(tcomms_hints_create(&h), TCOMMS_SUCCESS, rank, "tcomms_hints_create") ||
                nt_expect(tcomms_hints_set(h, "nccl.cta_policy", "zero"), TCOMMS_SUCCESS, rank,
                          "nccl.cta_policy=zero") ||
                gpu_bind(rank % gpu_count) || nt_create(out, "nccl", -1, h, NULL);
    tcomms_hints_free(h);
    return fails;
}

int nt_copy_engine(int rank, int size, void *arg)
{
    (void)arg;
    int version = gpu_nccl_version();
    if (version >= 0 && version < 22800) {
        if (rank == 0)
            mrank_logf("SKIP test_nccl copy_engine: NCCL %d has no ncclAlltoAll (2.28)", version);
        return 0;
    }
    tcomms_comm_t *c = NULL;
    if (nt_ce_comm(rank, &c))
        return 1;
    const size_t blk = (size_t)2 << 20; /* floats: 8 MiB a block */
    size_t bytes = (size_t)size * blk * sizeof(float);
    float *s = NULL, *r = NULL;
    tcomms_mem_reg_t *sreg = NULL, *rreg = NULL;
    int fails = nt_window(c, rank, bytes, &s, &sreg);
    fails += fails ? 0 : nt_window(c, rank, bytes, &r, &rreg);
    if (!fails)
        fails += exchange(c, rank, size, s, r, blk);
    if (!fails)
        fails += captured(c, rank, size, s, r, blk);
    fails += nt_window_release(c, rank, r, rreg) + nt_window_release(c, rank, s, sreg);
    return fails + nt_destroy(c, rank);
}
