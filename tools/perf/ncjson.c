/* SPDX-License-Identifier: BSD-3-Clause */
/* -J: the JSON file of nccl-tests (src/util.cu, JSON_FILE_VERSION 3), key for key and in its order, so that tools
 * written for nccl-tests' files read ours. Written at the end from the rows the report kept; several collectives
 * (`all`) share one "results" list, each row naming its collective in "experiment_name". */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "report.h"

extern char **environ;

/* nccl-tests' sanitizeJson: escape " \ / tab newline; stop at other control or non-ASCII bytes. */
static void str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s != NULL && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\' || c == '/')
            fprintf(f, "\\%c", c);
        else if (c == '\t' || c == '\n')
            fputs(c == '\t' ? "\\t" : "\\n", f);
        else if (c < 0x20 || c >= 0x7f)
            break;
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* nccl-tests' jsonDouble: %lf, NaN as the string "nan". */
static void num(FILE *f, double v)
{
    if (v != v)
        fputs("\"nan\"", f);
    else
        fprintf(f, "%lf", v);
}

static void devices(FILE *f, const char *lines)
{
    fputs(",\"devices\":[", f);
    int first = 1;
    for (const char *p = lines; p != NULL && *p;) {
        int rank = 0, group = 0, pid = 0, device = 0, end = 0;
        char host[1025] = "", hex[129] = "", info[1025] = "";
        /* nccl-tests' parseRankInfo format */
        if (sscanf(p, "#  Rank %d Group %d Pid %d on %1024s device %d [%128[^]]] %1024[^\n]\n%n", &rank, &group,
                   &pid, host, &device, hex, info, &end) < 7 || end == 0)
            break;
        fprintf(f, "%s{\"rank\":%d,\"group\":%d,\"pid\":%d,\"hostname\":", first ? "" : ",", rank, group, pid);
        str(f, host);
        fprintf(f, ",\"device\":%d,\"device_hex\":", device);
        str(f, hex);
        fputs(",\"device_info\":", f);
        str(f, info);
        fputc('}', f);
        first = 0;
        p += end;
    }
    fputc(']', f);
}

static void config(FILE *f, const perf_report_t *r)
{
    const perf_args_t *a = r->args;
    fprintf(f, ",\"config\":{\"nthreads\":1,\"ngpus\":1,\"minimum_bytes\":%zu,\"maximum_bytes\":%zu", a->min_bytes,
            a->max_bytes);
    if (a->step_factor > 1)
        fprintf(f, ",\"step_factor\":%d", a->step_factor);
    else
        fprintf(f, ",\"step_bytes\":%zu", a->step_bytes);
    fprintf(f, ",\"warmup_iters\":%d,\"iterations\":%d,\"aggregated_iterations\":%d,\"validation\":%d,\"graph\":%d",
            a->warmup, a->iters, a->agg, a->check, a->graph);
    fprintf(f, ",\"blocking_collectives\":\"%s\",\"per_iter_timing\":\"false\",\"per_iter_skip\":0"
               ",\"parallel_init\":\"false\"", a->blocking ? "true" : "false");
    devices(f, r->devices);
    fputc('}', f);
}

/* One form of a row: nccl-tests' object, or null where the form does not run here. */
static void cell(FILE *f, const perf_report_t *r, const perf_cell_t *c, const char *key)
{
    fprintf(f, ",\"%s\":", key);
    if (c->state != PERF_CELL_MEASURED) {
        fputs("null", f);
        return;
    }
    fprintf(f, "{\"%s\":", r->args->cputime ? "cpu_time" : "time");
    num(f, c->time_us);
    fputs(",\"alg_bw\":", f);
    num(f, c->algbw);
    fputs(",\"bus_bw\":", f);
    num(f, c->busbw);
    fputs(",\"nwrong\":", f);
    if (c->wrong >= 0)
        num(f, (double)c->wrong);
    else
        fputs("null", f);
    fputc('}', f);
}

static void results(FILE *f, const perf_report_t *r)
{
    fputs(",\"results\":[", f);
    for (size_t i = 0; i < r->nrows; i++) {
        const perf_row_t *row = &r->rows[i];
        char root[16];
        snprintf(root, sizeof root, "%6i", row->root); /* a padded string, as nccl-tests writes it */
        fprintf(f, "%s{\"size\":%zu,\"count\":%zu,\"type\":", i ? "," : "", row->bytes, row->count);
        str(f, perf_type_name(row->dtype));
        fputs(",\"redop\":", f);
        str(f, row->redop);
        fputs(",\"root\":", f);
        str(f, root);
        cell(f, r, &row->cell[0], "out_of_place");
        cell(f, r, &row->cell[1], "in_place");
        fprintf(f, ",\"actual_iterations\":%d,\"experiment_name\":\"%s_perf\"}", r->args->iters, row->coll);
    }
    fputc(']', f);
}

int perf_report_ncjson(perf_report_t *r)
{
    FILE *f = r->ncjson;
    if (!r->active || f == NULL)
        return 0;
    r->ncjson = NULL;
    const perf_args_t *a = r->args;
    fprintf(f, "{\"version\":3,\"start_time\":");
    str(f, r->start_time);
    fputs(",\"args\":[", f);
    for (int k = 0; k < a->argc; k++) {
        fputs(k ? "," : "", f);
        str(f, a->argv[k]);
    }
    fputs("],\"env\":[", f);
    for (char **e = environ; e != NULL && *e != NULL; e++) {
        fputs(e != environ ? "," : "", f);
        str(f, *e);
    }
    fputs("],\"nccl_version\":0", f); /* no NCCL: tcomms' own version is in the args' program and stdout */
    config(f, r);
    results(f, r);
    double bw = r->all_nbw ? r->all_bw / (double)r->all_nbw : 0;
    fprintf(f, ",\"out_of_bounds\":{\"count\":%lld,\"okay\":\"%s\"}", r->all_wrong, r->all_wrong ? "false" : "true");
    fputs(",\"average_bus_bandwidth\":{\"bandwidth\":", f);
    num(f, bw);
    fputs(",\"okay\":", f);
    fputs(r->min_bw == -1 ? "\"unchecked\"" : bw >= r->min_bw * 0.9 ? "\"true\"" : "\"false\"", f);
    char end[32];
    perf_now_str(end, sizeof end);
    fputs("},\"errors\":[],\"end_time\":", f);
    str(f, end);
    fputs("}", f);
    if (ferror(f) | fclose(f)) {
        perror(a->nccl_json);
        return -1;
    }
    return 0;
}
