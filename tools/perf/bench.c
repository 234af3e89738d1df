/* SPDX-License-Identifier: BSD-3-Clause */
/* The sweep of tcomms-perf (see bench.h). Timing is CLOCK_MONOTONIC around the -n iterations of one form, after a
 * barrier; with -z 0 every iteration is posted with a work handle and all are waited for at the end, with -z 1
 * each call blocks. On cuda, as nccl-tests: the clock stops after a stream synchronize, -z 1 synchronizes after
 * every call, and -G N captures the iterations in a graph and times N replays. Ranks agree on the time with an
 * all_reduce (float64, per -a) and on the number of wrong elements with another (int64, sum), through a small
 * buffer where the backend can reach it. The check runs once per form after the timing, on fresh data. */
#include "bench.h"

#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h" /* lib/util/clock.h */
#include "values.h"

typedef struct bench {
    const perf_args_t *a;
    perf_mem_t *mem;
    perf_ctx_t x;
    perf_works_t works;     /* room for 2 handles per posted iteration */
    perf_buf_t send, recv;  /* buffers of the current collective, for its largest size; in place uses recv */
    perf_buf_t agreed;      /* 2 elements of 8 bytes: what the ranks agree on */
    unsigned char *host;    /* host copy of send or receive data, for the fill and the check */
    size_t *vec;            /* layout scratch of the v-variants */
    int capturing;          /* inside a CUDA graph capture: no synchronize */
} bench_t;

/* Report a failed tcomms call of `what` and pass its status on. */
static tcomms_status_t fail(const bench_t *b, const char *what, tcomms_status_t st)
{
    char detail[512];
    snprintf(detail, sizeof detail, "%s", tcomms_last_error()); /* before any other tcomms call replaces it */
    fprintf(stderr, "tcomms-perf: rank %d: %s: %s: %s\n", b->x.rank, what, tcomms_strerror(st), detail);
    return st;
}

static double now_s(void)
{
    return 1e-9 * (double)tc_now_ns();
}

/* Wait for and free every posted handle; the first error wins. */
static tcomms_status_t wait_all(bench_t *b)
{
    tcomms_status_t st = TCOMMS_SUCCESS;
    for (size_t k = 0; k < b->works.n; k++) {
        if (b->works.h[k] == NULL)
            continue; /* a post that failed left no handle */
        tcomms_status_t wst = tcomms_work_wait(b->works.h[k], 0);
        if (st == TCOMMS_SUCCESS)
            st = wst;
        tcomms_work_free(b->works.h[k]);
        b->works.h[k] = NULL;
    }
    b->works.n = 0;
    return st;
}

/* A failed step of perf_mem (its message is out): the run ends with a system error. */
static tcomms_status_t mem_failed(const bench_t *b, const char *what)
{
    fprintf(stderr, "tcomms-perf: rank %d: %s: %s memory or stream failed (above)\n", b->x.rank, what,
            b->mem->name);
    return TCOMMS_ERR_SYSTEM;
}

/* The operations ordered so far are done on the device. */
static tcomms_status_t settle(bench_t *b, const char *what)
{
    return b->capturing || perf_mem_sync(b->mem) == 0 ? TCOMMS_SUCCESS : mem_failed(b, what);
}

/* Every rank is here and nothing of before is still running (inside a graph capture: nothing to do). */
static tcomms_status_t barrier(bench_t *b)
{
    if (b->capturing)
        return TCOMMS_SUCCESS;
    tcomms_status_t st = tcomms_barrier(b->x.comm, b->x.opts, NULL);
    if (st != TCOMMS_SUCCESS)
        return fail(b, "barrier before timing", st);
    return settle(b, "barrier before timing");
}

/* `iters` iterations of -m operations each, with -z as nccl-tests: 0 posts every operation, then waits for all;
 * 1 and 2 complete each operation (1 adds a barrier); 3 completes each iteration and then meets at a barrier that
 * is not timed. On cuda, posting is a plain call: stream-ordered, it never blocks the host, which is how
 * nccl-tests enqueues, so both time the same thing. tm[0] gets the seconds timed, tm[1] those until the last
 * operation was posted (-C). */
