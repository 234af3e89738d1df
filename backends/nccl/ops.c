/* SPDX-License-Identifier: BSD-3-Clause */
/* Posting operations: every tcomms operation mapped to NCCL calls (native collectives where NCCL has them, since
 * 2.28 also all_to_all, gather and scatter, which NCCL can run on the copy engines; grouped ncclSend/ncclRecv or
 * ncclReduce per block where it has not), and the stream choreography of docs/nccl.md: a blocking call runs on the
 * caller's stream; a call returning a handle runs on the internal stream after an event wait on the caller's. */
#include <string.h>

#include "tcn.h"

const char *tcn_coll_name(tcomms_coll_type_t type)
{
    const tcomms_coll_info_t *info = tcn_core != NULL ? tcn_core->coll_info(type) : NULL;
    return info != NULL ? info->name : "operation";
}

static const ncclDataType_t nccl_dtype[TCOMMS_DTYPE_COUNT] = {
    [TCOMMS_INT8] = ncclInt8,         [TCOMMS_UINT8] = ncclUint8,       [TCOMMS_INT32] = ncclInt32,
    [TCOMMS_INT64] = ncclInt64,       [TCOMMS_FLOAT16] = ncclFloat16,   [TCOMMS_BFLOAT16] = ncclBfloat16,
    [TCOMMS_FLOAT32] = ncclFloat32,   [TCOMMS_FLOAT64] = ncclFloat64,
};

static const ncclRedOp_t nccl_op[TCOMMS_OP_COUNT] = {
    [TCOMMS_SUM] = ncclSum, [TCOMMS_PROD] = ncclProd, [TCOMMS_MIN] = ncclMin, [TCOMMS_MAX] = ncclMax,
    [TCOMMS_AVG] = ncclAvg,
};

/* What one launch needs: the communicator and the NCCL communicator it runs on, the stream, element size and NCCL
 * type. */
typedef struct launch {
    tcn_comm_t *c;
    ncclComm_t nc;
    const tcomms_coll_args_t *a;
    cudaStream_t s;
    ncclDataType_t dt;
    size_t es;
    int captured;
} launch_t;

#define NCCL_TRY(L, call, what)                                                                                    \
    do {                                                                                                           \
        ncclResult_t r_ = (call);                                                                                  \
        if (r_ != ncclSuccess && r_ != ncclInProgress)                                                             \
            return tcn_nccl_error((L)->c, r_, what);                                                               \
    } while (0)

#define CUDA_TRY(L, call, what)                                                                                    \
    do {                                                                                                           \
        cudaError_t e_ = (call);                                                                                   \
        if (e_ != cudaSuccess)                                                                                     \
            return tcn_cuda_error(e_, what, (L)->c->name);                                                         \
    } while (0)

static char *at(const void *base, size_t elems, size_t es)
{
    return (char *)base + elems * es;
}

/* A device-to-device copy of `n` elements on the operation's stream (a rank's own block). */
static tcomms_status_t copy(const launch_t *L, void *dst, const void *src, size_t n)
{
    if (n == 0 || dst == src)
        return TCOMMS_SUCCESS;
    CUDA_TRY(L, cudaMemcpyAsync(dst, src, n * L->es, cudaMemcpyDeviceToDevice, L->s), "cudaMemcpyAsync");
    return TCOMMS_SUCCESS;
}

static tcomms_status_t p2p_send(const launch_t *L, const void *buf, size_t n, int peer)
{
    if (n)
        NCCL_TRY(L, ncclSend(buf, n, L->dt, peer, L->nc, L->s), "ncclSend");
    return TCOMMS_SUCCESS;
}

static tcomms_status_t p2p_recv(const launch_t *L, void *buf, size_t n, int peer)
{
    if (n)
        NCCL_TRY(L, ncclRecv(buf, n, L->dt, peer, L->nc, L->s), "ncclRecv");
    return TCOMMS_SUCCESS;
}

/* Rank r's block of recvcounts[r] elements at rdispls[r] goes to every rank. */
static tcomms_status_t all_gather_v(const launch_t *L)
{
    const tcomms_coll_args_t *a = L->a;
    int me = L->c->rank;
    tcomms_status_t st = a->in_place ? TCOMMS_SUCCESS
                                     : copy(L, at(a->recvbuf, a->rdispls[me], L->es), a->sendbuf, a->recvcounts[me]);
    for (int r = 0; r < L->c->size && st == TCOMMS_SUCCESS; r++) {
        if (r == me)
            continue;
        st = p2p_send(L, a->in_place ? at(a->recvbuf, a->rdispls[me], L->es) : a->sendbuf, a->recvcounts[me], r);
        if (st == TCOMMS_SUCCESS)
            st = p2p_recv(L, at(a->recvbuf, a->rdispls[r], L->es), a->recvcounts[r], r);
    }
    return st;
}

