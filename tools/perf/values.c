/* SPDX-License-Identifier: BSD-3-Clause */
/* Fill patterns, expected reductions and element codecs for tcomms-perf's check (see values.h). Inputs are small
 * integers, so sums over any number of ranks stay exact: for each index the sum / min / max inputs cycle through
 * -2..2 every five ranks, and products hold at most one factor of 2. */
#include "values.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static int is_float(tcomms_dtype_t dtype)
{
    return dtype == TCOMMS_FLOAT16 || dtype == TCOMMS_BFLOAT16 || dtype == TCOMMS_FLOAT32 ||
           dtype == TCOMMS_FLOAT64;
}

double perf_red_value(const perf_ctx_t *c, int rank, size_t i)
{
    int positive = c->dtype == TCOMMS_UINT8;
    if (c->op == TCOMMS_PROD) {
        double v = (size_t)rank == i % (size_t)c->nranks ? 2.0 : 1.0;
        return !positive && ((size_t)rank + i) % 3 == 0 ? -v : v;
    }
    double p = (double)(((size_t)rank * 3 + i % 5) % 5); /* 3 generates Z/5: five ranks cover 0..4 */
    return positive ? p : p - 2.0;
}

double perf_mov_value(int rank, size_t i)
{
    return (double)(((size_t)rank * 13 + (i % 101) * 7) % 101 + 1);
}

/* v reduced to the width of an integer dtype as C's conversions (and the library's kernels) wrap it. */
static double wrap(tcomms_dtype_t dtype, double v)
{
    int64_t x = (int64_t)v;
    switch (dtype) {
    case TCOMMS_INT8: return (int8_t)x;
    case TCOMMS_UINT8: return (uint8_t)x;
    case TCOMMS_INT32: return (int32_t)x;
    default: return (double)x;
    }
}

double perf_reduced(const perf_ctx_t *c, size_t i)
{
    double acc = perf_red_value(c, 0, i);
    for (int r = 1; r < c->nranks; r++) {
        double v = perf_red_value(c, r, i);
        switch (c->op) {
        case TCOMMS_PROD: acc *= v; break;
        case TCOMMS_MIN: acc = v < acc ? v : acc; break;
        case TCOMMS_MAX: acc = v > acc ? v : acc; break;
        default: acc += v; break; /* sum, and avg before its division */
        }
    }
    if (!is_float(c->dtype))
        acc = wrap(c->dtype, acc);
    if (c->op != TCOMMS_AVG)
        return acc;
    if (is_float(c->dtype))
        return acc / c->nranks;
    return (double)((int64_t)acc / c->nranks); /* C division truncates toward zero */
}

/* ---- float16 and bfloat16: round to nearest even; no subnormals are needed for the values we store ---------- */

static uint16_t half_from(double v)
{
    uint16_t sign = signbit(v) ? 0x8000u : 0u;
    double a = fabs(v);
    if (isnan(v))
        return 0x7e00u;
    if (a < 0x1p-14) /* below the smallest normal half: flush to zero */
        return sign;
    int e;
    double m = frexp(a, &e);                /* a = m * 2^e, m in [0.5, 1) */
    double mant = nearbyint(ldexp(m, 11)); /* 11 significant bits, in [1024, 2048] */
    if (mant == 2048.0) {
        mant = 1024.0;
        e++;
    }
    if (e + 14 > 30) /* past the largest half, 65504 */
        return (uint16_t)(sign | 0x7c00u);
    return (uint16_t)(sign | (uint16_t)((e + 14) << 10) | (uint16_t)(mant - 1024.0));
}

static double half_to(uint16_t h)
{
    int e = (h >> 10) & 0x1f;
    double mant = (double)(h & 0x3ffu), v;
    if (e == 0)
        v = ldexp(mant, -24);
    else if (e == 31)
        v = mant == 0.0 ? INFINITY : NAN;
    else
        v = ldexp(mant + 1024.0, e - 25);
    return (h & 0x8000u) ? -v : v;
}

static uint16_t bf16_from(double v)
{
    float f = (float)v; /* exact for the integers we store */
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if (isnan(f))
        return (uint16_t)((bits >> 16) | 0x40u);
    bits += 0x7fffu + ((bits >> 16) & 1u); /* round to nearest even on the 16 bits dropped */
    return (uint16_t)(bits >> 16);
}

static double bf16_to(uint16_t b)
{
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* ---- elements ------------------------------------------------------------------------------------------------ */

void perf_store(tcomms_dtype_t dtype, void *buf, size_t i, double v)
{
    unsigned char *p = (unsigned char *)buf + i * tcomms_dtype_size(dtype);
    int64_t x = (int64_t)v; /* integer dtypes: through int64 so that out-of-range values wrap, never trap */
    switch (dtype) {
    case TCOMMS_INT8: { int8_t y = (int8_t)x; memcpy(p, &y, sizeof y); break; }
    case TCOMMS_UINT8: { uint8_t y = (uint8_t)x; memcpy(p, &y, sizeof y); break; }
    case TCOMMS_INT32: { int32_t y = (int32_t)x; memcpy(p, &y, sizeof y); break; }
    case TCOMMS_INT64: memcpy(p, &x, sizeof x); break;
    case TCOMMS_FLOAT16: { uint16_t y = half_from(v); memcpy(p, &y, sizeof y); break; }
    case TCOMMS_BFLOAT16: { uint16_t y = bf16_from(v); memcpy(p, &y, sizeof y); break; }
    case TCOMMS_FLOAT32: { float y = (float)v; memcpy(p, &y, sizeof y); break; }
    case TCOMMS_FLOAT64: memcpy(p, &v, sizeof v); break;
    default: break;
    }
}

double perf_load(tcomms_dtype_t dtype, const void *buf, size_t i)
{
    const unsigned char *p = (const unsigned char *)buf + i * tcomms_dtype_size(dtype);
    switch (dtype) {
    case TCOMMS_INT8: { int8_t y; memcpy(&y, p, sizeof y); return y; }
    case TCOMMS_UINT8: { uint8_t y; memcpy(&y, p, sizeof y); return y; }
    case TCOMMS_INT32: { int32_t y; memcpy(&y, p, sizeof y); return y; }
    case TCOMMS_INT64: { int64_t y; memcpy(&y, p, sizeof y); return (double)y; }
    case TCOMMS_FLOAT16: { uint16_t y; memcpy(&y, p, sizeof y); return half_to(y); }
    case TCOMMS_BFLOAT16: { uint16_t y; memcpy(&y, p, sizeof y); return bf16_to(y); }
    case TCOMMS_FLOAT32: { float y; memcpy(&y, p, sizeof y); return y; }
    case TCOMMS_FLOAT64: { double y; memcpy(&y, p, sizeof y); return y; }
    default: return NAN;
    }
}

int perf_match(tcomms_dtype_t dtype, double got, double want)
{
    double tol;
    switch (dtype) {
    case TCOMMS_FLOAT16: tol = 1e-2; break;   /* 11 significant bits; avg rounds once */
    case TCOMMS_BFLOAT16: tol = 2e-2; break;  /* 8 significant bits */
    case TCOMMS_FLOAT32: tol = 1e-5; break;
    case TCOMMS_FLOAT64: tol = 1e-12; break;
    default: return got == want;
    }
    return fabs(got - want) <= tol * fmax(1.0, fabs(want)); /* false for NaN */
}
