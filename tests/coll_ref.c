/* SPDX-License-Identifier: BSD-3-Clause */
/* The reference side of the collective tests (see coll_ref.h): fill values, expected reductions in double, our own
 * float16/bfloat16 codecs, and guarded buffers whose every byte is checked after an operation. */
#include "coll_ref.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t ref_esize(tcomms_dtype_t dtype)
{
    static const size_t sizes[] = {1, 1, 4, 8, 2, 2, 4, 8};
    return (unsigned)dtype < 8u ? sizes[dtype] : 0;
}

const char *ref_dtype_name(tcomms_dtype_t dtype)
{
    static const char *const names[] = {"int8", "uint8", "int32", "int64", "float16", "bfloat16", "float32",
                                        "float64"};
    return (unsigned)dtype < 8u ? names[dtype] : "?";
}

const char *ref_op_name(tcomms_op_t op)
{
    static const char *const names[] = {"sum", "prod", "min", "max", "avg"};
    return (unsigned)op < 5u ? names[op] : "?";
}

/* Ranks from REF_WIDE_RANKS up contribute +-1 only (1 for uint8), so a product over up to REF_MAX_RANKS ranks
 * stays within 3^4 = 81: exact in int8 and bfloat16 whatever the order of the partial products. */
double ref_red_value(tcomms_dtype_t dtype, int rank, size_t i)
{
    static const double signed_values[] = {-3, -2, -1, 1, 2, 3};
    size_t k = (size_t)(rank + 1) * (i % 7 + 1) + i / 7;
    if (rank >= REF_WIDE_RANKS)
        return dtype == TCOMMS_UINT8 || k % 2 == 0 ? 1.0 : -1.0;
    if (dtype == TCOMMS_UINT8)
        return (double)(k % 3 + 1);
    return signed_values[k % 6];
}

double ref_mov_value(int rank, size_t i)
{
    return (double)(((size_t)rank * 37u + (i % 97u) * 11u + 5u) % 97u + 1u);
}

double ref_reduce(tcomms_dtype_t dtype, tcomms_op_t op, int size, size_t i)
{
    double acc = ref_red_value(dtype, 0, i);
    for (int r = 1; r < size; r++) {
        double v = ref_red_value(dtype, r, i);
        switch (op) {
        case TCOMMS_SUM:
        case TCOMMS_AVG: acc += v; break;
        case TCOMMS_PROD: acc *= v; break;
        case TCOMMS_MIN: acc = v < acc ? v : acc; break;
        case TCOMMS_MAX: acc = v > acc ? v : acc; break;
        default: break;
        }
    }
    if (op != TCOMMS_AVG)
        return acc;
    if (dtype == TCOMMS_FLOAT16 || dtype == TCOMMS_BFLOAT16 || dtype == TCOMMS_FLOAT32 || dtype == TCOMMS_FLOAT64)
        return acc / size;
    return (double)((long long)acc / (long long)size); /* C division truncates toward zero */
}

/* ---- float16 / bfloat16 --------------------------------------------------------------------------------------- */

