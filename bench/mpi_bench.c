/* SPDX-License-Identifier: BSD-3-Clause */
/* mpi_bench: the Open MPI reference of bench/compare-openmpi. It runs tcomms-perf's collectives through Open MPI's
 * own calls (MPI_Allreduce; MPI_Iallreduce with -z 0, ...) and prints tcomms-perf's table and JSON with backend
 * "openmpi". compare-openmpi builds it with mpicc, with bench_common.c and bench_report.c; mpirun -np N runs it. */
#include <limits.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"

#define PROG "mpi_bench"

typedef struct mb {
    bench_ctx_t c;
    bench_layout_t l;
    MPI_Datatype t;
    MPI_Op op;
    size_t es;
    char *sbuf, *rbuf;
    int cnt[2][4096], displ[2][4096]; /* v-variants as MPI wants them: blocks; alltoall_v counts */
    MPI_Request *reqs;
} mb_t;

static int check_mpi_types(const bench_opts_t *o, MPI_Datatype *t, MPI_Op *op)
{
    switch (o->dtype) {
    case B_INT8: *t = MPI_INT8_T; break;
    case B_UINT8: *t = MPI_UINT8_T; break;
    case B_INT32: *t = MPI_INT32_T; break;
    case B_INT64: *t = MPI_INT64_T; break;
    case B_FLOAT: *t = MPI_FLOAT; break;
    case B_DOUBLE: *t = MPI_DOUBLE; break;
    default: return -1; /* half, bfloat16: Open MPI 4 has no such types */
    }
    switch (o->op) {
    case B_SUM: *op = MPI_SUM; break;
    case B_PROD: *op = MPI_PROD; break;
    case B_MIN: *op = MPI_MIN; break;
    case B_MAX: *op = MPI_MAX; break;
    default: return -2; /* avg: MPI has no such reduction */
    }
    return 0;
}

/* In place, MPI_Reduce_scatter(_block) reads the whole input from the receive buffer and leaves this rank's result
 * at its start, not at the rank's block as NCCL and tcomms do. */
static size_t recv_at(const mb_t *m, int ip)
{
    int id = (int)(m->c.coll - bench_colls);
    return ip && id != B_REDUCE_SCATTER && id != B_REDUCE_SCATTER_V ? m->l.recv_ip : 0;
}

#define CALL(B, NB, ...) (req ? NB(__VA_ARGS__, req) : B(__VA_ARGS__))

/* One operation, blocking when req is NULL; returns how many requests it posted. */
static int run(mb_t *m, int ip, MPI_Request *req)
{
    const bench_layout_t *l = &m->l;
    MPI_Comm w = MPI_COMM_WORLD;
    MPI_Datatype t = m->t;
    int me = m->c.rank, n = m->c.nranks, root = m->c.o->root, at_root = me == root;
    int count = (int)l->count, next = (me + 1) % n, prev = (me + n - 1) % n;
    char *s = ip ? m->rbuf + l->send_ip * m->es : m->sbuf, *r = m->rbuf;
    void *in = ip ? MPI_IN_PLACE : s;
    switch ((int)(m->c.coll - bench_colls)) {
    case B_ALL_REDUCE: CALL(MPI_Allreduce, MPI_Iallreduce, in, r, count, t, m->op, w); break;
    case B_ALL_GATHER: CALL(MPI_Allgather, MPI_Iallgather, in, count, t, r, count, t, w); break;
    case B_REDUCE_SCATTER: CALL(MPI_Reduce_scatter_block, MPI_Ireduce_scatter_block, in, r, count, t, m->op, w);
        break;
    case B_BROADCAST: CALL(MPI_Bcast, MPI_Ibcast, r, count, t, root, w); break;
    case B_REDUCE: CALL(MPI_Reduce, MPI_Ireduce, ip && !at_root ? s : in, r, count, t, m->op, root, w); break;
    case B_ALLTOALL: CALL(MPI_Alltoall, MPI_Ialltoall, in, count, t, r, count, t, w); break;
    case B_GATHER: CALL(MPI_Gather, MPI_Igather, ip && !at_root ? s : in, count, t, r, count, t, root, w); break;
    case B_SCATTER:
        if (ip) /* the root keeps its block where it is; the others receive at their block of the one buffer */
            CALL(MPI_Scatter, MPI_Iscatter, r, count, t, at_root ? MPI_IN_PLACE : r + l->recv_ip * m->es, count,
                 t, root, w);
        else
            CALL(MPI_Scatter, MPI_Iscatter, s, count, t, r, count, t, root, w);
        break;
    case B_SENDRECV:
        if (req == NULL) {
            MPI_Sendrecv(s, count, t, next, 0, r, count, t, prev, 0, w, MPI_STATUS_IGNORE);
            break;
        }
        MPI_Irecv(r, count, t, prev, 0, w, &req[0]);
        MPI_Isend(s, count, t, next, 0, w, &req[1]);
        return 2;
    case B_ALL_GATHER_V:
        CALL(MPI_Allgatherv, MPI_Iallgatherv, in, m->cnt[0][me], t, r, m->cnt[0], m->displ[0], t, w);
        break;
    case B_REDUCE_SCATTER_V: CALL(MPI_Reduce_scatter, MPI_Ireduce_scatter, in, r, m->cnt[0], t, m->op, w); break;
    case B_ALLTOALL_V:
        CALL(MPI_Alltoallv, MPI_Ialltoallv, s, m->cnt[1], m->displ[1], t, r, m->cnt[1], m->displ[1], t, w);
        break;
    }
    return 1;
}

