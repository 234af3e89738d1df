/* SPDX-License-Identifier: BSD-3-Clause */
/* The sweep of tcomms-perf: for each collective and message size, time both forms (-w warm-ups, then -n timed
 * iterations), check them once, agree on the figures across ranks, and hand the row to the report. */
#ifndef PERF_BENCH_H
#define PERF_BENCH_H

#include <tcomms/tcomms.h>

#include "args.h"
#include "mem.h"
#include "report.h"

/* Run every block `a` asks for on `comm`, with buffers and ordering from `mem` (bound to comm). *wrong gets the
 * number of wrong elements summed over ranks and sizes (the same on every rank). TCOMMS_SUCCESS, or the first
 * error after a message on stderr. */
tcomms_status_t perf_bench_run(const perf_args_t *a, tcomms_comm_t *comm, perf_mem_t *mem, perf_report_t *r,
                               long long *wrong);

#endif
