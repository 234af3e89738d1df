/* SPDX-License-Identifier: BSD-3-Clause */
/* What tcomms-perf prints: nccl-tests' header, rows and footer on stdout (rank 0), the progress line on a terminal's
 * stderr, and the JSON file of -J. The sweep (bench.c) hands it finished rows; only rank 0's report is active. */
#ifndef PERF_REPORT_H
#define PERF_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include "args.h"

enum perf_cell_state {
    PERF_CELL_ABSENT,  /* the collective has no such form: N/A, and "ip": null in JSON */
    PERF_CELL_NA,      /* the form exists but cannot run here (sendrecv on one rank): N/A, JSON nulls */
    PERF_CELL_MEASURED
};

/* One form (out-of-place or in-place) of one row, as agreed by every rank. */
typedef struct perf_cell {
    enum perf_cell_state state;
    double time_us, algbw, busbw;
    long long wrong; /* -1: not checked (-c 0) */
} perf_cell_t;

typedef struct perf_row {
    const char *coll;
    size_t bytes, count;
    tcomms_dtype_t dtype;
    const char *redop; /* "none" for collectives that do not reduce */
    int root;          /* -1 for unrooted collectives */
    perf_cell_t cell[2]; /* out-of-place, in-place */
} perf_row_t;

typedef struct perf_report {
    int active; /* rank 0 prints and keeps rows; the other ranks' reports do nothing */
    const perf_args_t *args;
    const char *backend, *device, *label;
    int nranks;
    const char *devices; /* nccl-tests' "#  Rank ..." lines of every rank, in rank order */
    char start_time[32]; /* nccl-tests' time format, for -J */
    FILE *ncjson;        /* -J's file, opened at the start as nccl-tests does; written at the end */
    double min_bw;       /* NCCL_TESTS_MIN_BW (-1: unset): an average busbw under 0.9 x this fails the run */
    int bw_failed;       /* some block's average busbw was under it */
    double all_bw;       /* sum and number of busbw values, and wrong elements, over the whole run (-J) */
    size_t all_nbw;
    long long all_wrong;
    perf_row_t *rows; /* every row printed, for the JSON file */
    size_t nrows, cap;
    double block_bw; /* sum and number of busbw values, and wrong elements, in the current block */
    size_t block_nbw;
    long long block_wrong;
    int progress; /* stderr is a terminal: show sizes done / total */
    size_t done, total; /* total 0: unknown (-N 0) */
} perf_report_t;

/* Start a report, open -J's file and print the first lines. `backend`, `device`, `label` and `devices` (every
 * rank's "#  Rank" line) must outlive it. */
void perf_report_init(perf_report_t *r, int active, const perf_args_t *a, const char *backend, const char *device,
                      const char *label, int nranks, const char *devices);
void perf_report_free(perf_report_t *r);
/* The lines before and after a collective's rows. */
void perf_report_begin(perf_report_t *r, const perf_coll_t *coll);
void perf_report_end(perf_report_t *r, const perf_coll_t *coll);
/* Print a row, keep it for JSON, and advance the progress line. 0, or -1 when out of memory. */
int perf_report_row(perf_report_t *r, const perf_row_t *row);
/* Write every row to `path` as the JSON object of the contract. 0, or -1 with a message on stderr. */
int perf_report_json(const perf_report_t *r, const char *path);
/* -J: write nccl-tests' JSON layout (version 3) to the file opened at the start and close it (ncjson.c). 0, or -1
 * with a message on stderr. */
int perf_report_ncjson(perf_report_t *r);
/* nccl-tests' "%Y-%m-%d %H:%M:%S" local time of now. */
void perf_now_str(char *out, size_t len);

/* nccl-tests' getFloatStr rule: %.2f, %.1f, %.0f, then %.1e, whichever first fits `width` characters. */
void perf_float_str(double v, int width, char *out, size_t len);

#endif
