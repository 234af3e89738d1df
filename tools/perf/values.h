/* SPDX-License-Identifier: BSD-3-Clause */
/* What tcomms-perf puts in buffers and what it expects back: fill patterns of small integers (exact in every
 * dtype), the expected reduction computed independently in double, and our own element codecs (float16 and
 * bfloat16 included) so the check never relies on the library's arithmetic. */
#ifndef PERF_VALUES_H
#define PERF_VALUES_H

#include <stddef.h>

#include "colls.h"

/* Input of a reduction at (rank, i): -2..2 (0..4 for uint8); for prod, +-1 except +-2 on rank i % nranks. */
double perf_red_value(const perf_ctx_t *c, int rank, size_t i);
/* Input of data movement at (rank, i): 1..101, different between ranks (below 101) at the same index. */
double perf_mov_value(int rank, size_t i);
/* The op over every rank of perf_red_value(c, rank, i), with the dtype's arithmetic: integers wrap to their width,
 * avg divides by nranks (truncating toward zero for integers). */
double perf_reduced(const perf_ctx_t *c, size_t i);

/* Element i of a buffer of `dtype`: store an integral value (integers wrap to their width), load as double. */
void perf_store(tcomms_dtype_t dtype, void *buf, size_t i, double v);
double perf_load(tcomms_dtype_t dtype, const void *buf, size_t i);
/* got matches want: exactly for integer dtypes, within a tolerance of the dtype's precision for floating ones. */
int perf_match(tcomms_dtype_t dtype, double got, double want);

#endif