uint16_t ref_f16_from_double(double v)
{
    uint16_t sign = signbit(v) ? 0x8000u : 0u;
    double a = fabs(v);
    if (isnan(v))
        return (uint16_t)(sign | 0x7e00u);
    if (a >= 65520.0) /* rounds past the largest half, 65504 */
        return (uint16_t)(sign | 0x7c00u);
    int e;
    frexp(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    int exp = e - 1;
    if (a == 0.0 || exp < -14) {
        double m = nearbyint(ldexp(a, 24)); /* subnormal: units of 2^-24; 1024 carries into the exponent */
        return (uint16_t)(sign | (uint16_t)m);
    }
    double m = nearbyint(ldexp(a, 10 - exp)); /* in [1024, 2048] */
    if (m >= 2048.0) {
        m = 1024.0;
        exp++;
    }
    if (exp > 15)
        return (uint16_t)(sign | 0x7c00u);
    return (uint16_t)(sign | (uint16_t)((exp + 15) << 10) | (uint16_t)(m - 1024.0));
}

double ref_f16_to_double(uint16_t h)
{
    int exp = (h >> 10) & 0x1f;
    double mant = (double)(h & 0x3ffu);
    double v;
    if (exp == 0)
        v = ldexp(mant, -24);
    else if (exp == 31)
        v = mant == 0.0 ? INFINITY : NAN;
    else
        v = ldexp(mant + 1024.0, exp - 25);
    return (h & 0x8000u) ? -v : v;
}

uint16_t ref_bf16_from_double(double v)
{
    uint16_t sign = signbit(v) ? 0x8000u : 0u;
    double a = fabs(v);
    if (isnan(v))
        return (uint16_t)(sign | 0x7fc0u);
    if (isinf(v))
        return (uint16_t)(sign | 0x7f80u);
    int e;
    frexp(a, &e);
    int exp = e - 1;
    if (a == 0.0 || exp < -126) {
        double m = nearbyint(ldexp(a, 133)); /* subnormal: units of 2^-133 */
        return (uint16_t)(sign | (uint16_t)m);
    }
    double m = nearbyint(ldexp(a, 7 - exp)); /* in [128, 256] */
    if (m >= 256.0) {
        m = 128.0;
        exp++;
    }
    if (exp > 127)
        return (uint16_t)(sign | 0x7f80u);
    return (uint16_t)(sign | (uint16_t)((exp + 127) << 7) | (uint16_t)(m - 128.0));
}

double ref_bf16_to_double(uint16_t b)
{
    int exp = (b >> 7) & 0xff;
    double mant = (double)(b & 0x7fu);
    double v;
    if (exp == 0)
        v = ldexp(mant, -133);
    else if (exp == 255)
        v = mant == 0.0 ? INFINITY : NAN;
    else
        v = ldexp(mant + 128.0, exp - 134);
    return (b & 0x8000u) ? -v : v;
}

/* ---- element access ------------------------------------------------------------------------------------------- */

void ref_store(tcomms_dtype_t dtype, void *buf, size_t i, double v)
{
    unsigned char *p = (unsigned char *)buf + i * ref_esize(dtype);
    switch (dtype) {
    case TCOMMS_INT8: { int8_t x = (int8_t)v; memcpy(p, &x, 1); break; }
    case TCOMMS_UINT8: { uint8_t x = (uint8_t)v; memcpy(p, &x, 1); break; }
    case TCOMMS_INT32: { int32_t x = (int32_t)v; memcpy(p, &x, 4); break; }
    case TCOMMS_INT64: { int64_t x = (int64_t)v; memcpy(p, &x, 8); break; }
    case TCOMMS_FLOAT16: { uint16_t x = ref_f16_from_double(v); memcpy(p, &x, 2); break; }
    case TCOMMS_BFLOAT16: { uint16_t x = ref_bf16_from_double(v); memcpy(p, &x, 2); break; }
    case TCOMMS_FLOAT32: { float x = (float)v; memcpy(p, &x, 4); break; }
    case TCOMMS_FLOAT64: memcpy(p, &v, 8); break;
    default: break;
    }
}

double ref_load(tcomms_dtype_t dtype, const void *buf, size_t i)
{
    const unsigned char *p = (const unsigned char *)buf + i * ref_esize(dtype);
    switch (dtype) {
    case TCOMMS_INT8: { int8_t x; memcpy(&x, p, 1); return x; }
    case TCOMMS_UINT8: { uint8_t x; memcpy(&x, p, 1); return x; }
    case TCOMMS_INT32: { int32_t x; memcpy(&x, p, 4); return x; }
    case TCOMMS_INT64: { int64_t x; memcpy(&x, p, 8); return (double)x; }
    case TCOMMS_FLOAT16: { uint16_t x; memcpy(&x, p, 2); return ref_f16_to_double(x); }
    case TCOMMS_BFLOAT16: { uint16_t x; memcpy(&x, p, 2); return ref_bf16_to_double(x); }
    case TCOMMS_FLOAT32: { float x; memcpy(&x, p, 4); return x; }
    case TCOMMS_FLOAT64: { double x; memcpy(&x, p, 8); return x; }
    default: return NAN;
    }
}

/* ---- guarded buffers ------------------------------------------------------------------------------------------ */

int ref_buf_init(ref_buf_t *b, tcomms_dtype_t dtype, size_t count)
{
    size_t bytes = count * ref_esize(dtype);
    b->alloc = malloc(bytes + 2 * REF_GUARD_BYTES);
    b->expect = malloc((count ? count : 1) * sizeof(double));
    if (!b->alloc || !b->expect) {
        free(b->alloc);
        free(b->expect);
        memset(b, 0, sizeof *b);
        return -1;
    }
    memset(b->alloc, REF_FILL_BYTE, bytes + 2 * REF_GUARD_BYTES);
    for (size_t i = 0; i < count; i++)
        b->expect[i] = REF_UNTOUCHED;
    b->data = b->alloc + REF_GUARD_BYTES;
    b->count = count;
    b->dtype = dtype;
    return 0;
}

void ref_buf_free(ref_buf_t *b)
{
    free(b->alloc);
    free(b->expect);
    memset(b, 0, sizeof *b);
}

void *ref_at(const ref_buf_t *b, size_t i)
{
    return b->data + i * ref_esize(b->dtype);
}

void ref_set(ref_buf_t *b, size_t i, double v)
{
    ref_store(b->dtype, b->data, i, v);
    b->expect[i] = v;
}

static int untouched(const unsigned char *p, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (p[k] != REF_FILL_BYTE)
            return 0;
    return 1;
}

static int close_enough(tcomms_dtype_t dtype, double got, double expected)
{
    double tol;
    switch (dtype) {
    case TCOMMS_FLOAT16: tol = 1e-2; break;
    case TCOMMS_BFLOAT16: tol = 3e-2; break;
    case TCOMMS_FLOAT32: tol = 1e-5; break;
    case TCOMMS_FLOAT64: tol = 1e-12; break;
    default: return got == expected;
    }
    return fabs(got - expected) <= tol * (fabs(expected) > 1.0 ? fabs(expected) : 1.0);
}

int ref_check(mrank_case_t *c, const char *what, const ref_buf_t *b)
{
    size_t es = ref_esize(b->dtype);
    int bad = 0;
    for (int side = 0; side < 2; side++) {
        const unsigned char *g = side == 0 ? b->alloc : b->data + b->count * es;
        for (size_t k = 0; k < REF_GUARD_BYTES; k++) {
            if (g[k] == REF_FILL_BYTE)
                continue;
            char label[96];
            snprintf(label, sizeof label, "byte of the guard %s %s", side == 0 ? "before" : "after", what);
            mrank_case_fail(c, label, (long long)k, g[k], NAN);
            bad = 1;
            break;
        }
    }
    for (size_t i = 0; i < b->count; i++) {
        double e = b->expect[i];
        if (isinf(e))
            continue;
        const unsigned char *p = b->data + i * es;
        if (isnan(e) ? untouched(p, es) : close_enough(b->dtype, ref_load(b->dtype, p, 0), e))
            continue;
        mrank_case_fail(c, what, (long long)i, ref_load(b->dtype, p, 0), e);
        bad = 1;
    }
    return bad;
}
