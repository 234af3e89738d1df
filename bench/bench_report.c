/* SPDX-License-Identifier: BSD-3-Clause */
/* The output of the reference programs (see bench_common.h): tcomms-perf's table on stdout, block by block, and its
 * JSON file (--json or -J: tcomms' JSON) at the end, both from rank 0. The column formats and the float rule (as many decimals as fit the
 * column) are nccl-tests', so the same parsers read tcomms-perf, mpi_bench and nccl_bench. */
#include "bench_common.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct bench_row {
    const bench_coll_t *coll;
    size_t bytes, count;
    bench_fig_t side[2];
} bench_row_t;

struct bench_report {
    const bench_opts_t *o;
    const char *tool, *backend, *device, *library;
    int nranks;
    const bench_coll_t *coll;
    bench_row_t *rows;
    size_t nrows, cap;
    double block_bw, all_bw;
    size_t block_n, all_n;
    long block_wrong, all_wrong;
};

/* GB/s (1e9 bytes/s) of `bytes` per `us` microseconds; times the collective's factor for the bus bandwidth. */
static double algbw(size_t bytes, double us)
{
    return us > 0 ? bytes / us / 1e3 : 0.0;
}

static double busbw(const bench_report_t *r, const bench_coll_t *k, size_t bytes, double us)
{
    double n = r->nranks, f = k->busbw == 2 ? 2 * (n - 1) / n : k->busbw == 1 ? (n - 1) / n : 1.0;
    return algbw(bytes, us) * f;
}

/* nccl-tests' rule: as many decimals as fit the column. */
static const char *fmt(char *s, int width, double v)
{
    if (snprintf(s, 32, "%.2f", v) > width && snprintf(s, 32, "%.1f", v) > width && snprintf(s, 32, "%.0f", v) > width)
        snprintf(s, 32, width >= 7 ? "%.1e" : "%.0e", v);
    return s;
}

bench_report_t *bench_report_new(const bench_opts_t *o, const char *tool, const char *backend, const char *device,
                                 const char *library, int nranks)
{
    bench_report_t *r = calloc(1, sizeof *r);
    if (r == NULL)
        return NULL;
    *r = (bench_report_t){.o = o, .tool = tool, .backend = backend, .device = device, .library = library,
                          .nranks = nranks};
    printf("# %s %s backend %s device %s nranks %d\n# %s\n", tool, BENCH_VERSION, backend, device, nranks, library);
    return r;
}

void bench_report_begin(bench_report_t *r, const bench_coll_t *coll)
{
    if (r == NULL)
        return;
    const bench_opts_t *o = r->o;
    r->coll = coll;
    r->block_bw = 0, r->block_n = 0, r->block_wrong = 0;
    printf("# Collective test starting: %s_perf\n", coll->name);
    printf("# minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d agg iters: 1 validation: %d "
           "graph: %d\n#\n", o->minbytes, o->maxbytes, o->stepfactor > 1 ? o->stepfactor : o->stepbytes,
           o->stepfactor > 1 ? "factor" : "bytes", o->warmup, o->iters, o->check, o->graph);
    const char *t = o->cputime ? "cputime" : "time"; /* as tcomms-perf -C labels it */
    printf("#                                                              out-of-place                       in-place\n"
           "#       size         count      type   redop    root  %7s   algbw   busbw  #wrong  %7s   algbw   busbw  #wrong\n"
           "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)\n",
           t, t);
}

