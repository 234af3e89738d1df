/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests lib/dtype.c and lib/reduce.c: the dtype/op/device tables, the float16/bfloat16 conversions (against a
 * brute-force nearest-value search in double) and every reduction kernel (against a plain loop in double). */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "check_run.h"

/* Exact value of a half bit pattern, computed from the IEEE formula in double. */
static double half_value(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

static double bf16_value(uint16_t b)
{
    int e = (b >> 7) & 0xff, m = b & 0x7f;
    double v = e == 0 ? ldexp(m, -133) : e == 255 ? (m ? NAN : INFINITY) : ldexp(128 + m, e - 134);
    return (b & 0x8000) ? -v : v;
}

/* The nearest finite-or-infinite pattern to x among all 65536, ties to even mantissa. */
static uint16_t nearest(double x, double (*value)(uint16_t))
{
    uint16_t best = 0;
    double bestd = INFINITY;
    for (uint32_t p = 0; p < 65536; p++) {
        double v = value((uint16_t)p);
        if (isnan(v) || signbit(v) != signbit(x))
            continue;
        double d = fabs(v - x);
        if (d < bestd || (d == bestd && (p & 1) == 0 && (best & 1) == 1)) {
            bestd = d;
            best = (uint16_t)p;
        }
    }
    return best;
}

START_TEST(test_tables)
{
    const size_t sizes[TCOMMS_DTYPE_COUNT] = {1, 1, 4, 8, 2, 2, 4, 8};
    for (int d = 0; d < TCOMMS_DTYPE_COUNT; d++) {
        ck_assert_uint_eq(tcomms_dtype_size((tcomms_dtype_t)d), sizes[d]);
        tcomms_dtype_t back;
        ck_assert_int_eq(tcomms_dtype_parse(tcomms_dtype_name((tcomms_dtype_t)d), &back), TCOMMS_SUCCESS);
        ck_assert_int_eq(back, d);
    }
    ck_assert_uint_eq(tcomms_dtype_size(TCOMMS_DTYPE_COUNT), 0);
    ck_assert_ptr_null(tcomms_dtype_name((tcomms_dtype_t)-1));
    tcomms_dtype_t dt;
    ck_assert_int_eq(tcomms_dtype_parse("bf16", &dt), TCOMMS_SUCCESS);
    ck_assert_int_eq(dt, TCOMMS_BFLOAT16);
    ck_assert_int_eq(tcomms_dtype_parse("float128", &dt), TCOMMS_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tcomms_last_error(), "float128"));
    for (int o = 0; o < TCOMMS_OP_COUNT; o++) {
        tcomms_op_t back;
        ck_assert_int_eq(tcomms_op_parse(tcomms_op_name((tcomms_op_t)o), &back), TCOMMS_SUCCESS);
        ck_assert_int_eq(back, o);
    }
    tcomms_op_t op;
    ck_assert_int_eq(tcomms_op_parse("xor", &op), TCOMMS_ERR_INVALID_ARG);
    tcomms_device_t dev;
    ck_assert_int_eq(tcomms_device_parse("cuda:3", &dev), TCOMMS_SUCCESS);
    ck_assert(dev.type == TCOMMS_DEVICE_CUDA && dev.index == 3);
    ck_assert_int_eq(tcomms_device_parse("cuda", &dev), TCOMMS_SUCCESS);
    ck_assert(dev.type == TCOMMS_DEVICE_CUDA && dev.index == -1);
    ck_assert_int_eq(tcomms_device_parse("cpu", &dev), TCOMMS_SUCCESS);
    ck_assert(dev.type == TCOMMS_DEVICE_CPU && dev.index == 0);
    ck_assert_int_eq(tcomms_device_parse("gpu:1", &dev), TCOMMS_ERR_INVALID_ARG);
    ck_assert_int_eq(tcomms_device_parse("cuda:x", &dev), TCOMMS_ERR_INVALID_ARG);
    ck_assert_int_eq(tcomms_device_parse("cuda:-2", &dev), TCOMMS_ERR_INVALID_ARG);
    ck_assert_int_eq(tcomms_device_parse("cpu:1", &dev), TCOMMS_ERR_INVALID_ARG);
}
END_TEST

