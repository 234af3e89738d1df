/* The sweep of tcomms-perf (see bench.h). Timing is CLOCK_MONOTONIC around the -n iterations of one form, after a
 * barrier; with -z 0 every iteration is posted with a work handle and all are waited for at the end, with -z 1
 * each call blocks. Ranks agree on the time with an all_reduce (float64, per -a) and on the number of wrong
 * elements with another (int64, sum). The check runs once per form after the timing, on fresh data. */
#include "bench.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "values.h"

typedef struct bench {
    const perf_args_t *a;
    const perf_mem_t *mem;
    perf_ctx_t x;
    perf_works_t works;  /* room for 2 handles per posted iteration */
    void *send, *recv;   /* buffers of the current collective, for its largest size; in place uses recv */
    unsigned char *host; /* host copy of send or receive data, for the fill and the check */
    size_t *vec;         /* layout scratch of the v-variants */
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
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
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

static tcomms_status_t run_iters(bench_t *b, const perf_coll_t *coll, const perf_layout_t *l, const void *s,
                                 void *r, int iters)
{
    tcomms_status_t st = TCOMMS_SUCCESS;
    for (int i = 0; i < iters && st == TCOMMS_SUCCESS; i++)
        st = coll->run(&b->x, l, s, r, b->a->blocking ? NULL : &b->works);
    tcomms_status_t wst = wait_all(b);
    return st != TCOMMS_SUCCESS ? st : wst;
}

/* Microseconds per operation of one form, as this rank measured it. */
static tcomms_status_t time_form(bench_t *b, const perf_coll_t *coll, const perf_layout_t *l, const void *s,
                                 void *r, const char *what, double *us)
{
    tcomms_status_t st = run_iters(b, coll, l, s, r, b->a->warmup);
    if (st != TCOMMS_SUCCESS)
        return fail(b, what, st);
    if ((st = tcomms_barrier(b->x.comm, NULL, NULL)) != TCOMMS_SUCCESS)
        return fail(b, "barrier before timing", st);
    double t0 = now_s();
    st = run_iters(b, coll, l, s, r, b->a->iters);
    double t1 = now_s();
    if (st != TCOMMS_SUCCESS)
        return fail(b, what, st);
    *us = (t1 - t0) * 1e6 / b->a->iters;
    return TCOMMS_SUCCESS;
}

static tcomms_status_t copy_failed(const bench_t *b, const char *what)
{
    fprintf(stderr, "tcomms-perf: rank %d: %s: copying between host and %s memory failed\n", b->x.rank, what,
            b->mem->name);
    return TCOMMS_ERR_SYSTEM;
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
    if (b->mem->upload(r, b->host, l->recv_elems * x->esize) != 0)
        return copy_failed(b, what);
    for (size_t i = 0; i < l->send_elems; i++)
        perf_store(t, b->host, i, perf_send_value(x, coll, x->rank, i));
    if (b->mem->upload(s, b->host, l->send_elems * x->esize) != 0)
        return copy_failed(b, what);
    tcomms_status_t st = coll->run(x, l, s, r, NULL);
    if (st != TCOMMS_SUCCESS)
        return fail(b, what, st);
    if (b->mem->download(b->host, r, l->recv_elems * x->esize) != 0)
        return copy_failed(b, what);
    if (b->a->corrupt && x->rank == 0 && l->recv_elems > 0)
        perf_store(t, b->host, 0, nearbyint(perf_load(t, b->host, 0)) + 64);
    int64_t bad = 0;
    for (size_t i = 0; i < l->recv_elems; i++)
        bad += !perf_match(t, perf_load(t, b->host, i), coll->expected(x, l, i));
    *wrong = bad;
    return TCOMMS_SUCCESS;
}

/* Every rank's time per -a (rank 0's, average, minimum, maximum) and the sum of wrong elements. */
static tcomms_status_t agree(bench_t *b, double t[2], int64_t w[2])
{
    static const tcomms_op_t time_ops[] = {TCOMMS_SUM, TCOMMS_AVG, TCOMMS_MIN, TCOMMS_MAX};
    if (b->a->average == 0 && b->x.rank != 0)
        t[0] = t[1] = 0; /* -a 0: the sum is rank 0's time */
    tcomms_status_t st = tcomms_all_reduce(b->x.comm, t, t, 2, TCOMMS_FLOAT64, time_ops[b->a->average], NULL, NULL);
    if (st != TCOMMS_SUCCESS)
        return fail(b, "all_reduce of the times", st);
    st = tcomms_all_reduce(b->x.comm, w, w, 2, TCOMMS_INT64, TCOMMS_SUM, NULL, NULL);
    return st == TCOMMS_SUCCESS ? st : fail(b, "all_reduce of the wrong counts", st);
}

/* Buffers of form 0 (out of place) or 1 (in place: one buffer, with the send and receive data at offsets). */
static void locate(const bench_t *b, const perf_coll_t *coll, const perf_layout_t *l, int form, void **s, void **r)
{
    unsigned char *base = b->recv;
    if (form == 0) {
        *r = b->recv;
        *s = (coll->flags & PERF_ONE_BUFFER) ? b->recv : b->send;
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
    perf_row_t row = {.coll = coll->name, .bytes = l.bytes, .count = l.count,
                      .redop = (coll->flags & PERF_REDUCES) ? tcomms_op_name(b->x.op) : "none",
                      .root = (coll->flags & PERF_ROOTED) ? b->x.root : -1};
    int runs = !(coll->flags & PERF_PAIRWISE) || b->x.nranks > 1; /* a rank cannot message itself */
    double t[2] = {0, 0};
    int64_t w[2] = {0, 0};
    for (int form = 0; form < 2; form++) {
        perf_cell_t *c = &row.cell[form];
        c->state = form == 1 && !(coll->flags & PERF_IN_PLACE) ? PERF_CELL_ABSENT
                   : runs                                       ? PERF_CELL_MEASURED
                                                                : PERF_CELL_NA;
        if (c->state != PERF_CELL_MEASURED)
            continue;
        char what[96];
        snprintf(what, sizeof what, "%s %s, %zu B", coll->name, form ? "in place" : "out of place", size);
        void *s, *r;
        locate(b, coll, &l, form, &s, &r);
        tcomms_status_t st = time_form(b, coll, &l, s, r, what, &t[form]);
        if (st == TCOMMS_SUCCESS && b->a->check)
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
    if (b->send)
        b->mem->release(b->send);
    if (b->recv)
        b->mem->release(b->recv);
    free(b->host);
    b->send = b->recv = NULL;
    b->host = NULL;
}

/* Buffers for the largest extents any size of the sweep gives `coll` on this rank. */
static tcomms_status_t alloc_buffers(bench_t *b, const perf_coll_t *coll)
{
    size_t send = 0, recv = 0, es = b->x.esize;
    for (size_t s = b->a->min_bytes; s != PERF_END; s = perf_args_next(b->a, s)) {
        perf_layout_t l = {.vec = b->vec};
        coll->layout(&b->x, s / es, &l);
        send = l.send_elems > send ? l.send_elems : send;
        recv = l.recv_elems > recv ? l.recv_elems : recv;
        recv = l.ip_elems > recv ? l.ip_elems : recv;
    }
    b->send = b->mem->alloc(send * es);
    b->recv = b->mem->alloc(recv * es);
    b->host = malloc((send > recv ? send : recv) * es + 1);
    if (b->send && b->recv && b->host)
        return TCOMMS_SUCCESS;
    fprintf(stderr, "tcomms-perf: rank %d: %s: out of memory for buffers of %zu and %zu bytes\n", b->x.rank,
            coll->name, send * es, recv * es);
    free_buffers(b);
    return TCOMMS_ERR_NO_MEMORY;
}

static tcomms_status_t one_block(bench_t *b, const perf_coll_t *coll, perf_report_t *rep, long long *wrong)
{
    perf_report_begin(rep, coll);
    tcomms_status_t st = alloc_buffers(b, coll);
    for (int cycle = 0; st == TCOMMS_SUCCESS && (b->a->cycles == 0 || cycle < b->a->cycles); cycle++)
        for (size_t s = b->a->min_bytes; st == TCOMMS_SUCCESS && s != PERF_END; s = perf_args_next(b->a, s))
            st = one_row(b, coll, s, rep, wrong);
    free_buffers(b);
    if (st == TCOMMS_SUCCESS)
        perf_report_end(rep, coll);
    return st;
}

tcomms_status_t perf_bench_run(const perf_args_t *a, tcomms_comm_t *comm, const perf_mem_t *mem, perf_report_t *r,
                               long long *wrong)
{
    bench_t b = {.a = a, .mem = mem,
                 .x = {.comm = comm, .root = a->root, .dtype = a->dtype, .op = a->op,
                       .esize = tcomms_dtype_size(a->dtype)}};
    tcomms_comm_rank(comm, &b.x.rank);
    tcomms_comm_size(comm, &b.x.nranks);
    *wrong = 0;
    size_t most = (size_t)(a->iters > a->warmup ? a->iters : a->warmup);
    b.works.h = calloc(2 * most + 2, sizeof *b.works.h);
    b.vec = calloc(PERF_VEC_PER_RANK * (size_t)b.x.nranks, sizeof *b.vec);
    tcomms_status_t st = TCOMMS_SUCCESS;
    if (b.works.h == NULL || b.vec == NULL) {
        fprintf(stderr, "tcomms-perf: out of memory\n");
        st = TCOMMS_ERR_NO_MEMORY;
    }
    for (size_t k = 0; st == TCOMMS_SUCCESS && k < perf_ncolls; k++)
        if (a->coll == NULL || a->coll == &perf_colls[k])
            st = one_block(&b, &perf_colls[k], r, wrong);
    free(b.works.h);
    free(b.vec);
    return st;
}
