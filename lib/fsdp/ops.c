/* FSDP runtime: the element-wise work on bucket memory (zero, cast, scale, add) and its allocation, in host memory.
 * Every byte the runtime touches outside a collective goes through here, so a CUDA path replaces this one file
 * (kernels on a stream) without the bucket, gather and reduce logic changing. */
#include <stdlib.h>
#include <string.h>

#include "../dtype.h"
#include "rt.h"

tcomms_status_t tc_fsdp_alloc(size_t bytes, void **out)
{
    *out = NULL;
    if (bytes == 0)
        return TCOMMS_SUCCESS;
    size_t rounded = (bytes + TC_FSDP_BYTE_ALIGN - 1) / TC_FSDP_BYTE_ALIGN * TC_FSDP_BYTE_ALIGN;
    void *p = aligned_alloc(TC_FSDP_BYTE_ALIGN, rounded);
    if (p == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "fsdp: out of memory allocating a %zu-byte buffer", bytes);
    memset(p, 0, rounded);
    *out = p;
    return TCOMMS_SUCCESS;
}

void tc_fsdp_free(void *p)
{
    free(p);
}

void tc_fsdp_zero(void *buf, size_t n, tcomms_dtype_t dtype)
{
    if (n)
        memset(buf, 0, n * tcomms_dtype_size(dtype));
}

/* One element as double, and back: the runtime's dtypes are the four floating types. */
static double load(const void *p, size_t i, tcomms_dtype_t t)
{
    switch (t) {
    case TCOMMS_FLOAT64: return ((const double *)p)[i];
    case TCOMMS_FLOAT32: return ((const float *)p)[i];
    case TCOMMS_BFLOAT16: return tc_bf16_to_float(((const uint16_t *)p)[i]);
    default: return tc_half_to_float(((const uint16_t *)p)[i]);
    }
}

static void store(void *p, size_t i, tcomms_dtype_t t, double v)
{
    switch (t) {
    case TCOMMS_FLOAT64: ((double *)p)[i] = v; break;
    case TCOMMS_FLOAT32: ((float *)p)[i] = (float)v; break;
    case TCOMMS_BFLOAT16: ((uint16_t *)p)[i] = tc_float_to_bf16((float)v); break;
    default: ((uint16_t *)p)[i] = tc_float_to_half((float)v); break;
    }
}

void tc_fsdp_cast(void *dst, tcomms_dtype_t dt, const void *src, tcomms_dtype_t st, size_t n)
{
    if (dt == st) {
        if (n && dst != src)
            memmove(dst, src, n * tcomms_dtype_size(dt));
        return;
    }
    /* float64 -> bf16/fp16 goes through float32: lib/dtype.h converts from float. */
    for (size_t i = 0; i < n; i++)
        store(dst, i, dt, load(src, i, st));
}

/* Main-dtype loops kept apart from the generic path so they vectorise. */
void tc_fsdp_scale(void *buf, size_t n, tcomms_dtype_t dtype, double s)
{
    if (s == 1.0)
        return;
    if (dtype == TCOMMS_FLOAT32) {
        float *b = buf, f = (float)s;
        for (size_t i = 0; i < n; i++)
            b[i] *= f;
    } else if (dtype == TCOMMS_FLOAT64) {
        double *b = buf;
        for (size_t i = 0; i < n; i++)
            b[i] *= s;
    } else {
        for (size_t i = 0; i < n; i++)
            store(buf, i, dtype, load(buf, i, dtype) * s);
    }
}

void tc_fsdp_add(void *dst, const void *src, size_t n, tcomms_dtype_t dtype)
{
    if (dtype == TCOMMS_FLOAT32) {
        float *d = dst;
        const float *s = src;
        for (size_t i = 0; i < n; i++)
            d[i] += s[i];
    } else if (dtype == TCOMMS_FLOAT64) {
        double *d = dst;
        const double *s = src;
        for (size_t i = 0; i < n; i++)
            d[i] += s[i];
    } else {
        for (size_t i = 0; i < n; i++)
            store(dst, i, dtype, load(dst, i, dtype) + load(src, i, dtype));
    }
}