START_TEST(test_half_roundtrip)
{
    for (uint32_t p = 0; p < 65536; p++) {
        double hv = half_value((uint16_t)p), bv = bf16_value((uint16_t)p);
        float hf = tc_half_to_float((uint16_t)p), bf = tc_bf16_to_float((uint16_t)p);
        if (isnan(hv))
            ck_assert(isnan(hf));
        else {
            ck_assert_msg((double)hf == hv, "half 0x%04x: %g != %g", p, hf, hv);
            ck_assert_uint_eq(tc_float_to_half(hf), p);
        }
        if (isnan(bv))
            ck_assert(isnan(bf));
        else {
            ck_assert_msg((double)bf == bv, "bf16 0x%04x: %g != %g", p, bf, bv);
            ck_assert_uint_eq(tc_float_to_bf16(bf), p);
        }
    }
}
END_TEST

START_TEST(test_half_rounding)
{
    srand(7);
    for (int i = 0; i < 300; i++) {
        /* values spread over the whole half range, subnormals included, and exact midpoints */
        float x = ldexpf((float)rand() / (float)RAND_MAX, rand() % 44 - 26) * (rand() % 2 ? 1.0f : -1.0f);
        if (i % 10 == 0) {
            uint16_t h = (uint16_t)(rand() % 0x7bff);
            x = (float)((half_value(h) + half_value((uint16_t)(h + 1))) / 2);
        }
        if (fabsf(x) <= 65504.0f) /* beyond, IEEE overflows to inf: checked below */
            ck_assert_msg(tc_float_to_half(x) == nearest(x, half_value), "half(%a)", (double)x);
        ck_assert_msg(tc_float_to_bf16(x) == nearest(x, bf16_value), "bf16(%a)", (double)x);
    }
    ck_assert_uint_eq(tc_float_to_half(70000.0f), 0x7c00); /* overflow to inf */
    ck_assert_uint_eq(tc_float_to_half(-INFINITY), 0xfc00);
    ck_assert(isnan(tc_half_to_float(tc_float_to_half(NAN))));
    ck_assert(isnan(tc_bf16_to_float(tc_float_to_bf16(NAN))));
}
END_TEST

/* Read / write element i of a buffer of dtype d as double. */
static double get(const void *buf, tcomms_dtype_t d, size_t i)
{
    switch (d) {
    case TCOMMS_INT8: return ((const int8_t *)buf)[i];
    case TCOMMS_UINT8: return ((const uint8_t *)buf)[i];
    case TCOMMS_INT32: return ((const int32_t *)buf)[i];
    case TCOMMS_INT64: return (double)((const int64_t *)buf)[i];
    case TCOMMS_FLOAT16: return half_value(((const uint16_t *)buf)[i]);
    case TCOMMS_BFLOAT16: return bf16_value(((const uint16_t *)buf)[i]);
    case TCOMMS_FLOAT32: return ((const float *)buf)[i];
    default: return ((const double *)buf)[i];
    }
}

static void put(void *buf, tcomms_dtype_t d, size_t i, double v)
{
    switch (d) {
    case TCOMMS_INT8: ((int8_t *)buf)[i] = (int8_t)v; break;
    case TCOMMS_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case TCOMMS_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case TCOMMS_INT64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case TCOMMS_FLOAT16: ((uint16_t *)buf)[i] = nearest(v, half_value); break;
    case TCOMMS_BFLOAT16: ((uint16_t *)buf)[i] = nearest(v, bf16_value); break;
    case TCOMMS_FLOAT32: ((float *)buf)[i] = (float)v; break;
    default: ((double *)buf)[i] = v; break;
    }
}