static tcomms_status_t run_iters(bench_t *b, const perf_coll_t *coll, const perf_layout_t *l, const void *s,
                                 void *r, int iters, double tm[2])
{
    tcomms_status_t st = TCOMMS_SUCCESS;
    int z = b->a->blocking, cuda = b->mem->type == TCOMMS_DEVICE_CUDA;
    int handles = (z == 0 || z == 3) && !cuda;
    double t0 = now_s(), coll_only = 0;
    for (int i = 0; i < iters && st == TCOMMS_SUCCESS; i++) {
        /* only -z 3 times each iteration: elsewhere the clock read would be timed with the call (mpi_bench reads
         * none) */
        double ti = z == 3 ? now_s() : 0;
        for (int k = 0; k < b->a->agg && st == TCOMMS_SUCCESS; k++) {
            st = coll->run(&b->x, l, s, r, handles ? &b->works : NULL);
            if (st == TCOMMS_SUCCESS && (z == 1 || z == 2) && cuda)
                st = settle(b, coll->name);
            if (st == TCOMMS_SUCCESS && z == 1)
                st = barrier(b);
        }
        if (z == 3 && st == TCOMMS_SUCCESS) {
            st = wait_all(b);
            if (st == TCOMMS_SUCCESS)
                st = settle(b, coll->name);
            coll_only += now_s() - ti;
            if (st == TCOMMS_SUCCESS)
                st = barrier(b);
        }
    }
    tm[1] = z == 3 ? coll_only : now_s() - t0;
    tcomms_status_t wst = wait_all(b);
    if (st == TCOMMS_SUCCESS && wst == TCOMMS_SUCCESS)
        wst = settle(b, coll->name);
    tm[0] = z == 3 ? coll_only : now_s() - t0;
    return st != TCOMMS_SUCCESS ? st : wst;
}

/* -G: capture the iterations, then time `a->graph` replays of them. */
static tcomms_status_t time_graph(bench_t *b, const perf_coll_t *coll, const perf_layout_t *l, const void *s,
                                  void *r, const char *what, double *us)
{
    void *graph = NULL;
    if (perf_mem_capture_begin(b->mem) != 0)
        return mem_failed(b, what);
    b->capturing = 1;
    double tm[2];
    tcomms_status_t st = run_iters(b, coll, l, s, r, b->a->iters, tm);
    b->capturing = 0;
    if (perf_mem_capture_end(b->mem, &graph) != 0) /* ends the capture even after a failed post */
        return st != TCOMMS_SUCCESS ? fail(b, what, st) : mem_failed(b, what);
    if (st != TCOMMS_SUCCESS)
        st = fail(b, what, st);
    else
        st = barrier(b);
    double t0 = now_s();
    if (st == TCOMMS_SUCCESS && (perf_mem_replay(b->mem, graph, b->a->graph) != 0 || perf_mem_sync(b->mem) != 0))
        st = mem_failed(b, what);
    *us = (now_s() - t0) * 1e6 / ((double)b->a->iters * b->a->agg * b->a->graph);
    perf_mem_graph_free(graph);
    return st;
}

/* Microseconds per operation of one form, as this rank measured it. */
static tcomms_status_t time_form(bench_t *b, const perf_coll_t *coll, const perf_layout_t *l, const void *s,
                                 void *r, const char *what, double *us)
{
    double tm[2];
    int agg = b->a->agg;
    tcomms_status_t st = run_iters(b, coll, l, s, r, b->a->warmup, tm); /* -m applies to warm-ups as well */
    if (st != TCOMMS_SUCCESS)
        return fail(b, what, st);
    if ((st = barrier(b)) != TCOMMS_SUCCESS)
        return st;
    if (b->a->graph > 0)
        return time_graph(b, coll, l, s, r, what, us);
    if ((st = run_iters(b, coll, l, s, r, b->a->iters, tm)) != TCOMMS_SUCCESS)
        return fail(b, what, st);
    *us = tm[b->a->cputime ? 1 : 0] * 1e6 / ((double)b->a->iters * agg);
    return TCOMMS_SUCCESS;
}

/* One checked run of a form: poison the receive data, fill the send data, run, count elements that differ from
 * the descriptor's expectation. */
