/* SPDX-License-Identifier: BSD-3-Clause */
/* Integer AVG on the CPU backends, exact: the core reduces a copy widened to int64 (int64 itself as two int64
 * words) and narrows this rank's result into the caller's buffer once the operation has completed (work.c). */
#ifndef TC_AVG_H
#define TC_AVG_H

#include <tcomms/backend.h>

typedef struct tc_wide_avg tc_wide_avg_t;

/* For an integer AVG reduction of a communicator of `size` > 1 ranks (the caller routes only CPU-backend calls
 * here), rewrite the validated `a` to reduce a widened copy of its send buffer and set *out to what
 * tc_wide_avg_end needs; anything else is left alone with *out = NULL. Every rank decides alike from the call
 * alone. TCOMMS_ERR_NO_MEMORY (or INVALID_ARG for a copy beyond the address space) when the copy cannot be
 * made. */
tcomms_status_t tc_wide_avg_start(tcomms_coll_args_t *a, int rank, int size, tc_wide_avg_t **out);
/* The operation ended with `status` and its backend no longer touches the copy: on success write this rank's
 * result into the caller's buffer; free the copy either way. */
void tc_wide_avg_end(tc_wide_avg_t *w, tcomms_status_t status);
/* The mean of n int64 values, rounded toward zero, from the sums of their high and low words (value = high *
 * 2^32 + low, 0 <= low < 2^32), for n in [1, 2^30]. */
int64_t tc_mean_from_words(int64_t high_sum, int64_t low_sum, int n);

#endif
