/* SPDX-License-Identifier: BSD-3-Clause */
/* The data-type and reduction tables, defined once for the core and every CPU backend. */
#ifndef TC_DTYPE_H
#define TC_DTYPE_H

#include <tcomms/backend.h>

tcomms_reduce_fn_t tc_reduce_fn(tcomms_dtype_t dtype, tcomms_op_t op);
void tc_avg_finish(void *buf, size_t n, tcomms_dtype_t dtype, int divisor);
/* IEEE half and bfloat16 conversions (round to nearest even), for kernels and tests. */
float tc_half_to_float(uint16_t h);
uint16_t tc_float_to_half(float f);
float tc_bf16_to_float(uint16_t b);
uint16_t tc_float_to_bf16(float f);

#endif