void bench_report_row(bench_report_t *r, const bench_layout_t *l, const bench_fig_t *oop, const bench_fig_t *ip)
{
    if (r == NULL)
        return;
    const bench_coll_t *k = r->coll;
    const bench_opts_t *o = r->o;
    printf("%12zu  %12zu  %8s  %6s  %6d", l->bytes, l->count, bench_dtypes[o->dtype].name,
           k->flags & B_REDUCES ? bench_op_names[o->op] : "none", k->flags & B_ROOTED ? o->root : -1);
    const bench_fig_t *side[2] = {oop, ip};
    for (int s = 0; s < 2; s++) {
        char t[32], a[32], b[32], w[32] = "N/A";
        if (!side[s]->valid) {
            printf("  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
            continue;
        }
        double bus = busbw(r, k, l->bytes, side[s]->time_us), alg = algbw(l->bytes, side[s]->time_us);
        if (side[s]->wrong >= 0)
            snprintf(w, sizeof w, "%ld", side[s]->wrong);
        printf("  %7s  %6s  %6s  %6s", fmt(t, 7, side[s]->time_us), fmt(a, 6, alg), fmt(b, 6, bus), w);
        r->block_bw += bus, r->block_n++;
        r->all_bw += bus, r->all_n++;
        r->block_wrong += side[s]->wrong > 0 ? side[s]->wrong : 0;
    }
    printf("\n");
    fflush(stdout);
    if (r->nrows == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 64;
        bench_row_t *rows = realloc(r->rows, cap * sizeof *rows);
        if (rows == NULL)
            return; /* the JSON lacks the row; the table has it */
        r->rows = rows, r->cap = cap;
    }
    r->rows[r->nrows++] = (bench_row_t){k, l->bytes, l->count, {*oop, *ip}};
}

void bench_report_end(bench_report_t *r)
{
    if (r == NULL)
        return;
    r->all_wrong += r->block_wrong;
    printf("# Out of bounds values : %ld %s\n", r->block_wrong, r->block_wrong ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %g\n#\n", r->block_n ? r->block_bw / r->block_n : 0.0);
    printf("# Collective test concluded: %s_perf\n", r->coll->name);
    fflush(stdout);
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static void json_fig(FILE *f, const bench_report_t *r, const bench_row_t *row, const bench_fig_t *g)
{
    if (!g->valid) {
        fputs("null", f);
        return;
    }
    double alg = algbw(row->bytes, g->time_us), bus = busbw(r, row->coll, row->bytes, g->time_us);
    fprintf(f, "{\"time_us\": %.6g, \"algbw\": %.6g, \"busbw\": %.6g, \"wrong\": ", g->time_us, alg, bus);
    if (g->wrong >= 0)
        fprintf(f, "%ld}", g->wrong);
    else
        fputs("null}", f);
}

static int write_json(const bench_report_t *r)
{
    const bench_opts_t *o = r->o;
    FILE *f = fopen(o->json, "w");
    if (f == NULL)
        return -1;
    char date[32] = "", host[256] = "";
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    gethostname(host, sizeof host - 1);
    fprintf(f, "{\n  \"tool\": ");
    json_str(f, r->tool);
    fprintf(f, ", \"version\": \"%s\", \"date\": \"%s\", \"host\": ", BENCH_VERSION, date);
    json_str(f, host);
    fprintf(f, ",\n  \"backend\": ");
    json_str(f, r->backend);
    fprintf(f, ", \"device\": ");
    json_str(f, r->device);
    fprintf(f, ", \"nranks\": %d, \"label\": ", r->nranks);
    json_str(f, o->label ? o->label : r->backend);
    fprintf(f, ", \"library\": ");
    json_str(f, r->library);
    fprintf(f, ",\n  \"dtype\": \"%s\", \"op\": \"%s\", \"root\": %d, \"iters\": %d, \"warmup\": %d, \"check\": %d, "
               "\"blocking\": %d, \"average\": %d,\n  \"results\": [",
            bench_dtypes[o->dtype].tname, bench_op_names[o->op], o->root, o->iters, o->warmup, o->check,
            o->blocking, o->average);
    for (size_t i = 0; i < r->nrows; i++) {
        const bench_row_t *row = &r->rows[i];
        const bench_coll_t *k = row->coll;
        fprintf(f, "%s\n    {\"collective\": \"%s\", \"size\": %zu, \"count\": %zu, \"type\": \"%s\", "
                   "\"redop\": \"%s\", \"root\": %d,\n     \"oop\": ", i ? "," : "", k->name, row->bytes,
                row->count, bench_dtypes[o->dtype].name, k->flags & B_REDUCES ? bench_op_names[o->op] : "none",
                k->flags & B_ROOTED ? o->root : -1);
        json_fig(f, r, row, &row->side[0]);
        fprintf(f, ",\n     \"ip\": ");
        json_fig(f, r, row, &row->side[1]);
        fputc('}', f);
    }
    fprintf(f, "\n  ],\n  \"avg_busbw\": %.6g, \"wrong\": ", r->all_n ? r->all_bw / r->all_n : 0.0);
    if (o->check)
        fprintf(f, "%ld\n}\n", r->all_wrong);
    else
        fputs("null\n}\n", f);
    return fclose(f) == 0 ? 0 : -1;
}

long bench_report_finish(bench_report_t *r)
{
    if (r == NULL)
        return 0;
    long wrong = r->all_wrong;
    if (r->o->json && write_json(r) != 0) {
        fprintf(stderr, "%s: cannot write %s\n", r->tool, r->o->json);
        wrong = wrong ? wrong : -1;
    }
    free(r->rows);
    free(r);
    return wrong;
}
