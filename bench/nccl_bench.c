/* SPDX-License-Identifier: BSD-3-Clause */
/* nccl_bench: the raw-NCCL reference of bench/compare-nccl. It runs tcomms-perf's collectives through NCCL's own
 * calls (ncclAlltoAll, ncclGather, ncclScatter from NCCL 2.28 on; grouped ncclSend/ncclRecv, ncclBroadcast or
 * ncclReduce where NCCL has no such collective) on cudaMalloc'd buffers (NCCL's default path; -R 1|2: ncclMemAlloc'd
 * and registered, as nccl-tests' -R), one process per GPU forked from this one (-g N) over a unique id made before
 * the fork, and prints tcomms-perf's table and JSON with backend "nccl-raw". compare-nccl builds it with gcc against
 * CUDA and NCCL. */
#include <cuda_runtime.h>
#include <nccl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"
#include "run.h" /* run_bind_rank: tools/run/bind.c, built in by compare-nccl */

#define PROG "nccl_bench"

/* A failed CUDA or NCCL call ends this rank; the parent then ends the others, which would wait forever. */
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) die(#x, cudaGetErrorString(e_)); } while (0)
#define NK(x) do { ncclResult_t r_ = (x); if (r_ != ncclSuccess) die(#x, ncclGetErrorString(r_)); } while (0)

static int my_rank = -1;

static void die(const char *call, const char *why)
{
    fprintf(stderr, "%s: rank %d: %s: %s\n", PROG, my_rank, call, why);
    exit(1);
}

typedef struct nb {
    bench_ctx_t c;
    bench_layout_t l;
    ncclComm_t comm;
    cudaStream_t st;
    ncclDataType_t t;
    ncclRedOp_t op;
    size_t es;
    char *sbuf, *rbuf;   /* device */
    void *reg[2];        /* -R: their registrations (ncclCommRegister handles or windows) */
    unsigned char *host; /* staging for the fill and the check */
    void *scratch;       /* device: one double or int64 the ranks agree on */
    cudaEvent_t ev;      /* --event: recorded after every call */
} nb_t;

static const ncclDataType_t nccl_types[B_NDTYPES] = {
    [B_INT8] = ncclInt8, [B_UINT8] = ncclUint8, [B_INT32] = ncclInt32, [B_INT64] = ncclInt64,
    [B_HALF] = ncclFloat16, [B_BFLOAT16] = ncclBfloat16, [B_FLOAT] = ncclFloat32, [B_DOUBLE] = ncclFloat64};
static const ncclRedOp_t nccl_ops[B_NOPS] = {ncclSum, ncclProd, ncclMin, ncclMax, ncclAvg};

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* The send and receive data of form ip (0 out of place, 1 in place in the one buffer, as tcomms and NCCL define). */
static char *send_at(const nb_t *b, int ip)
{
    return ip ? b->rbuf + b->l.send_ip * b->es : b->c.coll->flags & B_ONE_BUFFER ? b->rbuf : b->sbuf;
}

static char *recv_at(const nb_t *b, int ip)
{
    return ip ? b->rbuf + b->l.recv_ip * b->es : b->rbuf;
}

/* Does the collective take more than one NCCL call (a group then makes them one launch)? */
static int several_calls(int coll)
{
    switch (coll) {
    case B_ALL_REDUCE: case B_ALL_GATHER: case B_REDUCE_SCATTER: case B_BROADCAST: case B_REDUCE: return 0;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
    case B_ALLTOALL: case B_GATHER: case B_SCATTER: return 0;
#endif
    default: return 1;
    }
}

/* Enqueue one operation on the stream: a single NCCL call bare, as a program calling NCCL would make it (an
 * enclosing group costs about 1.5 us of host time a call, docs/perf.md), unless --group asks for nccl-tests'
 * wrapping. */
static void run(nb_t *b, int ip)
{
    const bench_layout_t *l = &b->l;
    ncclComm_t w = b->comm;
    cudaStream_t st = b->st;
    ncclDataType_t t = b->t;
    int me = b->c.rank, n = b->c.nranks, root = b->c.o->root;
    size_t count = l->count, es = b->es;
    char *s = send_at(b, ip), *r = recv_at(b, ip);
    int coll = (int)(b->c.coll - bench_colls), group = b->c.o->group || several_calls(coll);
    if (group)
        NK(ncclGroupStart());
    switch (coll) {
    case B_ALL_REDUCE: NK(ncclAllReduce(s, r, count, t, b->op, w, st)); break;
    case B_ALL_GATHER: NK(ncclAllGather(s, r, count, t, w, st)); break;
    case B_REDUCE_SCATTER: NK(ncclReduceScatter(s, r, count, t, b->op, w, st)); break;
    case B_BROADCAST: NK(ncclBroadcast(r, r, count, t, root, w, st)); break; /* one buffer, as tcomms has it */
    case B_REDUCE: NK(ncclReduce(s, r, count, t, b->op, root, w, st)); break;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
    case B_ALLTOALL: NK(ncclAlltoAll(s, r, count, t, w, st)); break;
    case B_GATHER: NK(ncclGather(s, r, count, t, root, w, st)); break;
    case B_SCATTER: NK(ncclScatter(s, r, count, t, root, w, st)); break;
#else
    case B_ALLTOALL:
        for (int j = 0; j < n; j++) {
            NK(ncclSend(s + j * count * es, count, t, j, w, st));
            NK(ncclRecv(r + j * count * es, count, t, j, w, st));
        }
        break;
    case B_GATHER:
        NK(ncclSend(s, count, t, root, w, st));
        for (int j = 0; me == root && j < n; j++)
            NK(ncclRecv(r + j * count * es, count, t, j, w, st));
        break;
    case B_SCATTER:
        for (int j = 0; me == root && j < n; j++)
            NK(ncclSend(s + j * count * es, count, t, j, w, st));
        NK(ncclRecv(r, count, t, root, w, st));
        break;
#endif
    case B_SENDRECV:
        NK(ncclSend(s, count, t, (me + 1) % n, w, st));
        NK(ncclRecv(r, count, t, (me + n - 1) % n, w, st));
        break;
    case B_ALL_GATHER_V: /* one broadcast per block, as torch.distributed does for uneven all_gather */
        for (int j = 0; j < n; j++)
            NK(ncclBroadcast(s, r + l->displ[j] * es, l->blk[j], t, j, w, st));
        break;
    case B_REDUCE_SCATTER_V: /* one reduce per block, rooted at the block's owner */
        for (int j = 0; j < n; j++)
            NK(ncclReduce(s + l->displ[j] * es, r, l->blk[j], t, b->op, j, w, st));
        break;
    case B_ALLTOALL_V:
        for (int j = 0; j < n; j++) {
            NK(ncclSend(s + l->a2a_displ[j] * es, l->a2a_cnt[j], t, j, w, st));
            NK(ncclRecv(r + l->a2a_displ[j] * es, l->a2a_cnt[j], t, j, w, st));
        }
        break;
    }
    if (group)
        NK(ncclGroupEnd());
    if (b->c.o->event)
        CK(cudaEventRecord(b->ev, st));
}

/* Copies and fills go on the rank's stream: it does not wait for the legacy default stream (cudaStreamNonBlocking),
 * so a plain cudaMemcpy or cudaMemset there could land after the collective that should see its data. */
static void copy(nb_t *b, void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
    CK(cudaMemcpyAsync(dst, src, bytes, kind, b->st));
    CK(cudaStreamSynchronize(b->st));
}

/* Every rank's value of *v combined with `op` (a barrier too, when the ranks wait for it). */
static void agree(nb_t *b, void *v, ncclDataType_t t, ncclRedOp_t op)
{
    CK(cudaMemcpyAsync(b->scratch, v, 8, cudaMemcpyHostToDevice, b->st));
    NK(ncclAllReduce(b->scratch, b->scratch, 1, t, op, b->comm, b->st));
    copy(b, v, b->scratch, 8, cudaMemcpyDeviceToHost);
}

/* -G: the -n iterations captured once, then microseconds per call over -G replays, as tcomms-perf -G times them
 * (the first replay's upload included; no synchronize inside). */
static double timed_graph(nb_t *b, int ip)
{
    const bench_opts_t *o = b->c.o;
    cudaGraph_t g;
    cudaGraphExec_t x;
    CK(cudaStreamBeginCapture(b->st, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < o->iters; i++)
        run(b, ip);
    CK(cudaStreamEndCapture(b->st, &g));
    CK(cudaGraphInstantiate(&x, g, 0));
    double sync = 0;
    agree(b, &sync, ncclFloat64, ncclSum);
    double t0 = now_us();
    for (int k = 0; k < o->graph; k++)
        CK(cudaGraphLaunch(x, b->st));
    CK(cudaStreamSynchronize(b->st));
    double us = (now_us() - t0) / ((double)o->iters * o->graph);
    CK(cudaGraphExecDestroy(x));
    CK(cudaGraphDestroy(g));
    return us;
}

/* Microseconds per call on this rank, wall clock from a barrier to the end of the stream's work (--report_cputime 1:
 * to the last call's return, the host's time to post them). */
static double timed(nb_t *b, int ip)
{
    const bench_opts_t *o = b->c.o;
    for (int i = 0; i < o->warmup; i++)
        run(b, ip);
    CK(cudaStreamSynchronize(b->st));
    if (o->graph > 0)
        return timed_graph(b, ip);
    double sync = 0;
    agree(b, &sync, ncclFloat64, ncclSum);
    double t0 = now_us();
    for (int i = 0; i < o->iters; i++) {
        run(b, ip);
        if (o->blocking)
            CK(cudaStreamSynchronize(b->st));
    }
    double posted = now_us() - t0;
    CK(cudaStreamSynchronize(b->st));
    return (o->cputime ? posted : now_us() - t0) / o->iters;
}

/* bench_measure_fn: time every rank agrees on (per -a), and the wrong elements of one checked run. */
static void measure(void *arg, int ip, bench_fig_t *fig)
{
    nb_t *b = arg;
    const bench_opts_t *o = b->c.o;
    const bench_layout_t *l = &b->l;
    bench_fill(&b->c, l, b->host);
    copy(b, send_at(b, ip), b->host, l->nsend * b->es, cudaMemcpyHostToDevice);
    double us = timed(b, ip);
    static const ncclRedOp_t time_ops[4] = {ncclSum, ncclSum, ncclMin, ncclMax};
    if (o->average == 0 && b->c.rank != 0)
        us = 0; /* -a 0: the sum is rank 0's time */
    agree(b, &us, ncclFloat64, time_ops[o->average]);
    *fig = (bench_fig_t){.valid = 1, .time_us = o->average == 1 ? us / b->c.nranks : us, .wrong = -1};
    if (!o->check)
        return;
    CK(cudaMemsetAsync(b->rbuf, 0xff, l->extent * b->es, b->st)); /* NaN or -1: never a value the check expects */
    bench_fill(&b->c, l, b->host);
    copy(b, send_at(b, ip), b->host, l->nsend * b->es, cudaMemcpyHostToDevice);
    run(b, ip);
    copy(b, b->host, recv_at(b, ip), l->nrecv * b->es, cudaMemcpyDeviceToHost);
    int64_t wrong = (int64_t)bench_count_wrong(&b->c, l, b->host);
    agree(b, &wrong, ncclInt64, ncclSum);
    fig->wrong = (long)wrong;
}

/* A device buffer of `bytes` as -R says: cudaMalloc (0), or ncclMemAlloc registered as a buffer (1) or a
 * symmetric window (2), which is collective: every rank registers the same sizes in the same order. */
static void *buffer(nb_t *b, size_t bytes, int mode, void **reg)
{
    void *p = NULL;
    *reg = NULL;
    if (mode == 0) {
        CK(cudaMalloc(&p, bytes));
        return p;
    }
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 19, 0)
    NK(ncclMemAlloc(&p, bytes));
    if (mode == 1) {
        NK(ncclCommRegister(b->comm, p, bytes, reg));
        return p;
    }
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
    ncclWindow_t win;
    NK(ncclCommWindowRegister(b->comm, p, bytes, &win, NCCL_WIN_COLL_SYMMETRIC));
    *reg = (void *)win;
    return p;
#else
    die("-R 2", "symmetric windows need NCCL 2.27 or later");
#endif
#else
    (void)b;
    die("-R 1|2", "ncclMemAlloc and ncclCommRegister need NCCL 2.19 or later");
#endif
    return NULL;
}

static void release(nb_t *b, void *p, int mode, void *reg)
{
    if (mode == 0) {
        CK(cudaFree(p));
        return;
    }
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
    if (mode == 2)
        NK(ncclCommWindowDeregister(b->comm, (ncclWindow_t)reg));
#endif
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 19, 0)
    if (mode == 1)
        NK(ncclCommDeregister(b->comm, reg));
    NK(ncclMemFree(p));
#else
    (void)b, (void)p, (void)reg;
#endif
}