static tcomms_status_t check_form(bench_t *b, const perf_coll_t *coll, const perf_layout_t *l, void *s, void *r,
                                  const char *what, int64_t *wrong)
{
    const perf_ctx_t *x = &b->x;
    tcomms_dtype_t t = x->dtype;
    /* A value no correct run leaves behind, so stale data of an earlier run cannot pass for a result. */
    for (size_t i = 0; i < l->recv_elems; i++)
        perf_store(t, b->host, i, nearbyint(coll->expected(x, l, i)) + 37);
    if (perf_mem_upload(b->mem, r, b->host, l->recv_elems * x->esize) != 0)
        return mem_failed(b, what);
    for (size_t i = 0; i < l->send_elems; i++)
        perf_store(t, b->host, i, perf_send_value(x, coll, x->rank, i));
    if (perf_mem_upload(b->mem, s, b->host, l->send_elems * x->esize) != 0)
        return mem_failed(b, what);
    tcomms_status_t st = coll->run(x, l, s, r, NULL);
    if (st != TCOMMS_SUCCESS)
        return fail(b, what, st);
    if (perf_mem_download(b->mem, b->host, r, l->recv_elems * x->esize) != 0) /* ordered after the call */
        return mem_failed(b, what);
    if (b->a->corrupt && x->rank == 0 && l->recv_elems > 0)
        perf_store(t, b->host, 0, nearbyint(perf_load(t, b->host, 0)) + 64);
    int64_t bad = 0;
    for (size_t i = 0; i < l->recv_elems; i++)
        bad += !perf_match(t, perf_load(t, b->host, i), coll->expected(x, l, i));
    *wrong = bad;
    return TCOMMS_SUCCESS;
}

/* All ranks' v[0..1] combined with `op`, in place, through the agreement buffer (device memory on cuda). */
static tcomms_status_t agree_on(bench_t *b, void *v, tcomms_dtype_t t, tcomms_op_t op, const char *what)
{
    if (perf_mem_upload(b->mem, b->agreed.p, v, 16) != 0)
        return mem_failed(b, what);
    tcomms_status_t st = tcomms_all_reduce(b->x.comm, b->agreed.p, b->agreed.p, 2, t, op, b->x.opts, NULL);
    if (st != TCOMMS_SUCCESS)
        return fail(b, what, st);
    return perf_mem_download(b->mem, v, b->agreed.p, 16) == 0 ? TCOMMS_SUCCESS : mem_failed(b, what);
}

/* Every rank's time per -a (rank 0's, average, minimum, maximum) and the sum of wrong elements. */
static tcomms_status_t agree(bench_t *b, double t[2], int64_t w[2])
{
    static const tcomms_op_t time_ops[] = {TCOMMS_SUM, TCOMMS_AVG, TCOMMS_MIN, TCOMMS_MAX};
    if (b->a->average == 0 && b->x.rank != 0)
        t[0] = t[1] = 0; /* -a 0: the sum is rank 0's time */
    tcomms_status_t st = agree_on(b, t, TCOMMS_FLOAT64, time_ops[b->a->average], "all_reduce of the times");
    return st != TCOMMS_SUCCESS ? st : agree_on(b, w, TCOMMS_INT64, TCOMMS_SUM, "all_reduce of the wrong counts");
}

/* Buffers of form 0 (out of place) or 1 (in place: one buffer, with the send and receive data at offsets). */
static void locate(const bench_t *b, const perf_coll_t *coll, const perf_layout_t *l, int form, void **s, void **r)
{
    size_t skew = (size_t)b->a->unalign * b->x.esize; /* -u, as nccl-tests: both buffers start past alignment */
    unsigned char *base = (unsigned char *)b->recv.p + skew;
    if (form == 0) {
        *r = base;
        int one = (perf_coll_flags(coll) & TCOMMS_COLL_ONE_BUFFER) != 0;
        *s = one ? (void *)base : (void *)((unsigned char *)b->send.p + skew);
    } else {
        *s = base + l->send_ip * b->x.esize;
        *r = base + l->recv_ip * b->x.esize;
    }
}