START_TEST(test_kernels)
{
    /* long enough for several whole vectors of the widest clone (AVX2: 32 int8 lanes) and a ragged tail */
    enum { N = 101 };
    tcomms_dtype_t d = (tcomms_dtype_t)_i;
    int is_signed = d != TCOMMS_UINT8;
    for (int o = 0; o < TCOMMS_OP_COUNT; o++) {
        unsigned char a[N * 8], b[N * 8], c[N * 8];
        double x[N], y[N];
        for (int i = 0; i < N; i++) {
            x[i] = (i * 7) % 11 - (is_signed ? 5 : 0);
            y[i] = (i * 5) % 9 - (is_signed ? 4 : 0);
            put(a, d, i, x[i]);
            put(b, d, i, y[i]);
        }
        tcomms_reduce_fn_t fn = tc_reduce_fn(d, (tcomms_op_t)o);
        ck_assert_ptr_nonnull(fn);
        fn(c, a, b, N);
        for (int i = 0; i < N; i++) {
            double want = o == TCOMMS_PROD ? x[i] * y[i]
                          : o == TCOMMS_MIN ? fmin(x[i], y[i])
                          : o == TCOMMS_MAX ? fmax(x[i], y[i])
                                            : x[i] + y[i];
            ck_assert_msg(get(c, d, i) == want, "%s %s [%d]: %g != %g", tcomms_dtype_name(d),
                          tcomms_op_name((tcomms_op_t)o), i, get(c, d, i), want);
        }
        /* c may alias a or b (each its own loop in lib/reduce.c) */
        unsigned char a2[N * 8];
        memcpy(a2, a, sizeof(a2));
        fn(b, a, b, N);
        ck_assert_int_eq(memcmp(b, c, N * tcomms_dtype_size(d)), 0);
        fn(a2, a2, a, N); /* x + x, x * x, min(x, x), max(x, x): checked against the reference below */
        for (int i = 0; i < N; i++) {
            double want = o == TCOMMS_PROD ? x[i] * x[i] : o == TCOMMS_MIN || o == TCOMMS_MAX ? x[i] : 2 * x[i];
            ck_assert_msg(get(a2, d, i) == want, "%s %s in place [%d]: %g != %g", tcomms_dtype_name(d),
                          tcomms_op_name((tcomms_op_t)o), i, get(a2, d, i), want);
        }
    }
    /* AVG epilogue: sum divided by n, integers truncating toward zero */
    unsigned char buf[8 * 8];
    const double sums[8] = {9, -9, 10, 0, 7, -7, 12, 3};
    for (int i = 0; i < 8; i++)
        put(buf, d, i, d == TCOMMS_UINT8 ? fabs(sums[i]) : sums[i]);
    tc_avg_finish(buf, 8, d, 4);
    for (int i = 0; i < 8; i++) {
        double s = d == TCOMMS_UINT8 ? fabs(sums[i]) : sums[i];
        double want = d <= TCOMMS_INT64 ? trunc(s / 4) : s / 4;
        ck_assert_msg(get(buf, d, i) == want, "avg %s [%d]: %g != %g", tcomms_dtype_name(d), i, get(buf, d, i),
                      want);
    }
}
END_TEST

START_TEST(test_wraparound)
{
    int32_t a = INT32_MAX, b = 1, c;
    tc_reduce_fn(TCOMMS_INT32, TCOMMS_SUM)(&c, &a, &b, 1);
    ck_assert_int_eq(c, INT32_MIN); /* wraps like NCCL; no undefined behaviour (UBSan runs this) */
    ck_assert_ptr_null(tc_reduce_fn(TCOMMS_DTYPE_COUNT, TCOMMS_SUM));
    ck_assert_ptr_null(tc_reduce_fn(TCOMMS_INT8, TCOMMS_OP_COUNT));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dtype");
    TCase *tc = tcase_create("dtype");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_tables);
    tcase_add_test(tc, test_half_roundtrip);
    tcase_add_test(tc, test_half_rounding);
    tcase_add_loop_test(tc, test_kernels, 0, TCOMMS_DTYPE_COUNT);
    tcase_add_test(tc, test_wraparound);
    suite_add_tcase(s, tc);
    return check_run(s);
}