/* Equal blocks: NCCL's reduce_scatter. Otherwise one ncclReduce per block onto its owner. */
static tcomms_status_t reduce_scatter_v(const launch_t *L)
{
    const tcomms_coll_args_t *a = L->a;
    int n = L->c->size, me = L->c->rank, equal = 1;
    for (int r = 1; r < n; r++)
        equal &= a->recvcounts[r] == a->recvcounts[0];
    if (equal) {
        if (a->recvcounts[0])
            NCCL_TRY(L, ncclReduceScatter(a->sendbuf, a->recvbuf, a->recvcounts[0], L->dt, nccl_op[a->op],
                                          L->nc, L->s), "ncclReduceScatter");
        return TCOMMS_SUCCESS;
    }
    for (int r = 0; r < n; r++) {
        if (a->recvcounts[r] == 0)
            continue;
        const void *src = at(a->sendbuf, a->rdispls[r], L->es);
        /* NCCL writes recvbuff on the root only; elsewhere any valid pointer does */
        void *dst = r == me ? a->recvbuf : (void *)src;
        NCCL_TRY(L, ncclReduce(src, dst, a->recvcounts[r], L->dt, nccl_op[a->op], r, L->nc, L->s),
                 "ncclReduce");
    }
    return TCOMMS_SUCCESS;
}

/* In-place all_to_all copies the send side to scratch first, since block j is overwritten by peer j while it is
 * being sent to peer j: the communicator's reusable scratch (scratch.c), or inside a capture or an open group,
 * where uses cannot be ordered one after the other, a stream-ordered allocation freed after the launch. */
static tcomms_status_t stage(const launch_t *L, size_t bytes, void **scratch, const void **sbuf)
{
    void *p;
    if (L->captured || tcn_group_open()) {
        CUDA_TRY(L, cudaMallocAsync(scratch, bytes, L->s), "cudaMallocAsync (in-place all_to_all scratch)");
        p = *scratch;
    } else {
        /* the scratch is registered where the receive buffer is (scratch.c says why) on the first communicator,
         * where an in-place all_to_all runs (tcn_route): a window there is plain memory */
        int reg = tcn_mem_registered(L->c, L->a->recvbuf, bytes, L->c->nccl);
        tcomms_status_t st = tcn_scratch_take(L->c, bytes, reg, L->s, &p);
        if (st != TCOMMS_SUCCESS)
            return st;
    }
    CUDA_TRY(L, cudaMemcpyAsync(p, L->a->sendbuf, bytes, cudaMemcpyDeviceToDevice, L->s), "cudaMemcpyAsync");
    *sbuf = p;
    return TCOMMS_SUCCESS;
}

static tcomms_status_t all_to_all(const launch_t *L, void **scratch)
{
    const tcomms_coll_args_t *a = L->a;
    int n = L->c->size, me = L->c->rank, v = a->type == TCOMMS_COLL_ALL_TO_ALL_V;
    const void *sbuf = a->sendbuf;
    if (a->in_place && !v && n > 1 && a->count) {
        tcomms_status_t st = stage(L, (size_t)n * a->count * L->es, scratch, &sbuf);
        if (st != TCOMMS_SUCCESS)
            return st;
    }
    tcomms_status_t st = TCOMMS_SUCCESS;
    for (int r = 0; r < n && st == TCOMMS_SUCCESS; r++) {
        size_t sc = v ? a->sendcounts[r] : a->count, rc = v ? a->recvcounts[r] : a->count;
        const void *sp = at(sbuf, v ? a->sdispls[r] : (size_t)r * a->count, L->es);
        void *rp = at(a->recvbuf, v ? a->rdispls[r] : (size_t)r * a->count, L->es);
        if (r == me && (a->in_place || sc != rc)) {
            st = a->in_place ? TCOMMS_SUCCESS : copy(L, rp, sp, sc < rc ? sc : rc);
            continue;
        }
        /* the own block too goes through NCCL (a send/recv to itself), inside the same kernels as the peers'
         * blocks, rather than as a copy before them, which cost bandwidth at large sizes (docs/perf.md,
         * "Measurements behind the code") */
        st = p2p_send(L, sp, sc, r);
        if (st == TCOMMS_SUCCESS)
            st = p2p_recv(L, rp, rc, r);
    }
    return st;
}

