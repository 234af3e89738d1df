/* Element-wise reduction kernels for every (dtype, op), shared by the CPU backends, and the float16/bfloat16
 * conversions they need. Half types reduce through float: one rounding per step, as NCCL does. */
#include <math.h>
#include <string.h>

#include "dtype.h"

/* Signed integers add and multiply in their unsigned counterpart: wrap-around instead of undefined behaviour. */
#define TC_KERNELS(T, U, tag)                                                                                    \
    static void sum_##tag(void *c, const void *a, const void *b, size_t n)                                      \
    {                                                                                                           \
        T *pc = c;                                                                                              \
        const T *pa = a, *pb = b;                                                                               \
        for (size_t i = 0; i < n; i++)                                                                          \
            pc[i] = (T)((U)pa[i] + (U)pb[i]);                                                                   \
    }                                                                                                           \
    static void prod_##tag(void *c, const void *a, const void *b, size_t n)                                     \
    {                                                                                                           \
        T *pc = c;                                                                                              \
        const T *pa = a, *pb = b;                                                                               \
        for (size_t i = 0; i < n; i++)                                                                          \
            pc[i] = (T)((U)pa[i] * (U)pb[i]);                                                                   \
    }                                                                                                           \
    static void min_##tag(void *c, const void *a, const void *b, size_t n)                                      \
    {                                                                                                           \
        T *pc = c;                                                                                              \
        const T *pa = a, *pb = b;                                                                               \
        for (size_t i = 0; i < n; i++)                                                                          \
            pc[i] = pb[i] < pa[i] ? pb[i] : pa[i];                                                              \
    }                                                                                                           \
    static void max_##tag(void *c, const void *a, const void *b, size_t n)                                      \
    {                                                                                                           \
        T *pc = c;                                                                                              \
        const T *pa = a, *pb = b;                                                                               \
        for (size_t i = 0; i < n; i++)                                                                          \
            pc[i] = pb[i] > pa[i] ? pb[i] : pa[i];                                                              \
    }

TC_KERNELS(int8_t, uint8_t, i8)
TC_KERNELS(uint8_t, uint8_t, u8)
TC_KERNELS(int32_t, uint32_t, i32)
TC_KERNELS(int64_t, uint64_t, i64)
TC_KERNELS(float, float, f32)
TC_KERNELS(double, double, f64)

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

float tc_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0x1f) /* inf or nan */
        return bits_float(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) /* zero or subnormal: mant * 2^-24, exact in float */
        return sign ? -ldexpf((float)mant, -24) : ldexpf((float)mant, -24);
    return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t tc_float_to_half(float f)
{
    uint32_t u = float_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t abs = u & 0x7fffffffu;
    if (abs >= 0x7f800000u) /* inf stays inf; nan stays a quiet nan */
        return (uint16_t)(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0));
    if (abs >= 0x477ff000u) /* rounds to a value beyond the largest half (65504) */
        return (uint16_t)(sign | 0x7c00u);
    if (abs < 0x38800000u) { /* below the smallest normal half: round to a subnormal */
        float scaled = bits_float(abs) * 16777216.0f; /* * 2^24: the subnormal's integer mantissa */
        return (uint16_t)(sign | (uint16_t)lrintf(scaled));
    }
    /* Normal: rebias the exponent, round the 13 dropped bits to nearest even; a carry rolls into the exponent. */
    uint32_t h = ((abs >> 13) - (112u << 10));
    uint32_t rest = abs & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}

float tc_bf16_to_float(uint16_t b)
{
    return bits_float((uint32_t)b << 16);
}

uint16_t tc_float_to_bf16(float f)
{
    uint32_t u = float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* nan: keep it a quiet nan */
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

typedef float (*to_float_fn)(uint16_t);
typedef uint16_t (*from_float_fn)(float);

static void half_apply(void *c, const void *a, const void *b, size_t n, tcomms_op_t op, to_float_fn to,
                       from_float_fn from)
{
    uint16_t *pc = c;
    const uint16_t *pa = a, *pb = b;
    for (size_t i = 0; i < n; i++) {
        float x = to(pa[i]), y = to(pb[i]), r;
        switch (op) {
        case TCOMMS_PROD: r = x * y; break;
        case TCOMMS_MIN: r = y < x ? y : x; break;
        case TCOMMS_MAX: r = y > x ? y : x; break;
        default: r = x + y; break;
        }
        pc[i] = from(r);
    }
}

#define TC_HALF_KERNEL(opname, OP, tag, to, from)                                                               \
    static void opname##_##tag(void *c, const void *a, const void *b, size_t n)                                 \
    {                                                                                                           \
        half_apply(c, a, b, n, OP, to, from);                                                                   \
    }
TC_HALF_KERNEL(sum, TCOMMS_SUM, f16, tc_half_to_float, tc_float_to_half)
TC_HALF_KERNEL(prod, TCOMMS_PROD, f16, tc_half_to_float, tc_float_to_half)
TC_HALF_KERNEL(min, TCOMMS_MIN, f16, tc_half_to_float, tc_float_to_half)
TC_HALF_KERNEL(max, TCOMMS_MAX, f16, tc_half_to_float, tc_float_to_half)
TC_HALF_KERNEL(sum, TCOMMS_SUM, bf16, tc_bf16_to_float, tc_float_to_bf16)
TC_HALF_KERNEL(prod, TCOMMS_PROD, bf16, tc_bf16_to_float, tc_float_to_bf16)
TC_HALF_KERNEL(min, TCOMMS_MIN, bf16, tc_bf16_to_float, tc_float_to_bf16)
TC_HALF_KERNEL(max, TCOMMS_MAX, bf16, tc_bf16_to_float, tc_float_to_bf16)

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
    case TCOMMS_UINT8: for (size_t i = 0; i < n; i++) ((uint8_t *)buf)[i] = (uint8_t)(((uint8_t *)buf)[i] / divisor); break;
    case TCOMMS_INT32: for (size_t i = 0; i < n; i++) ((int32_t *)buf)[i] /= divisor; break;
    case TCOMMS_INT64: for (size_t i = 0; i < n; i++) ((int64_t *)buf)[i] /= divisor; break;
    case TCOMMS_FLOAT16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)buf)[i] = tc_float_to_half(tc_half_to_float(((uint16_t *)buf)[i]) / (float)divisor);
        break;
    case TCOMMS_BFLOAT16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)buf)[i] = tc_float_to_bf16(tc_bf16_to_float(((uint16_t *)buf)[i]) / (float)divisor);
        break;
    case TCOMMS_FLOAT32: for (size_t i = 0; i < n; i++) ((float *)buf)[i] /= (float)divisor; break;
    case TCOMMS_FLOAT64: for (size_t i = 0; i < n; i++) ((double *)buf)[i] /= divisor; break;
    default: break;
    }
}
