/* SPDX-License-Identifier: BSD-3-Clause */
/* Output of tcomms-perf (see report.h): the table keeps nccl-tests' exact header, column widths and footer so that
 * scripts written for nccl-tests read it unchanged; JSON repeats every row with full precision. */
#include "report.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void perf_now_str(char *out, size_t len)
{
    time_t now = time(NULL);
    struct tm tm;
    out[0] = '\0';
    if (localtime_r(&now, &tm) != NULL)
        strftime(out, len, "%Y-%m-%d %H:%M:%S", &tm);
}

/* -J's file as nccl-tests opens it: never over an existing file, but FILE.0, FILE.1, ... instead. */
static FILE *open_ncjson(const char *path)
{
    char try[4096];
    snprintf(try, sizeof try, "%s", path);
    FILE *f;
    for (int k = 0; (f = fopen(try, "wx")) == NULL; k++) {
        if (errno != EEXIST || k > 9999) {
            printf("# skipping json output; %s not accessible\n", try);
            return NULL;
        }
        snprintf(try, sizeof try, "%s.%d", path, k);
    }
    printf("# Writing JSON output to %s\n", try);
    return f;
}

void perf_float_str(double v, int width, char *out, size_t len)
{
    static const char *const fmts[] = {"%.2f", "%.1f", "%.0f"};
    for (size_t k = 0; k < sizeof fmts / sizeof fmts[0]; k++) {
        int n = snprintf(out, len, fmts[k], v);
        if (n >= 0 && n <= width)
            return;
    }
    snprintf(out, len, width >= 7 ? "%.1e" : "%.0e", v);
}

/* Clear the progress line before stdout writes over the same terminal line. */
static void progress_clear(perf_report_t *r)
{
    if (r->progress && r->done > 0) {
        fprintf(stderr, "\r%40s\r", "");
        fflush(stderr);
    }
}

static void progress_show(perf_report_t *r)
{
    if (!r->progress)
        return;
    if (r->total > 0)
        fprintf(stderr, "\rtcomms-perf: %zu / %zu sizes", r->done, r->total);
    else
        fprintf(stderr, "\rtcomms-perf: %zu sizes", r->done);
    fflush(stderr);
}

void perf_report_init(perf_report_t *r, int active, const perf_args_t *a, const char *backend, const char *device,
                      const char *label, int nranks, const char *devices)
{
    *r = (perf_report_t){.active = active, .args = a, .backend = backend, .device = device, .label = label,
                         .nranks = nranks, .devices = devices, .progress = active && isatty(STDERR_FILENO),
                         .min_bw = -1};
    size_t ncolls = (size_t)__builtin_popcount(a->colls);
    r->total = a->cycles > 0 ? ncolls * (size_t)a->cycles * perf_args_nsizes(a) : 0; /* per type, op and root */
    const char *min_bw = getenv("NCCL_TESTS_MIN_BW");
    if (min_bw != NULL)
        r->min_bw = atof(min_bw);
    perf_now_str(r->start_time, sizeof r->start_time);
    if (!active)
        return;
    if (a->notes[0] != '\0')
        fprintf(stderr, "tcomms-perf: note: %s\n", a->notes);
    if (a->nccl_json != NULL)
        r->ncjson = open_ncjson(a->nccl_json);
    printf("# tcomms-perf %s backend %s device %s nranks %d\n", tcomms_version(), backend, device, nranks);
}

void perf_report_free(perf_report_t *r)
{
    progress_clear(r);
    if (r->ncjson != NULL)
        fclose(r->ncjson); /* a run that failed before perf_report_ncjson */
    r->ncjson = NULL;
    free(r->rows);
    r->rows = NULL;
    r->nrows = r->cap = 0;
}