static tcomms_status_t gather_scatter(const launch_t *L)
{
    const tcomms_coll_args_t *a = L->a;
    int n = L->c->size, me = L->c->rank, root = a->peer, gather = a->type == TCOMMS_COLL_GATHER;
    size_t cnt = a->count;
    if (me != root)
        return gather ? p2p_send(L, a->sendbuf, cnt, root) : p2p_recv(L, a->recvbuf, cnt, root);
    tcomms_status_t st = TCOMMS_SUCCESS;
    for (int r = 0; r < n && st == TCOMMS_SUCCESS; r++) {
        if (r == me)
            st = a->in_place ? TCOMMS_SUCCESS
                 : gather    ? copy(L, at(a->recvbuf, (size_t)me * cnt, L->es), a->sendbuf, cnt)
                             : copy(L, a->recvbuf, at(a->sendbuf, (size_t)me * cnt, L->es), cnt);
        else
            st = gather ? p2p_recv(L, at(a->recvbuf, (size_t)r * cnt, L->es), cnt, r)
                        : p2p_send(L, at(a->sendbuf, (size_t)r * cnt, L->es), cnt, r);
    }
    return st;
}

/* The communicator's scratch was used when nothing else was: free for the next user once this is done. */
static tcomms_status_t unstage(const launch_t *L, void *scratch, tcomms_status_t st)
{
    if (L->a->in_place && L->a->type == TCOMMS_COLL_ALL_TO_ALL && scratch == NULL && L->c->scratch_ev != NULL) {
        tcomms_status_t gst = tcn_scratch_give(L->c, L->s);
        st = st == TCOMMS_SUCCESS ? gst : st;
    }
    return st;
}

#if TCN_HAS_A2A
/* NCCL 2.28's all_to_all, gather and scatter. NCCL's in-place forms of gather and scatter are tcomms' (the root's
 * block inside the other buffer); an in-place all_to_all sends from a staged copy. The buffer a rank does not use
 * may be NULL in tcomms; NCCL gets the communicator's own small buffer there, which it never touches and which is
 * in no window: NCCL's copy-engine path addresses the root's window by the caller's offset in its own, so a
 * stand-in inside a window would send the data to the wrong place (docs/nccl.md, "Memory"). */
static tcomms_status_t native_28(const launch_t *L, void **scratch)
{
    const tcomms_coll_args_t *a = L->a;
    const void *s = a->sendbuf ? a->sendbuf : L->c->one;
    void *r = a->recvbuf ? a->recvbuf : L->c->one;
    if (a->count == 0)
        return TCOMMS_SUCCESS;
    if (a->type == TCOMMS_COLL_GATHER) {
        NCCL_TRY(L, ncclGather(s, r, a->count, L->dt, a->peer, L->nc, L->s), "ncclGather");
        return TCOMMS_SUCCESS;
    }
    if (a->type == TCOMMS_COLL_SCATTER) {
        NCCL_TRY(L, ncclScatter(s, r, a->count, L->dt, a->peer, L->nc, L->s), "ncclScatter");
        return TCOMMS_SUCCESS;
    }
    if (a->in_place && L->c->size > 1) {
        tcomms_status_t st = stage(L, (size_t)L->c->size * a->count * L->es, scratch, &s);
        if (st != TCOMMS_SUCCESS)
            return st;
    }
    ncclResult_t res = ncclAlltoAll(s, r, a->count, L->dt, L->nc, L->s);
    tcomms_status_t st = res == ncclSuccess || res == ncclInProgress ? TCOMMS_SUCCESS
                                                                      : tcn_nccl_error(L->c, res, "ncclAlltoAll");
    return unstage(L, *scratch, st);
}
#endif

/* The operations made of several NCCL calls, launched as one NCCL group. */
static tcomms_status_t grouped(const launch_t *L, void **scratch)
{
    NCCL_TRY(L, ncclGroupStart(), "ncclGroupStart");
    tcomms_status_t st;
    switch (L->a->type) {
    case TCOMMS_COLL_ALL_GATHER_V: st = all_gather_v(L); break;
    case TCOMMS_COLL_REDUCE_SCATTER_V: st = reduce_scatter_v(L); break;
    case TCOMMS_COLL_ALL_TO_ALL:
    case TCOMMS_COLL_ALL_TO_ALL_V: st = all_to_all(L, scratch); break;
    default: st = gather_scatter(L); break;
    }
    ncclResult_t r = ncclGroupEnd(); /* always closed, even after an error inside */
    if (st == TCOMMS_SUCCESS && r != ncclSuccess && r != ncclInProgress)
        st = tcn_nccl_error(L->c, r, "ncclGroupEnd");
    return unstage(L, *scratch, st);
}

