/* SPDX-License-Identifier: BSD-3-Clause */
/* Fill patterns and an independent reference for the multi-rank collective tests. Values are small integers, so
 * every reduction over up to REF_MAX_RANKS ranks is exact in every dtype; expected results are computed in double
 * by plain loops, and float16/bfloat16 are converted here (never by the library), so a shared bug cannot hide
 * itself. */
#ifndef TESTS_COLL_REF_H
#define TESTS_COLL_REF_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <tcomms/tcomms.h>

#include "mrank.h"

#define REF_MAX_RANKS 8     /* reductions stay exact up to this many ranks */
#define REF_WIDE_RANKS 4    /* ranks below this take values up to 3 in magnitude, the others +-1 */
#define REF_GUARD_BYTES 64  /* guard bytes before and after every buffer */
#define REF_FILL_BYTE 0xA5  /* what guards, gaps and not-yet-written elements hold */
#define REF_UNTOUCHED NAN   /* expected value: this element's bytes must still be REF_FILL_BYTE */
#define REF_ANY INFINITY    /* expected value: anything may be there */

/* Element size and names, independent of the library's tables. */
size_t ref_esize(tcomms_dtype_t dtype);
const char *ref_dtype_name(tcomms_dtype_t dtype);
const char *ref_op_name(tcomms_op_t op);

/* Input of reductions at (rank, i): in 1..3 for uint8, in {-3,-2,-1,1,2,3} otherwise; +-1 (uint8: 1) from rank
 * REF_WIDE_RANKS up. */
double ref_red_value(tcomms_dtype_t dtype, int rank, size_t i);
/* Input of data movement at (rank, i): in 1..97, different between ranks at the same index. */
double ref_mov_value(int rank, size_t i);
/* op over ranks 0..size-1 of ref_red_value(dtype, rank, i); AVG truncates toward zero for integer dtypes. */
double ref_reduce(tcomms_dtype_t dtype, tcomms_op_t op, int size, size_t i);

/* Element i of a buffer of `dtype`, as double. */
void ref_store(tcomms_dtype_t dtype, void *buf, size_t i, double v);
double ref_load(tcomms_dtype_t dtype, const void *buf, size_t i);

/* IEEE binary16 and bfloat16, round to nearest even. */
uint16_t ref_f16_from_double(double v);
double ref_f16_to_double(uint16_t h);
uint16_t ref_bf16_from_double(double v);
double ref_bf16_to_double(uint16_t b);

/* A buffer of `count` elements between guard bytes, and what each element must hold after an operation. Every
 * byte starts as REF_FILL_BYTE and every expectation as REF_UNTOUCHED. */
typedef struct ref_buf {
    unsigned char *alloc;
    unsigned char *data;
    size_t count;
    tcomms_dtype_t dtype;
    double *expect;
} ref_buf_t;

int ref_buf_init(ref_buf_t *b, tcomms_dtype_t dtype, size_t count); /* 0, or -1 when out of memory */
void ref_buf_free(ref_buf_t *b);
/* Address of element i (i may equal count). */
void *ref_at(const ref_buf_t *b, size_t i);
/* Store v at element i and expect it to stay there. */
void ref_set(ref_buf_t *b, size_t i, double v);

/* Compare b against b->expect (REF_UNTOUCHED, REF_ANY allowed) and check both guards. Exact for integer dtypes,
 * relative tolerance for floats. Reports through c; returns 0 when all match, 1 otherwise. */
int ref_check(mrank_case_t *c, const char *what, const ref_buf_t *b);

#endif