void perf_report_begin(perf_report_t *r, const perf_coll_t *coll)
{
    const perf_args_t *a = r->args;
    r->block_bw = 0;
    r->block_nbw = 0;
    r->block_wrong = 0;
    if (!r->active)
        return;
    progress_clear(r);
    /* nccl-tests' writeDeviceReport and writeResultHeader (src/util.cu), format for format. */
    printf("# Collective test starting: %s_perf\n", coll->name);
    printf("# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d agg iters: %d "
           "validation: %d graph: %d unalign: %d\n", 1, 1, a->min_bytes, a->max_bytes,
           a->step_factor > 1 ? (size_t)a->step_factor : a->step_bytes, a->step_factor > 1 ? "factor" : "bytes",
           a->warmup, a->iters, a->agg, a->check, a->graph, a->unalign);
    if (a->blocking == 1)
        printf("# Blocking Enabled: wait and barrier after each inner iteration (-m) \n");
    if (a->blocking == 2)
        printf("# Blocking Enabled: wait after each inner iteration (-m), no barrier \n");
    if (a->blocking == 3)
        printf("# Blocking Enabled: wait and barrier after each outer iteration (-n); time excludes barrier \n");
    printf("#\n# Using devices\n%s", r->devices ? r->devices : "");
    const char *ts_lbl = a->timestamps ? "timestamp" : "", *ts_fmt = a->timestamps ? "%Y-%m-%d %H:%M:%S" : "";
    const char *time = a->cputime ? "cputime" : "time";
    int ts_pad = a->timestamps ? 19 : 0;
    printf("#\n");
    printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "", "",
           "", "");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "size", "count", "type",
           "redop", "root", time, "algbw", "busbw", "#wrong", time, "algbw", "busbw", "#wrong", ts_pad, ts_lbl);
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "(B)", "(elements)", "", "",
           "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", ts_pad, ts_fmt);
    fflush(stdout);
}

void perf_report_end(perf_report_t *r, const perf_coll_t *coll)
{
    if (!r->active)
        return;
    progress_clear(r);
    /* nccl-tests' writeResultFooter, finalizeFooter and writeErrors (no error: an empty line). */
    double bw = r->block_nbw > 0 ? r->block_bw / (double)r->block_nbw : 0; /* nothing ran: 0, as nccl-tests */
    const char *verdict = r->min_bw == -1 ? "" : bw < r->min_bw * 0.9 ? "FAILED" : "OK";
    r->bw_failed |= verdict[0] == 'F';
    printf("# %-20s : %lld %s\n", "Out of bounds values", r->block_wrong, r->block_wrong ? "FAILED" : "OK");
    printf("# %-20s : %g %s\n", "Avg bus bandwidth", bw, verdict);
    printf("#\n# Collective test concluded: %s_perf\n#\n\n", coll->name);
    fflush(stdout);
    progress_show(r);
}

static void print_cell(const perf_cell_t *c)
{
    char t[32] = "N/A", alg[32] = "N/A", bus[32] = "N/A", wrong[32] = "N/A";
    if (c->state == PERF_CELL_MEASURED) {
        perf_float_str(c->time_us, 7, t, sizeof t);
        perf_float_str(c->algbw, 6, alg, sizeof alg);
        perf_float_str(c->busbw, 6, bus, sizeof bus);
        if (c->wrong >= 0)
            snprintf(wrong, sizeof wrong, "%g", (double)c->wrong); /* nccl-tests' %6g */
    }
    printf("  %7s  %6s  %6s  %6s", t, alg, bus, wrong);
}

int perf_report_row(perf_report_t *r, const perf_row_t *row)
{
    for (int k = 0; k < 2; k++) {
        const perf_cell_t *c = &row->cell[k];
        if (c->state != PERF_CELL_MEASURED)
            continue;
        r->block_bw += c->busbw;
        r->block_nbw++;
        r->block_wrong += c->wrong > 0 ? c->wrong : 0;
        r->all_bw += c->busbw;
        r->all_nbw++;
        r->all_wrong += c->wrong > 0 ? c->wrong : 0;
    }
    if (!r->active)
        return 0;
    if (r->nrows == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 64;
        perf_row_t *rows = realloc(r->rows, cap * sizeof *rows);
        if (rows == NULL)
            return -1;
        r->rows = rows;
        r->cap = cap;
    }
    r->rows[r->nrows++] = *row;
    progress_clear(r);
    r->done++;
    printf("%12zu  %12zu  %8s  %6s  %6d", row->bytes, row->count, perf_type_name(row->dtype), row->redop, row->root);
    print_cell(&row->cell[0]);
    print_cell(&row->cell[1]);
    if (r->args->timestamps) {
        char now[32];
        perf_now_str(now, sizeof now);
        printf("%21s", now);
    }
    printf("\n");
    fflush(stdout);
    progress_show(r);
    return 0;
}

