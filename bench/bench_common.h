/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared by the reference programs bench/mpi_bench.c (Open MPI) and bench/nccl_bench.c (raw NCCL): the command
 * line, the collective and dtype tables, buffer layouts, fill and check, and output in exactly tcomms-perf's table
 * and JSON formats (docs/perf.md), so that compare-openmpi and compare-nccl put like beside like. */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <stddef.h>
#include <stdio.h>

#define BENCH_VERSION "0.1.0"

enum bench_coll_id {
    B_ALL_REDUCE, B_ALL_GATHER, B_REDUCE_SCATTER, B_BROADCAST, B_REDUCE, B_ALLTOALL, B_GATHER, B_SCATTER,
    B_SENDRECV, B_ALL_GATHER_V, B_REDUCE_SCATTER_V, B_ALLTOALL_V, B_NCOLLS
};
enum bench_dtype_id { B_INT8, B_UINT8, B_INT32, B_INT64, B_HALF, B_BFLOAT16, B_FLOAT, B_DOUBLE, B_NDTYPES };
enum bench_op_id { B_SUM, B_PROD, B_MIN, B_MAX, B_AVG, B_NOPS };

enum {
    B_REDUCES = 1u << 0,  /* takes -o; redop column "none" otherwise */
    B_ROOTED = 1u << 1,   /* takes -r; root column -1 otherwise */
    B_IN_PLACE = 1u << 2, /* has an in-place form; N/A in the in-place columns otherwise */
    B_PAIRWISE = 1u << 3, /* needs a peer other than itself: N/A on one rank */
    B_ONE_BUFFER = 1u << 4 /* one buffer (broadcast): the root's data start in the receive buffer */
};

/* How a swept size maps onto a collective's buffers, as tcomms-perf and nccl-tests map it. */
enum bench_shape {
    SHAPE_WHOLE,   /* count = size / element size, sent and received whole */
    SHAPE_GATHER,  /* b = count / nranks sent, n * b received (all_gather, gather, all_gather_v) */
    SHAPE_SCATTER, /* n * b sent, b received (reduce_scatter, scatter, reduce_scatter_v) */
    SHAPE_ALLTOALL /* n * b sent and received */
};

typedef struct bench_coll {
    const char *name;
    unsigned flags;
    enum bench_shape shape;
    int vector; /* a v-variant: unequal blocks, the ramp of bench_layout() */
    int busbw;  /* bus-bandwidth factor: 0 -> 1, 1 -> (n-1)/n, 2 -> 2(n-1)/n */
} bench_coll_t;

typedef struct bench_dtype {
    const char *name;  /* as the table prints it (nccl-tests): "float" */
    const char *tname; /* as tcomms names it (the JSON "dtype"): "float32" */
    size_t size;
    int is_float;
} bench_dtype_t;

extern const bench_coll_t bench_colls[B_NCOLLS];
extern const bench_dtype_t bench_dtypes[B_NDTYPES];
extern const char *const bench_op_names[B_NOPS];

typedef struct bench_opts {
    int colls[B_NCOLLS], ncolls;
    size_t minbytes, maxbytes, stepbytes, stepfactor;
    int iters, warmup, check, root, average, blocking;
    int ngpus; /* -g: ranks to fork, for programs that start their own (0: not given) */
    int local_register; /* -R (nccl_bench): 0 cudaMalloc, 1 ncclMemAlloc + ncclCommRegister, 2 + a window */
    int cpu_bind;       /* --cpu-bind auto (nccl_bench): each forked rank on its own block of CPUs */
    int graph;          /* -G N (nccl_bench): time N replays of a CUDA graph of the -n iterations (0: none) */
    int group;          /* --group (nccl_bench): every call inside ncclGroupStart/End, as nccl-tests makes it */
    int event;          /* --event (nccl_bench): a CUDA event recorded after every call, as a watchdog does */
    int cputime;        /* --report_cputime 1 (nccl_bench): the host's time to post the calls, as tcomms-perf -C */
    enum bench_dtype_id dtype;
    enum bench_op_id op;
    const char *json, *label;
} bench_opts_t;

