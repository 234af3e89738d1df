/* SPDX-License-Identifier: BSD-3-Clause */
/* Element-wise reduction kernels for every (dtype, op), shared by the CPU backends, and the float16/bfloat16
 * conversions they need. Built with the vectoriser on (lib/local.mk): every loop here is written so that it
 * vectorises without runtime alias checks; `-fopt-info-vec` shows which do. */
#include <string.h>

#include "dtype.h"

/* Each (type, op) has two restrict-qualified loops the compiler can vectorise without runtime alias checks: an
 * accumulating one for c == a (or c == b: every op here is commutative) and a three-operand one. The entry point
 * picks between them; c must not overlap a or b partially. Signed integers add and multiply in their unsigned
 * counterpart: wrap-around instead of undefined behaviour. */
#define TC_SUM(T, U, x, y) ((T)((U)(x) + (U)(y)))
#define TC_PROD(T, U, x, y) ((T)((U)(x) * (U)(y)))
#define TC_MIN(T, U, x, y) ((y) < (x) ? (y) : (x))
#define TC_MAX(T, U, x, y) ((y) > (x) ? (y) : (x))

/* One (type, op): E is the element type, C the type the op computes in, U its wrapping counterpart, TO/FROM the
 * conversions between E and C (identity for native types; float16/bfloat16 go through float). */
#define TC_ID(x) (x)
/* On x86-64 each loop is also built for AVX2 and the loader picks the clone the CPU runs (an ifunc): the baseline
 * ISA gives SSE2's 16-byte vectors, half of what the CPUs we run on add per instruction, and a reduction of a block
 * that sits in cache runs at that rate (docs/perf.md, issue 29, sizes from 64 KiB). */
#if defined(__x86_64__) && defined(__GLIBC__) && defined(__has_attribute) /* clones need glibc's ifunc */
#if __has_attribute(target_clones)
#define TC_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef TC_CLONES
#define TC_CLONES
#endif
#define TC_KERNEL(E, C, U, tag, name, OP, TO, FROM)                                                             \
    TC_CLONES static void name##_##tag##_acc(E *restrict c, const E *restrict b, size_t n)                      \
    {                                                                                                           \
        for (size_t i = 0; i < n; i++)                                                                          \
            c[i] = FROM(OP(C, U, TO(c[i]), TO(b[i])));                                                          \
    }                                                                                                           \
    TC_CLONES static void name##_##tag##_3(E *restrict c, const E *restrict a, const E *restrict b, size_t n)   \
    {                                                                                                           \
        for (size_t i = 0; i < n; i++)                                                                          \
            c[i] = FROM(OP(C, U, TO(a[i]), TO(b[i])));                                                          \
    }                                                                                                           \
    static void name##_##tag(void *c, const void *a, const void *b, size_t n)                                   \
    {                                                                                                           \
        if (c == a)                                                                                             \
            name##_##tag##_acc(c, b, n);                                                                        \
        else if (c == b)                                                                                        \
            name##_##tag##_acc(c, a, n);                                                                        \
        else                                                                                                    \
            name##_##tag##_3(c, a, b, n);                                                                       \
    }

#define TC_KERNELS(E, C, U, tag, TO, FROM)                                                                      \
    TC_KERNEL(E, C, U, tag, sum, TC_SUM, TO, FROM)                                                              \
    TC_KERNEL(E, C, U, tag, prod, TC_PROD, TO, FROM)                                                            \
    TC_KERNEL(E, C, U, tag, min, TC_MIN, TO, FROM)                                                              \
    TC_KERNEL(E, C, U, tag, max, TC_MAX, TO, FROM)

TC_KERNELS(int8_t, int8_t, uint8_t, i8, TC_ID, TC_ID)
TC_KERNELS(uint8_t, uint8_t, uint8_t, u8, TC_ID, TC_ID)
TC_KERNELS(int32_t, int32_t, uint32_t, i32, TC_ID, TC_ID)
TC_KERNELS(int64_t, int64_t, uint64_t, i64, TC_ID, TC_ID)
TC_KERNELS(float, float, float, f32, TC_ID, TC_ID)
TC_KERNELS(double, double, double, f64, TC_ID, TC_ID)

/* ---- IEEE binary16 and bfloat16 ---------------------------------------------------------------------------- */

static uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* The conversions are written as selects over values computed for every case, without branches or calls, so the
 * half-type loops below vectorise too. */
/* Lane masks (all ones or all zeros) keep the selects branch-free where the vectoriser would not if-convert. */
static inline uint32_t mask(int cond)
{
    return (uint32_t)0 - (uint32_t)(cond != 0);
}

static inline float h2f(uint16_t h)
{
    uint32_t u = (uint32_t)(h & 0x7fffu) << 13; /* exponent and mantissa in float position */
    uint32_t e = u & 0x0f800000u;
    uint32_t normal = u + (112u << 23);         /* rebias 15 -> 127 */
    uint32_t infnan = normal + (112u << 23);    /* exponent 31 -> 255 */
    /* subnormal: 2^-14 * (1 + m/1024) - 2^-14 = m * 2^-24, normalised by the FPU */
    uint32_t sub = float_bits(bits_float(u + (113u << 23)) - bits_float(113u << 23));
    uint32_t m_inf = mask(e == 0x0f800000u), m_sub = mask(e == 0);
    uint32_t r = (infnan & m_inf) | (sub & m_sub) | (normal & ~(m_inf | m_sub));
    return bits_float(r | ((uint32_t)(h & 0x8000u) << 16));
}