tcomms_status_t tcn_launch(tcn_comm_t *c, const tcomms_coll_args_t *a, cudaStream_t stream, int captured,
                           void **scratch)
{
    launch_t L = {c, tcn_route(c, a), a, stream, nccl_dtype[a->dtype], tcn_core->dtype_size(a->dtype), captured};
    ncclComm_t nc = L.nc;
    size_t n = a->count;
    switch (a->type) {
    case TCOMMS_COLL_ALL_REDUCE:
        if (n)
            NCCL_TRY(&L, ncclAllReduce(a->sendbuf, a->recvbuf, n, L.dt, nccl_op[a->op], nc, stream), "ncclAllReduce");
        return TCOMMS_SUCCESS;
    case TCOMMS_COLL_BROADCAST:
        if (n)
            NCCL_TRY(&L, ncclBroadcast(a->sendbuf, a->recvbuf, n, L.dt, a->peer, nc, stream), "ncclBroadcast");
        return TCOMMS_SUCCESS;
    case TCOMMS_COLL_REDUCE:
        if (n)
            NCCL_TRY(&L, ncclReduce(a->sendbuf, a->recvbuf, n, L.dt, nccl_op[a->op], a->peer, nc, stream),
                     "ncclReduce");
        return TCOMMS_SUCCESS;
    case TCOMMS_COLL_ALL_GATHER:
        if (n)
            NCCL_TRY(&L, ncclAllGather(a->sendbuf, a->recvbuf, n, L.dt, nc, stream), "ncclAllGather");
        return TCOMMS_SUCCESS;
    case TCOMMS_COLL_REDUCE_SCATTER:
        if (n)
            NCCL_TRY(&L, ncclReduceScatter(a->sendbuf, a->recvbuf, n, L.dt, nccl_op[a->op], nc, stream),
                     "ncclReduceScatter");
        return TCOMMS_SUCCESS;
    case TCOMMS_COLL_BARRIER:
        NCCL_TRY(&L, ncclAllReduce(c->one, c->one, 1, ncclInt32, ncclSum, nc, stream), "ncclAllReduce (barrier)");
        return TCOMMS_SUCCESS;
    case TCOMMS_COLL_SEND:
        return p2p_send(&L, a->sendbuf, n, a->peer);
    case TCOMMS_COLL_RECV:
        return p2p_recv(&L, a->recvbuf, n, a->peer);
    case TCOMMS_COLL_ALL_TO_ALL:
    case TCOMMS_COLL_GATHER:
    case TCOMMS_COLL_SCATTER:
#if TCN_HAS_A2A
        return native_28(&L, scratch);
#endif
    case TCOMMS_COLL_ALL_GATHER_V:
    case TCOMMS_COLL_REDUCE_SCATTER_V:
    case TCOMMS_COLL_ALL_TO_ALL_V:
        return grouped(&L, scratch);
    default:
        return tcn_core->error(TCOMMS_ERR_NOT_SUPPORTED, "nccl: operation type %d is not supported", (int)a->type);
    }
}

/* After a failed launch of an asynchronous operation the internal stream still waits on the caller's: record and
 * join back, so a capture in progress stays well-formed. */
static void rejoin(tcn_op_t *op)
{
    if (cudaEventRecord(op->done, op->run) == cudaSuccess)
        cudaStreamWaitEvent(op->caller, op->done, 0);
}

/* NCCL 2.28 may run all_gather, all_to_all, gather and scatter between windows on the copy engines, through
 * cudaMemcpyBatchAsync, which rejects the legacy default stream ('invalid argument', and the peers are left
 * waiting). A blocking call of these on that stream, on a communicator with windows, therefore detours through the
 * internal stream, ordered by events both ways like a call returning a handle. */