/* Microseconds per call on this rank: -w untimed calls, then -n calls timed from a barrier. */
static double timed(mb_t *m, int ip)
{
    const bench_opts_t *o = m->c.o;
    for (int i = 0; i < o->warmup; i++)
        run(m, ip, NULL);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    if (o->blocking) {
        for (int i = 0; i < o->iters; i++)
            run(m, ip, NULL);
    } else {
        int nreq = 0;
        for (int i = 0; i < o->iters; i++)
            nreq += run(m, ip, m->reqs + nreq);
        MPI_Waitall(nreq, m->reqs, MPI_STATUSES_IGNORE);
    }
    return (MPI_Wtime() - t0) * 1e6 / o->iters;
}

/* Refresh the int counts MPI's v-calls take from the layout of the current size. */
static void v_counts(mb_t *m)
{
    const bench_layout_t *l = &m->l;
    for (int j = 0; l->blk != NULL && j < m->c.nranks; j++) {
        m->cnt[0][j] = (int)l->blk[j];
        m->displ[0][j] = (int)l->displ[j];
        m->cnt[1][j] = (int)l->a2a_cnt[j];
        m->displ[1][j] = (int)l->a2a_displ[j];
    }
}

/* bench_measure_fn: the time of all ranks as -a asks (on rank 0), and the wrong elements of one checked run. */
static void measure(void *arg, int ip, bench_fig_t *fig)
{
    mb_t *m = arg;
    const bench_opts_t *o = m->c.o;
    char *in = ip ? m->rbuf + m->l.send_ip * m->es : m->c.coll->flags & B_ONE_BUFFER ? m->rbuf : m->sbuf;
    v_counts(m);
    bench_fill(&m->c, &m->l, in);
    double us = timed(m, ip), all = us;
    if (o->average != 0)
        MPI_Reduce(&us, &all, 1, MPI_DOUBLE, o->average == 1 ? MPI_SUM : o->average == 2 ? MPI_MIN : MPI_MAX, 0,
                   MPI_COMM_WORLD);
    *fig = (bench_fig_t){.valid = 1, .time_us = o->average == 1 ? all / m->c.nranks : all, .wrong = -1};
    if (!o->check)
        return;
    memset(m->rbuf, 0xff, m->l.extent * m->es); /* NaN or -1: never a value the check expects */
    bench_fill(&m->c, &m->l, in);
    run(m, ip, NULL);
    long wrong = (long)bench_count_wrong(&m->c, &m->l, m->rbuf + recv_at(m, ip) * m->es), sum = 0;
    MPI_Reduce(&wrong, &sum, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    fig->wrong = sum;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n, status = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    static mb_t m;
    bench_opts_t o;
    int rc = bench_parse(argc, argv, PROG, "Open MPI reference for bench/compare-openmpi (run under mpirun).",
                         rank != 0, &o);
    if (rc < 0) {
        int bad = check_mpi_types(&o, &m.t, &m.op);
        const char *why = bad == -1 ? "Open MPI has no half or bfloat16 type" : bad == -2 ? "MPI has no avg reduction"
                        : o.ngpus ? "-g is nccl_bench's: start ranks with mpirun -np N"
                        : o.root >= n ? "-r names a rank past the last one" : n > 4096 ? "more than 4096 ranks"
                        : o.maxbytes / bench_dtypes[o.dtype].size > INT_MAX ? "-e is past MPI's int counts" : NULL;
        if (why != NULL) {
            if (rank == 0)
                fprintf(stderr, "%s: %s\n", PROG, why);
            rc = 2;
        }
    }
    if (rc >= 0) {
        MPI_Finalize();
        return rc;
    }
    m.es = bench_dtypes[o.dtype].size;
    size_t cap = (o.maxbytes / m.es + 1) * m.es;
    m.sbuf = malloc(cap);
    m.rbuf = malloc(cap);
    m.reqs = malloc(2 * (size_t)o.iters * sizeof *m.reqs);
    if (m.sbuf == NULL || m.rbuf == NULL || m.reqs == NULL || bench_ctx_init(&m.c, &o, rank, n) != 0) {
        fprintf(stderr, "%s: rank %d: out of memory for %zu-byte buffers\n", PROG, rank, cap);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(m.sbuf, 0, cap);
    memset(m.rbuf, 0, cap);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len;
    MPI_Get_library_version(lib, &len);
    lib[strcspn(lib, "\n")] = '\0';
    bench_report_t *rep = rank == 0 ? bench_report_new(&o, PROG, "openmpi", "cpu", lib, n) : NULL;
    for (int i = 0; i < o.ncolls; i++) {
        m.c.coll = &bench_colls[o.colls[i]];
        bench_report_begin(rep, m.c.coll);
        bench_sweep(&m.c, &m.l, rep, 1, measure, &m);
        bench_report_end(rep);
    }
    long wrong = bench_report_finish(rep);
    status = wrong != 0;
    bench_ctx_free(&m.c);
    free(m.sbuf);
    free(m.rbuf);
    free(m.reqs);
    MPI_Finalize();
    return status;
}
