/* SPDX-License-Identifier: BSD-3-Clause */
/* Names, sizes and parsing of data types, reduction ops and device types: the one table the core, the tools and
 * every backend use. */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "env.h"
#include "error.h"

static const struct {
    const char *name;
    size_t size;
} dtypes[TCOMMS_DTYPE_COUNT] = {
    [TCOMMS_INT8] = {"int8", 1},       [TCOMMS_UINT8] = {"uint8", 1},       [TCOMMS_INT32] = {"int32", 4},
    [TCOMMS_INT64] = {"int64", 8},     [TCOMMS_FLOAT16] = {"float16", 2},   [TCOMMS_BFLOAT16] = {"bfloat16", 2},
    [TCOMMS_FLOAT32] = {"float32", 4}, [TCOMMS_FLOAT64] = {"float64", 8},
};

/* Other spellings users bring from PyTorch, NumPy and nccl-tests. */
static const struct {
    const char *alias;
    tcomms_dtype_t dtype;
} dtype_aliases[] = {
    {"char", TCOMMS_INT8},        {"uchar", TCOMMS_UINT8},   {"int", TCOMMS_INT32},     {"long", TCOMMS_INT64},
    {"half", TCOMMS_FLOAT16},     {"fp16", TCOMMS_FLOAT16},  {"bf16", TCOMMS_BFLOAT16}, {"float", TCOMMS_FLOAT32},
    {"fp32", TCOMMS_FLOAT32},     {"double", TCOMMS_FLOAT64}, {"fp64", TCOMMS_FLOAT64},
};

static const char *const ops[TCOMMS_OP_COUNT] = {
    [TCOMMS_SUM] = "sum", [TCOMMS_PROD] = "prod", [TCOMMS_MIN] = "min", [TCOMMS_MAX] = "max", [TCOMMS_AVG] = "avg",
};

static const char *const device_types[TCOMMS_DEVICE_TYPE_COUNT] = {
    [TCOMMS_DEVICE_CPU] = "cpu",
    [TCOMMS_DEVICE_CUDA] = "cuda",
};

size_t tcomms_dtype_size(tcomms_dtype_t dtype)
{
    return (unsigned)dtype < TCOMMS_DTYPE_COUNT ? dtypes[dtype].size : 0;
}

const char *tcomms_dtype_name(tcomms_dtype_t dtype)
{
    return (unsigned)dtype < TCOMMS_DTYPE_COUNT ? dtypes[dtype].name : NULL;
}

const char *tcomms_op_name(tcomms_op_t op)
{
    return (unsigned)op < TCOMMS_OP_COUNT ? ops[op] : NULL;
}

const char *tcomms_device_type_name(tcomms_device_type_t type)
{
    return (unsigned)type < TCOMMS_DEVICE_TYPE_COUNT ? device_types[type] : NULL;
}

tcomms_status_t tcomms_dtype_parse(const char *name, tcomms_dtype_t *out)
{
    if (name == NULL || out == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_dtype_parse: %s is NULL", name ? "out" : "name");
    for (int i = 0; i < TCOMMS_DTYPE_COUNT; i++)
        if (strcasecmp(name, dtypes[i].name) == 0)
            return *out = (tcomms_dtype_t)i, TCOMMS_SUCCESS;
    for (size_t i = 0; i < sizeof(dtype_aliases) / sizeof(dtype_aliases[0]); i++)
        if (strcasecmp(name, dtype_aliases[i].alias) == 0)
            return *out = dtype_aliases[i].dtype, TCOMMS_SUCCESS;
    return tc_error(TCOMMS_ERR_INVALID_ARG,
                    "unknown dtype '%s' (int8, uint8, int32, int64, float16, bfloat16, float32, float64)", name);
}

tcomms_status_t tcomms_op_parse(const char *name, tcomms_op_t *out)
{
    if (name == NULL || out == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_op_parse: %s is NULL", name ? "out" : "name");
    for (int i = 0; i < TCOMMS_OP_COUNT; i++)
        if (strcasecmp(name, ops[i]) == 0)
            return *out = (tcomms_op_t)i, TCOMMS_SUCCESS;
    if (strcasecmp(name, "product") == 0)
        return *out = TCOMMS_PROD, TCOMMS_SUCCESS;
    return tc_error(TCOMMS_ERR_INVALID_ARG, "unknown reduction op '%s' (sum, prod, min, max, avg)", name);
}

tcomms_status_t tcomms_device_parse(const char *text, tcomms_device_t *out)
{
    if (text == NULL || out == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_device_parse: %s is NULL", text ? "out" : "text");
    const char *colon = strchr(text, ':');
    size_t n = colon ? (size_t)(colon - text) : strlen(text);
    for (int t = 0; t < TCOMMS_DEVICE_TYPE_COUNT; t++) {
        if (strlen(device_types[t]) != n || strncasecmp(text, device_types[t], n) != 0)
            continue;
        long index = t == TCOMMS_DEVICE_CUDA ? -1 : 0;
        if (colon != NULL && tc_parse_int(colon + 1, t == TCOMMS_DEVICE_CUDA ? -1 : 0,
                                          t == TCOMMS_DEVICE_CUDA ? 1023 : 0, "device index", &index) != 0)
            return tc_error(TCOMMS_ERR_INVALID_ARG, "bad device '%s': index must be %s", text,
                            t == TCOMMS_DEVICE_CUDA ? "an integer >= -1" : "0 for cpu");
        out->type = (tcomms_device_type_t)t;
        out->index = (int)index;
        return TCOMMS_SUCCESS;
    }
    return tc_error(TCOMMS_ERR_INVALID_ARG, "unknown device '%s' (cpu, cuda, cuda:N)", text);
}

const char *tcomms_version(void)
{
    return PACKAGE_VERSION;
}