static inline uint16_t f2h(float f)
{
    uint32_t u = float_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    /* nan stays a quiet nan; inf and values rounding past 65504 give inf */
    uint32_t big = 0x7c00u | (0x200u & mask(a > 0x7f800000u));
    /* below 2^-14: adding 0.5, whose ulp is 2^-24, makes the FPU round to the subnormal's integer mantissa */
    uint32_t sub = float_bits(bits_float(a) + 0.5f) - float_bits(0.5f);
    /* normal: rebias, then round the 13 dropped bits to nearest even; a carry rolls into the exponent */
    uint32_t nrm = (a - (112u << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
    uint32_t m_big = mask(a >= 0x477ff000u), m_sub = mask(a < (113u << 23));
    uint32_t h = (big & m_big) | (sub & m_sub) | (nrm & ~(m_big | m_sub));
    return (uint16_t)(h | sign);
}

static inline float b2f(uint16_t b)
{
    return bits_float((uint32_t)b << 16);
}

static inline uint16_t f2b(float f)
{
    uint32_t u = float_bits(f);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16; /* nearest even */
    uint32_t quiet = (u >> 16) | 0x40u;                       /* nan stays a quiet nan */
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}

float tc_half_to_float(uint16_t h)
{
    return h2f(h);
}

uint16_t tc_float_to_half(float f)
{
    return f2h(f);
}

float tc_bf16_to_float(uint16_t b)
{
    return b2f(b);
}

uint16_t tc_float_to_bf16(float f)
{
    return f2b(f);
}

/* Half types reduce through float: one rounding per step, as NCCL does. */
TC_KERNELS(uint16_t, float, float, f16, h2f, f2h)
TC_KERNELS(uint16_t, float, float, bf16, b2f, f2b)

/* Indexed [dtype][op]; AVG reduces as SUM and is finished by tc_avg_finish. */
static const tcomms_reduce_fn_t kernels[TCOMMS_DTYPE_COUNT][TCOMMS_OP_COUNT] = {
    [TCOMMS_INT8] = {sum_i8, prod_i8, min_i8, max_i8, sum_i8},
    [TCOMMS_UINT8] = {sum_u8, prod_u8, min_u8, max_u8, sum_u8},
    [TCOMMS_INT32] = {sum_i32, prod_i32, min_i32, max_i32, sum_i32},
    [TCOMMS_INT64] = {sum_i64, prod_i64, min_i64, max_i64, sum_i64},
    [TCOMMS_FLOAT16] = {sum_f16, prod_f16, min_f16, max_f16, sum_f16},
    [TCOMMS_BFLOAT16] = {sum_bf16, prod_bf16, min_bf16, max_bf16, sum_bf16},
    [TCOMMS_FLOAT32] = {sum_f32, prod_f32, min_f32, max_f32, sum_f32},
    [TCOMMS_FLOAT64] = {sum_f64, prod_f64, min_f64, max_f64, sum_f64},
};

tcomms_reduce_fn_t tc_reduce_fn(tcomms_dtype_t dtype, tcomms_op_t op)
{
    if ((unsigned)dtype >= TCOMMS_DTYPE_COUNT || (unsigned)op >= TCOMMS_OP_COUNT)
        return NULL;
    return kernels[dtype][op];
}

void tc_avg_finish(void *buf, size_t n, tcomms_dtype_t dtype, int divisor)
{
    if (divisor <= 1)
        return;
    switch (dtype) {
    case TCOMMS_INT8: for (size_t i = 0; i < n; i++) ((int8_t *)buf)[i] = (int8_t)(((int8_t *)buf)[i] / divisor); break;
    case TCOMMS_UINT8:
        for (size_t i = 0; i < n; i++)
            ((uint8_t *)buf)[i] = (uint8_t)(((uint8_t *)buf)[i] / divisor);
        break;
    case TCOMMS_INT32: for (size_t i = 0; i < n; i++) ((int32_t *)buf)[i] /= divisor; break;
    case TCOMMS_INT64: for (size_t i = 0; i < n; i++) ((int64_t *)buf)[i] /= divisor; break;
    case TCOMMS_FLOAT16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)buf)[i] = f2h(h2f(((uint16_t *)buf)[i]) / (float)divisor);
        break;
    case TCOMMS_BFLOAT16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)buf)[i] = f2b(b2f(((uint16_t *)buf)[i]) / (float)divisor);
        break;
    case TCOMMS_FLOAT32: for (size_t i = 0; i < n; i++) ((float *)buf)[i] /= (float)divisor; break;
    case TCOMMS_FLOAT64: for (size_t i = 0; i < n; i++) ((double *)buf)[i] /= divisor; break;
    default: break;
    }
}