static int rank_main(const bench_opts_t *o, int rank, int n, ncclUniqueId id)
{
    static nb_t b;
    my_rank = rank;
    CK(cudaSetDevice(rank));
    NK(ncclCommInitRank(&b.comm, n, id, rank));
    CK(cudaStreamCreateWithFlags(&b.st, cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&b.ev, cudaEventDisableTiming));
    b.t = nccl_types[o->dtype];
    b.op = nccl_ops[o->op];
    b.es = bench_dtypes[o->dtype].size;
    size_t cap = (o->maxbytes / b.es + 1) * b.es;
    b.sbuf = buffer(&b, cap, o->local_register, &b.reg[0]);
    b.rbuf = buffer(&b, cap, o->local_register, &b.reg[1]);
    CK(cudaMalloc(&b.scratch, 8));
    CK(cudaMemsetAsync(b.sbuf, 0, cap, b.st));
    CK(cudaMemsetAsync(b.rbuf, 0, cap, b.st));
    CK(cudaStreamSynchronize(b.st));
    b.host = malloc(cap);
    if (b.host == NULL || bench_ctx_init(&b.c, o, rank, n) != 0)
        die("malloc", "out of host memory");
    char lib[128];
    int nv = 0, cv = 0;
    NK(ncclGetVersion(&nv));
    CK(cudaRuntimeGetVersion(&cv));
    static const char *const modes[] = {"cudaMalloc buffers", "registered buffers", "symmetric windows"};
    snprintf(lib, sizeof lib, "NCCL %d.%d.%d, CUDA runtime %d.%d, %s", nv / 10000, nv / 100 % 100, nv % 100,
             cv / 1000, cv % 1000 / 10, modes[o->local_register]);
    bench_report_t *rep = rank == 0 ? bench_report_new(o, PROG, "nccl-raw", "cuda", lib, n) : NULL;
    for (int i = 0; i < o->ncolls; i++) {
        b.c.coll = &bench_colls[o->colls[i]];
        bench_report_begin(rep, b.c.coll);
        /* NCCL has no in-place alltoall: grouped send/recv on one buffer would overwrite blocks not yet sent. */
        bench_sweep(&b.c, &b.l, rep, o->colls[i] != B_ALLTOALL, measure, &b);
        bench_report_end(rep);
    }
    long wrong = bench_report_finish(rep);
    release(&b, b.rbuf, o->local_register, b.reg[1]);
    release(&b, b.sbuf, o->local_register, b.reg[0]);
    NK(ncclCommDestroy(b.comm));
    CK(cudaEventDestroy(b.ev));
    return wrong != 0;
}