static tcomms_status_t one_row(bench_t *b, const perf_coll_t *coll, size_t size, perf_report_t *rep,
                               long long *wrong)
{
    perf_layout_t l = {.vec = b->vec};
    coll->layout(&b->x, size / b->x.esize, &l);
    perf_row_t row = {.coll = coll->name, .bytes = l.bytes, .count = l.count, .dtype = b->x.dtype,
                      .redop = (perf_coll_flags(coll) & TCOMMS_COLL_REDUCES) ? tcomms_op_name(b->x.op) : "none",
                      .root = (perf_coll_flags(coll) & TCOMMS_COLL_ROOTED) ? b->x.root : -1};
    int runs = !(perf_coll_flags(coll) & TCOMMS_COLL_P2P) || b->x.nranks > 1; /* a rank cannot message itself */
    double t[2] = {0, 0};
    int64_t w[2] = {0, 0};
    for (int form = 0; form < 2; form++) {
        perf_cell_t *c = &row.cell[form];
        c->state = form == 1 && !(perf_coll_flags(coll) & TCOMMS_COLL_IN_PLACE) ? PERF_CELL_ABSENT
                   : runs                                       ? PERF_CELL_MEASURED
                                                                : PERF_CELL_NA;
        if (c->state != PERF_CELL_MEASURED)
            continue;
        char what[96];
        snprintf(what, sizeof what, "%s %s, %zu B", coll->name, form ? "in place" : "out of place", size);
        void *s, *r;
        locate(b, coll, &l, form, &s, &r);
        tcomms_status_t st = time_form(b, coll, &l, s, r, what, &t[form]);
        /* -c N: N checked runs on fresh data, as nccl-tests; the first that finds wrong elements ends them. */
        for (int k = 0; st == TCOMMS_SUCCESS && k < b->a->check && w[form] == 0; k++)
            st = check_form(b, coll, &l, s, r, what, &w[form]);
        if (st != TCOMMS_SUCCESS)
            return st;
    }
    if (runs) {
        tcomms_status_t st = agree(b, t, w);
        if (st != TCOMMS_SUCCESS)
            return st;
    }
    for (int form = 0; form < 2; form++) {
        perf_cell_t *c = &row.cell[form];
        c->time_us = t[form];
        c->algbw = t[form] > 0 ? (double)l.bytes / (t[form] * 1e3) : 0.0; /* GB/s = 1e9 B/s */
        c->busbw = c->algbw * coll->factor(b->x.nranks);
        c->wrong = b->a->check ? w[form] : -1;
        if (c->state == PERF_CELL_MEASURED && c->wrong > 0)
            *wrong += c->wrong;
    }
    if (perf_report_row(rep, &row) != 0) {
        fprintf(stderr, "tcomms-perf: out of memory for the rows of the report\n");
        return TCOMMS_ERR_NO_MEMORY;
    }
    return TCOMMS_SUCCESS;
}

static void free_buffers(bench_t *b)
{
    perf_buf_free(b->mem, &b->recv);
    perf_buf_free(b->mem, &b->send);
    free(b->host);
    b->host = NULL;
}

/* Buffers for the largest extent any size of the sweep gives `coll`. Both get the in-place extent, which holds
 * every form's send and receive data and is the same on every rank, as symmetric windows (-R 2) need. */
static tcomms_status_t alloc_buffers(bench_t *b, const perf_coll_t *coll)
{
    size_t most = 0, es = b->x.esize;
    for (size_t s = b->a->min_bytes; s != PERF_END; s = perf_args_next(b->a, s)) {
        perf_layout_t l = {.vec = b->vec};
        coll->layout(&b->x, s / es, &l);
        most = l.ip_elems > most ? l.ip_elems : most;
    }
    most += (size_t)b->a->unalign;
    if (perf_buf_alloc(b->mem, most * es, 1, &b->send) != 0 || perf_buf_alloc(b->mem, most * es, 1, &b->recv) != 0) {
        free_buffers(b);
        return mem_failed(b, coll->name);
    }
    if ((b->host = malloc(most * es + 1)) != NULL)
        return TCOMMS_SUCCESS;
    fprintf(stderr, "tcomms-perf: rank %d: %s: out of host memory for %zu bytes\n", b->x.rank, coll->name,
            most * es);
    free_buffers(b);
    return TCOMMS_ERR_NO_MEMORY;
}

