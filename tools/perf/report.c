/* Output of tcomms-perf (see report.h): the table keeps nccl-tests' exact header, column widths and footer so that
 * scripts written for nccl-tests read it unchanged; JSON repeats every row with full precision. */
#include "report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Type names as nccl-tests prints them (the library's names are float16, float32, ...). */
static const char *const type_names[TCOMMS_DTYPE_COUNT] = {
    [TCOMMS_INT8] = "int8",     [TCOMMS_UINT8] = "uint8",        [TCOMMS_INT32] = "int32",
    [TCOMMS_INT64] = "int64",   [TCOMMS_FLOAT16] = "half",       [TCOMMS_BFLOAT16] = "bfloat16",
    [TCOMMS_FLOAT32] = "float", [TCOMMS_FLOAT64] = "double",
};

void perf_float_str(double v, int width, char *out, size_t len)
{
    static const char *const fmts[] = {"%.2f", "%.1f", "%.0f"};
    for (size_t k = 0; k < sizeof fmts / sizeof fmts[0]; k++) {
        int n = snprintf(out, len, fmts[k], v);
        if (n >= 0 && n <= width)
            return;
    }
    snprintf(out, len, "%.1e", v);
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
                      const char *label, int nranks)
{
    *r = (perf_report_t){.active = active, .args = a, .backend = backend, .device = device, .label = label,
                         .nranks = nranks, .progress = active && isatty(STDERR_FILENO)};
    size_t ncolls = (size_t)__builtin_popcount(a->colls);
    r->total = a->cycles > 0 ? ncolls * (size_t)a->cycles * perf_args_nsizes(a) : 0;
    if (active)
        printf("# tcomms-perf %s backend %s device %s nranks %d\n", tcomms_version(), backend, device, nranks);
}

void perf_report_free(perf_report_t *r)
{
    progress_clear(r);
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
    printf("# Collective test starting: %s_perf\n", coll->name);
    if (a->step_factor > 1)
        printf("# minBytes %zu maxBytes %zu step: %d(factor)", a->min_bytes, a->max_bytes, a->step_factor);
    else
        printf("# minBytes %zu maxBytes %zu step: %zu(bytes)", a->min_bytes, a->max_bytes, a->step_bytes);
    printf(" warmup iters: %d iters: %d agg iters: 1 validation: %d graph: %d\n", a->warmup, a->iters, a->check,
           a->graph);
    printf("#\n"
           "#                                                              out-of-place"
           "                       in-place\n"
           "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw"
           "   busbw  #wrong\n"
           "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)"
           "  (GB/s)\n");
    fflush(stdout);
}

void perf_report_end(perf_report_t *r, const perf_coll_t *coll)
{
    if (!r->active)
        return;
    progress_clear(r);
    printf("# Out of bounds values : %lld %s\n", r->block_wrong, r->block_wrong ? "FAILED" : "OK");
    if (r->block_nbw > 0)
        printf("# Avg bus bandwidth    : %g\n", r->block_bw / (double)r->block_nbw);
    else
        printf("# Avg bus bandwidth    : N/A\n"); /* nothing could run (sendrecv on one rank) */
    printf("#\n# Collective test concluded: %s_perf\n", coll->name);
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
            snprintf(wrong, sizeof wrong, "%lld", c->wrong);
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
    printf("%12zu  %12zu  %8s  %6s  %6d", row->bytes, row->count, type_names[r->args->dtype], row->redop,
           row->root);
    print_cell(&row->cell[0]);
    print_cell(&row->cell[1]);
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
        fprintf(f, "%.6g", v);
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
            tcomms_dtype_name(a->dtype), tcomms_op_name(a->op), a->root, a->iters, a->warmup, a->check,
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
                i ? "," : "", row->coll, row->bytes, row->count, type_names[r->args->dtype], row->redop, row->root);
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