static int ce_detour(const tcn_comm_t *c, const tcomms_coll_args_t *a)
{
#if TCN_HAS_A2A
    cudaStream_t s = (cudaStream_t)a->stream;
    if ((s != NULL && s != cudaStreamLegacy) || atomic_load_explicit(&c->nwindows, memory_order_relaxed) == 0)
        return 0;
    return a->type == TCOMMS_COLL_ALL_GATHER || a->type == TCOMMS_COLL_ALL_TO_ALL ||
           a->type == TCOMMS_COLL_GATHER || a->type == TCOMMS_COLL_SCATTER;
#else
    (void)c;
    (void)a;
    return 0;
#endif
}

/* The small-message kernel serves calls outside CUDA graph captures and tcomms groups (small.c). */
static int goes_small(const tcn_comm_t *c, const tcomms_coll_args_t *a, int captured)
{
    return !captured && !tcn_group_open() && tcn_small_fits(c, a);
}

const char *tcn_algorithm(void *bcomm, const tcomms_coll_args_t *a)
{
    tcn_comm_t *c = bcomm;
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    int prev = tcn_device_enter(c);
    cudaError_t e = cudaStreamIsCapturing((cudaStream_t)a->stream, &cs);
    tcn_device_leave(prev);
    if (e != cudaSuccess)
        return NULL; /* post() reports it */
    return goes_small(c, a, cs == cudaStreamCaptureStatusActive) ? "small" : "nccl";
}

tcomms_status_t tcn_post(void *bcomm, const tcomms_coll_args_t *a, void **bwork)
{
    tcn_comm_t *c = bcomm;
    if (tcn_comm_broken(c)) /* since the core checked: a failure seen by the watchdog meanwhile */
        return tcn_comm_aborted(c, tcn_coll_name(a->type));
    int prev = tcn_device_enter(c);
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    cudaError_t e = cudaStreamIsCapturing((cudaStream_t)a->stream, &cs);
    if (e != cudaSuccess) {
        tcn_device_leave(prev);
        return tcn_cuda_error(e, "cudaStreamIsCapturing(opts.stream)", c->name);
    }
    int captured = cs == cudaStreamCaptureStatusActive;
    int small = goes_small(c, a, captured);
    tcn_op_t *op;
    tcomms_status_t st = tcn_op_get(c, !captured, &op); /* no event queries inside a capture */
    if (st != TCOMMS_SUCCESS) {
        tcn_device_leave(prev);
        return st;
    }
    op->type = a->type;
    op->timeout_ms = a->timeout_ms;
    op->caller = (cudaStream_t)a->stream;
    if (captured)
        op->flags |= TCN_OP_CAPTURED;
    if ((a->flags & TCOMMS_COLL_FLAG_BLOCKING) && !ce_detour(c, a)) {
        op->flags |= TCN_OP_BLOCKING;
        op->run = op->caller;
    } else {
        op->run = c->stream;
        if ((e = cudaEventRecord(op->start, op->caller)) != cudaSuccess ||
            (e = cudaStreamWaitEvent(op->run, op->start, 0)) != cudaSuccess) {
            st = tcn_cuda_error(e, "ordering the internal stream after opts.stream", c->name);
            goto fail;
        }
    }
    pthread_mutex_lock(&c->lock);
    if (c->nccl == NULL || tcn_comm_broken(c))
        st = tcn_comm_aborted(c, tcn_coll_name(a->type));
    else if (small)
        st = tcn_small_launch(c, a, op->run, op->done);
    else
        st = tcn_launch(c, a, op->run, captured, &op->scratch);
    if (st == TCOMMS_SUCCESS && c->nonblocking && !tcn_group_open()) {
        /* a non-blocking communicator may still be launching: NCCL wants it settled before its next call */
        ncclResult_t r = tcn_settle_comm(c, tc_now_ns() + (uint64_t)a->timeout_ms * 1000000ull);
        if (r != ncclSuccess)
            st = tcn_nccl_error(c, r, tcn_coll_name(a->type));
    }
    pthread_mutex_unlock(&c->lock);
    if (st != TCOMMS_SUCCESS) {
        if (op->scratch)
            cudaFreeAsync(op->scratch, op->run);
        if (!(op->flags & TCN_OP_BLOCKING))
            rejoin(op);
        tcn_fail_launch(c, st, tcn_coll_name(a->type));
        goto fail;
    }
    if (tcn_group_open())
        tcn_group_defer(op);
    else
        tcn_op_finish(op, TCOMMS_SUCCESS, NULL);
    tcn_device_leave(prev);
    *bwork = op;
    return TCOMMS_SUCCESS;
fail:
    tcn_work_free(op);
    tcn_device_leave(prev);
    return st;
}