static void timed_out(int sig)
{
    static const char msg[] = "tcomms-perf: -T/--timeout: one size took longer than allowed; giving up\n";
    (void)sig;
    if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0)
        _exit(1);
    _exit(1);
}

/* One sweep (-N cycles) of one type, op and root. -T arms the alarm again for each size. */
static tcomms_status_t one_sweep(bench_t *b, const perf_coll_t *coll, perf_report_t *rep, long long *wrong)
{
    tcomms_status_t st = TCOMMS_SUCCESS;
    for (int cycle = 0; st == TCOMMS_SUCCESS && (b->a->cycles == 0 || cycle < b->a->cycles); cycle++)
        for (size_t s = b->a->min_bytes; st == TCOMMS_SUCCESS && s != PERF_END; s = perf_args_next(b->a, s)) {
            if (b->a->timeout > 0)
                alarm((unsigned)b->a->timeout);
            st = one_row(b, coll, s, rep, wrong);
        }
    alarm(0);
    return st;
}

/* One collective: every type of -d, op of -o (reducing collectives) and root of -r (rooted ones), in nccl-tests'
 * order: type, then op, then root. */
static tcomms_status_t one_block(bench_t *b, const perf_coll_t *coll, perf_report_t *rep, long long *wrong)
{
    const perf_args_t *a = b->a;
    int nops = (perf_coll_flags(coll) & TCOMMS_COLL_REDUCES) ? a->nops : 1;
    int rooted = (perf_coll_flags(coll) & TCOMMS_COLL_ROOTED) != 0;
    int root0 = !rooted ? -1 : a->root < 0 ? 0 : a->root;
    int root1 = !rooted ? -1 : a->root < 0 ? b->x.nranks - 1 : a->root;
    perf_report_begin(rep, coll);
    tcomms_status_t st = TCOMMS_SUCCESS;
    for (int t = 0; st == TCOMMS_SUCCESS && t < a->ndtypes; t++) {
        b->x.dtype = a->dtypes[t];
        b->x.esize = tcomms_dtype_size(b->x.dtype);
        st = alloc_buffers(b, coll);
        for (int o = 0; st == TCOMMS_SUCCESS && o < nops; o++) {
            b->x.op = a->ops[o];
            for (int root = root0; st == TCOMMS_SUCCESS && root <= root1; root++) {
                b->x.root = root < 0 ? 0 : root;
                st = one_sweep(b, coll, rep, wrong);
            }
        }
        free_buffers(b);
    }
    if (st == TCOMMS_SUCCESS)
        perf_report_end(rep, coll);
    return st;
}

tcomms_status_t perf_bench_run(const perf_args_t *a, tcomms_comm_t *comm, perf_mem_t *mem, perf_report_t *r,
                               long long *wrong)
{
    bench_t b = {.a = a, .mem = mem,
                 .x = {.comm = comm, .dtype = a->dtypes[0], .op = a->ops[0],
                       .esize = tcomms_dtype_size(a->dtypes[0]), .opts = &mem->opts}};
    tcomms_comm_rank(comm, &b.x.rank);
    tcomms_comm_size(comm, &b.x.nranks);
    *wrong = 0;
    size_t most = (size_t)(a->iters > a->warmup ? a->iters : a->warmup) * (size_t)a->agg;
    if (a->timeout > 0)
        signal(SIGALRM, timed_out);
    b.works.h = calloc(2 * most + 2, sizeof *b.works.h);
    b.vec = calloc(PERF_VEC_PER_RANK * (size_t)b.x.nranks, sizeof *b.vec);
    tcomms_status_t st = TCOMMS_SUCCESS;
    if (b.works.h == NULL || b.vec == NULL) {
        fprintf(stderr, "tcomms-perf: out of memory\n");
        st = TCOMMS_ERR_NO_MEMORY;
    } else if (perf_buf_alloc(mem, 16, 0, &b.agreed) != 0) {
        st = mem_failed(&b, "the agreement buffer");
    }
    for (size_t k = 0; st == TCOMMS_SUCCESS && k < perf_ncolls; k++)
        if (a->colls & (1u << k))
            st = one_block(&b, &perf_colls[k], r, wrong);
    perf_buf_free(mem, &b.agreed);
    free(b.works.h);
    free(b.vec);
    return st;
}
