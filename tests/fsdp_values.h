/* SPDX-License-Identifier: BSD-3-Clause */
/* Reference values of the FSDP runtime tests (test_fsdp_runtime on CPU backends, tests/gpu/test_fsdp_cuda on NCCL):
 * what parameter p's element i is loaded with, what an optimizer writes, the gradient rank r adds in microbatch m,
 * bfloat16 rounding written independently of the library, and element access (get, put_as) by dtype. Loaded
 * values are exact in bfloat16; installed ones are not, so the runtime's cast is checked against round_bf16. */
#ifndef TESTS_FSDP_VALUES_H
#define TESTS_FSDP_VALUES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <tcomms/tcomms.h>

static inline double init_value(int p, size_t i)
{
    return (double)((int)((i * 7 + (size_t)p * 3) % 41) - 20) * 0.25;
}

static inline double new_value(int p, size_t i)
{
    return (float)(0.1 * (double)(i + 1) - 0.03 * p);
}

static inline double grad_value(int r, int m, int p, size_t i)
{
    return (double)((r + 1) * (int)(i % 5 + 1) + m * 3 + p);
}

/* Round to nearest even on the float's bits. */
static inline float round_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    memcpy(&f, &u, 4);
    return f;
}

/* A value as compute dtype `t` (FLOAT64, FLOAT32 or BFLOAT16) holds it. */
static inline double as_dtype(double v, tcomms_dtype_t t)
{
    return t == TCOMMS_FLOAT64 ? v : t == TCOMMS_BFLOAT16 ? (double)round_bf16((float)v) : (double)(float)v;
}

/* Element i of a FLOAT64, FLOAT32 or BFLOAT16 array. */
static inline double get(const void *p, tcomms_dtype_t t, size_t i)
{
    if (t == TCOMMS_FLOAT64)
        return ((const double *)p)[i];
    if (t == TCOMMS_FLOAT32)
        return ((const float *)p)[i];
    uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Store v in element i of a FLOAT64, FLOAT32 or BFLOAT16 array, as as_dtype rounds it. */
static inline void put_as(void *p, tcomms_dtype_t t, size_t i, double v)
{
    if (t == TCOMMS_FLOAT64) {
        ((double *)p)[i] = v;
    } else if (t == TCOMMS_FLOAT32) {
        ((float *)p)[i] = (float)v;
    } else {
        float f = round_bf16((float)v);
        uint32_t u;
        memcpy(&u, &f, 4);
        ((uint16_t *)p)[i] = (uint16_t)(u >> 16);
    }
}

#endif
