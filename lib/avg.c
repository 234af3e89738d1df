/* SPDX-License-Identifier: BSD-3-Clause */
/* Integer AVG, exact (avg.h). The sum of a few int8 values already wraps in int8, and the backends' AVG is a SUM
 * finished by a division, so the core reduces int64 copies instead: int8, uint8 and int32 widen to one int64 each
 * and stay an AVG (the backends' division of an exact int64 sum truncates toward zero, as defined); an int64 splits
 * into a signed high and an unsigned low 32-bit word whose int64 SUMs cannot overflow below 2^31 ranks, and the core
 * divides. The result lands where the in-place form of the call puts it inside the copy. */
#include <stdlib.h>

#include "avg.h"
#include "error.h"

struct tc_wide_avg {
    void *user;            /* the caller's recvbuf for this rank's result; NULL where it gets none */
    tcomms_dtype_t dtype;  /* the caller's dtype */
    size_t count;          /* elements of this rank's result */
    int size;
    const int64_t *result; /* where the result lands inside `wide` */
    int64_t *wide;
    size_t v[];            /* int64 reduce_scatter_v: recvcounts and displacements in words (2 x size) */
};

static int is_integer(tcomms_dtype_t d)
{
    return d == TCOMMS_INT8 || d == TCOMMS_UINT8 || d == TCOMMS_INT32 || d == TCOMMS_INT64;
}

static void widen(int64_t *out, const void *in, size_t n, tcomms_dtype_t dtype)
{
    switch (dtype) {
    case TCOMMS_INT8: for (size_t i = 0; i < n; i++) out[i] = ((const int8_t *)in)[i]; break;
    case TCOMMS_UINT8: for (size_t i = 0; i < n; i++) out[i] = ((const uint8_t *)in)[i]; break;
    case TCOMMS_INT32: for (size_t i = 0; i < n; i++) out[i] = ((const int32_t *)in)[i]; break;
    default:
        for (size_t i = 0; i < n; i++) {
            int64_t v = ((const int64_t *)in)[i];
            int64_t low = (int64_t)((uint64_t)v & 0xffffffffu);
            out[2 * i] = (v - low) / 4294967296; /* exact: v - low is a multiple of 2^32 */
            out[2 * i + 1] = low;
        }
        break;
    }
}

int64_t tc_mean_from_words(int64_t high_sum, int64_t low_sum, int n)
{
    /* total = high_sum * 2^32 + low_sum may need 95 bits. With high_sum = qh * n + rh (0 <= rh < n), the rest
     * rh * 2^32 + low_sum is below n * 2^33, so it divides in 64 bits: floor(total / n) = qh * 2^32 + r / n. */
    int64_t qh = high_sum / n, rh = high_sum % n;
    if (rh < 0) {
        qh -= 1;
        rh += n;
    }
    uint64_t r = ((uint64_t)rh << 32) + (uint64_t)low_sum;
    uint64_t floor_bits = ((uint64_t)qh << 32) + r / (uint64_t)n; /* modulo 2^64; the mean itself fits */
    int64_t mean = floor_bits <= INT64_MAX ? (int64_t)floor_bits : -(int64_t)(~floor_bits) - 1;
    return mean < 0 && r % (uint64_t)n != 0 ? mean + 1 : mean; /* toward zero, as C's division */
}

static void narrow(const tc_wide_avg_t *w)
{
    const int64_t *r = w->result;
    switch (w->dtype) {
    case TCOMMS_INT8: for (size_t i = 0; i < w->count; i++) ((int8_t *)w->user)[i] = (int8_t)r[i]; break;
    case TCOMMS_UINT8: for (size_t i = 0; i < w->count; i++) ((uint8_t *)w->user)[i] = (uint8_t)r[i]; break;
    case TCOMMS_INT32: for (size_t i = 0; i < w->count; i++) ((int32_t *)w->user)[i] = (int32_t)r[i]; break;
    default:
        for (size_t i = 0; i < w->count; i++)
            ((int64_t *)w->user)[i] = tc_mean_from_words(r[2 * i], r[2 * i + 1], w->size);
        break;
    }
}

tcomms_status_t tc_wide_avg_start(tcomms_coll_args_t *a, int rank, int size, tc_wide_avg_t **out)
{
    *out = NULL;
    if (a->op != TCOMMS_AVG || !is_integer(a->dtype) || size < 2)
        return TCOMMS_SUCCESS;
    size_t words = a->dtype == TCOMMS_INT64 ? 2 : 1, in = 0, at = 0; /* elements read; where the result lands */
    switch (a->type) {
    case TCOMMS_COLL_ALL_REDUCE:
    case TCOMMS_COLL_REDUCE: in = a->count; break;
    case TCOMMS_COLL_REDUCE_SCATTER:
        in = a->count * (size_t)size; /* validated: fits */
        at = a->count * (size_t)rank;
        break;
    case TCOMMS_COLL_REDUCE_SCATTER_V: /* the core filled packed displacements */
        in = a->rdispls[size - 1] + a->recvcounts[size - 1];
        at = a->rdispls[rank];
        break;
    default: return TCOMMS_SUCCESS;
    }
    const char *who = "integer avg";
    if (in > SIZE_MAX / sizeof(int64_t) / words)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: %zu elements widened to int64 exceed the address space", who,
                        in);
    int v = a->type == TCOMMS_COLL_REDUCE_SCATTER_V && words == 2;
    tc_wide_avg_t *w = calloc(1, sizeof(*w) + (v ? 2 * (size_t)size * sizeof(size_t) : 0));
    int64_t *wide = w ? malloc(in ? in * words * sizeof(int64_t) : 1) : NULL;
    if (wide == NULL) {
        free(w);
        return tc_error(TCOMMS_ERR_NO_MEMORY, "%s: out of memory for an int64 copy of %zu elements", who, in);
    }
    widen(wide, a->sendbuf, in, a->dtype);
    int gets_result = a->type != TCOMMS_COLL_REDUCE || rank == a->peer;
    w->user = gets_result ? a->recvbuf : NULL;
    w->dtype = a->dtype;
    w->count = gets_result ? a->count : 0;
    w->size = size;
    w->result = wide + at * words;
    w->wide = wide;
    if (v) {
        for (int r = 0; r < size; r++) {
            w->v[r] = a->recvcounts[r] * 2;
            w->v[size + r] = a->rdispls[r] * 2;
        }
        a->recvcounts = w->v;
        a->rdispls = w->v + size;
    }
    a->sendbuf = wide;
    a->recvbuf = gets_result ? wide + at * words : NULL;
    a->in_place = gets_result;
    a->count *= words;
    a->dtype = TCOMMS_INT64;
    if (words == 2)
        a->op = TCOMMS_SUM;
    *out = w;
    return TCOMMS_SUCCESS;
}

void tc_wide_avg_end(tc_wide_avg_t *w, tcomms_status_t status)
{
    if (w == NULL)
        return;
    if (status == TCOMMS_SUCCESS && w->user != NULL)
        narrow(w);
    free(w->wide);
    free(w);
}