/* Parse the command line shared by the reference programs (a subset of tcomms-perf's; COLL may be a comma-separated
 * list, run in table order). Returns -1 to go on, else the exit status to end with: 0 after --help, 2 after a
 * usage error (reported on stderr unless quiet). */
int bench_parse(int argc, char **argv, const char *prog, const char *about, int quiet, bench_opts_t *o);
/* The size after `bytes` in the sweep, or 0 past -e. */
size_t bench_next_size(const bench_opts_t *o, size_t bytes);

/* One message size on one rank; counts and offsets in elements. */
typedef struct bench_layout {
    size_t count;            /* the count column: the per-rank count parameter */
    size_t bytes;            /* the size column: max(send, recv) bytes per rank */
    size_t nsend, nrecv;     /* this rank's send and receive data (0 where unused: reduce/gather off the root) */
    size_t send_ip, recv_ip; /* in place (NCCL convention): where both sit in the one buffer */
    size_t extent;           /* in place: the one buffer's extent */
    size_t *blk, *displ;     /* v-variants: per-rank block counts and displacements (all_gather_v, r_s_v) */
    size_t *a2a_cnt, *a2a_displ, *a2a_src; /* alltoall_v: counts/displs to and from j; j's offset of our block */
} bench_layout_t;

typedef struct bench_ctx {
    const bench_opts_t *o;
    const bench_coll_t *coll;
    int rank, nranks;
    size_t *vec; /* backing store of the layout's per-rank arrays, 5 * nranks */
} bench_ctx_t;

/* Set up `c` for this rank (the caller sets c->coll per collective); returns -1 when out of memory. */
int bench_ctx_init(bench_ctx_t *c, const bench_opts_t *o, int rank, int nranks);
void bench_ctx_free(bench_ctx_t *c);
void bench_layout(bench_ctx_t *c, size_t bytes, bench_layout_t *l);
/* Element i of `rank`'s send data, and what element i of this rank's receive data must hold afterwards. */
double bench_input(const bench_ctx_t *c, int rank, size_t i);
double bench_expected(const bench_ctx_t *c, const bench_layout_t *l, size_t i);
void bench_store(enum bench_dtype_id t, void *buf, size_t i, double v);
/* Fill this rank's send data at `buf`, and count the elements of `recv` (l->nrecv) that differ from expected. */
void bench_fill(const bench_ctx_t *c, const bench_layout_t *l, void *buf);
size_t bench_count_wrong(const bench_ctx_t *c, const bench_layout_t *l, const void *recv);

typedef struct bench_report bench_report_t;

/* One side (out-of-place or in-place) of a row; time already combined over ranks as -a says. */
typedef struct bench_fig {
    int valid;     /* 0: N/A */
    double time_us;
    long wrong;    /* -1 with -c 0 */
} bench_fig_t;

/* Measure one form (ip 0: out of place, 1: in place) of the current size and collective, filling `fig`. */
typedef void (*bench_measure_fn)(void *arg, int ip, bench_fig_t *fig);
/* Sweep the sizes of c->coll: lay out each size in `l`, measure the forms the collective has (in place only where
 * also `ip_ok`), and report a row (r is NULL off rank 0). */
void bench_sweep(bench_ctx_t *c, bench_layout_t *l, bench_report_t *r, int ip_ok, bench_measure_fn f, void *arg);

/* The report, written by rank 0 only: header, one block per collective, rows, JSON at the end. */
bench_report_t *bench_report_new(const bench_opts_t *o, const char *tool, const char *backend, const char *device,
                                 const char *library, int nranks);
void bench_report_begin(bench_report_t *r, const bench_coll_t *coll);
void bench_report_row(bench_report_t *r, const bench_layout_t *l, const bench_fig_t *oop, const bench_fig_t *ip);
void bench_report_end(bench_report_t *r);
/* Write the JSON file (--json, or its alias -J) if one was asked for, free the report, and return the total of wrong elements. */
long bench_report_finish(bench_report_t *r);

#endif