/* ---- JSON ---------------------------------------------------------------------------------------------------- */

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static void json_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.17g", v); /* round-trips every double */
    else
        fputs("null", f);
}

static void json_cell(FILE *f, const perf_cell_t *c)
{
    if (c->state == PERF_CELL_ABSENT) {
        fputs("null", f);
        return;
    }
    int m = c->state == PERF_CELL_MEASURED;
    fputs("{\"time_us\": ", f);
    json_num(f, m ? c->time_us : NAN);
    fputs(", \"algbw\": ", f);
    json_num(f, m ? c->algbw : NAN);
    fputs(", \"busbw\": ", f);
    json_num(f, m ? c->busbw : NAN);
    if (m && c->wrong >= 0)
        fprintf(f, ", \"wrong\": %lld}", c->wrong);
    else
        fputs(", \"wrong\": null}", f);
}

static void json_header(FILE *f, const perf_report_t *r)
{
    const perf_args_t *a = r->args;
    char date[32] = "", host[256] = "";
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm) != NULL)
        strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (gethostname(host, sizeof host - 1) != 0)
        strcpy(host, "unknown");
    fputs("{\n  \"tool\": \"tcomms-perf\", \"version\": ", f);
    json_str(f, tcomms_version());
    fputs(", \"date\": ", f);
    json_str(f, date);
    fputs(", \"host\": ", f);
    json_str(f, host);
    fputs(",\n  \"backend\": ", f);
    json_str(f, r->backend);
    fputs(", \"device\": ", f);
    json_str(f, r->device);
    fprintf(f, ", \"nranks\": %d, \"label\": ", r->nranks);
    json_str(f, r->label);
    fprintf(f, ",\n  \"dtype\": \"%s\", \"op\": \"%s\", \"root\": %d, \"iters\": %d, \"warmup\": %d, \"check\": %d, "
               "\"blocking\": %d, \"average\": %d,\n",
            tcomms_dtype_name(a->dtypes[0]), tcomms_op_name(a->ops[0]), a->root, a->iters, a->warmup, a->check,
            a->blocking, a->average);
}

int perf_report_json(const perf_report_t *r, const char *path)
{
    if (!r->active)
        return 0;
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        perror(path);
        return -1;
    }
    json_header(f, r);
    fputs("  \"results\": [", f);
    double bw = 0;
    size_t nbw = 0;
    long long wrong = 0;
    for (size_t i = 0; i < r->nrows; i++) {
        const perf_row_t *row = &r->rows[i];
        fprintf(f, "%s\n    {\"collective\": \"%s\", \"size\": %zu, \"count\": %zu, \"type\": \"%s\", "
                   "\"redop\": \"%s\", \"root\": %d,\n     \"oop\": ",
                i ? "," : "", row->coll, row->bytes, row->count, perf_type_name(row->dtype), row->redop, row->root);
        json_cell(f, &row->cell[0]);
        fputs(",\n     \"ip\":  ", f);
        json_cell(f, &row->cell[1]);
        fputs("}", f);
        for (int k = 0; k < 2; k++) {
            if (row->cell[k].state != PERF_CELL_MEASURED)
                continue;
            bw += row->cell[k].busbw;
            nbw++;
            wrong += row->cell[k].wrong > 0 ? row->cell[k].wrong : 0;
        }
    }
    fputs(r->nrows ? "\n  ],\n  \"avg_busbw\": " : "],\n  \"avg_busbw\": ", f);
    json_num(f, nbw ? bw / (double)nbw : NAN);
    if (r->args->check)
        fprintf(f, ", \"wrong\": %lld\n}\n", wrong);
    else
        fputs(", \"wrong\": null\n}\n", f);
    if (ferror(f) | fclose(f)) {
        perror(path);
        return -1;
    }
    return 0;
}