/* Count the visible GPUs in a child, so that this process never initializes CUDA before forking the ranks. */
static int count_gpus(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        int n = 0;
        _exit(cudaGetDeviceCount(&n) == cudaSuccess ? (n > 200 ? 200 : n) : 255);
    }
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st) == 255 ? 0 : WEXITSTATUS(st);
}

static pid_t kids[4096];
static int nkids;

static void end_kids(int sig)
{
    for (int i = 0; i < nkids; i++)
        if (kids[i] > 0)
            kill(kids[i], SIGKILL);
    if (sig != 0)
        _exit(128 + sig);
}

int main(int argc, char **argv)
{
    bench_opts_t o;
    int rc = bench_parse(argc, argv, PROG, "Raw NCCL reference for bench/compare-nccl: forks one rank per GPU.", 0,
                         &o);
    if (rc >= 0)
        return rc;
    int gpus = count_gpus();
    if (gpus <= 0) {
        fprintf(stderr, "%s: no CUDA device is visible (CUDA_VISIBLE_DEVICES, driver, or no GPU)\n", PROG);
        return 1;
    }
    int n = o.ngpus ? o.ngpus : gpus;
    const char *why = n > gpus ? "-g asks for more ranks than there are GPUs (NCCL needs one GPU per rank)"
                    : o.root >= n ? "-r names a rank past the last one" : NULL;
    if (why != NULL) {
        fprintf(stderr, "%s: %s\n", PROG, why);
        return 2;
    }
    ncclUniqueId id;
    NK(ncclGetUniqueId(&id));
    fflush(stdout);
    signal(SIGINT, end_kids);
    signal(SIGTERM, end_kids);
    for (nkids = 0; nkids < n; nkids++) {
        kids[nkids] = fork();
        if (kids[nkids] == 0) {
            if (o.cpu_bind && run_bind_rank(nkids, n) != 0) { /* tools/run/bind.c, as tcomms-run --cpu-bind */
                perror(PROG ": --cpu-bind");
                _exit(1);
            }
            int st = rank_main(&o, nkids, n, id);
            fflush(stdout);
            _exit(st);
        }
        if (kids[nkids] < 0) {
            perror(PROG ": fork");
            end_kids(0);
            return 1;
        }
    }
    int status = 0;
    for (int left = n; left > 0; left--) {
        int st;
        pid_t pid = wait(&st);
        if (pid < 0)
            break;
        for (int i = 0; i < n; i++)
            if (kids[i] == pid)
                kids[i] = 0;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            status = 1;
            end_kids(0); /* the others would wait for the lost rank forever */
        }
    }
    return status;
}
