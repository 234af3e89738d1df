/* SPDX-License-Identifier: BSD-3-Clause */
/* The services table (tcomms_core_t) lent to backend modules: they reach logging, errors, reductions, hints, the
 * store and environment parsing through it rather than by linking libtcomms. */
#include <stdarg.h>
#include <stdio.h>

#include "comm_state.h"
#include "dtype.h"
#include "env.h"
#include "error.h"
#include "hints.h"
#include "loader.h"
#include "log.h"
#include "store/store.h"

static tcomms_status_t core_error(tcomms_status_t status, const char *fmt, ...) TC_PRINTF(2, 3);
static void core_log(tcomms_log_level_t level, const char *who, const char *fmt, ...) TC_PRINTF(3, 4);

static tcomms_status_t core_error(tcomms_status_t status, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return tc_error(status, "%s", msg);
}

static void core_log(tcomms_log_level_t level, const char *who, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tc_vlog(level, who, fmt, ap);
    va_end(ap);
}

static tcomms_status_t core_hints_get(const tcomms_hints_t *hints, const char *key, const char **value)
{
    if (hints == NULL)
        return TCOMMS_ERR_NOT_FOUND;
    return tcomms_hints_get(hints, key, value);
}

static size_t core_hints_count(const tcomms_hints_t *hints)
{
    size_t n = 0;
    if (hints != NULL && tcomms_hints_count(hints, &n) != TCOMMS_SUCCESS)
        n = 0;
    return n;
}

const tcomms_core_t tc_core = {
    .abi = TCOMMS_ABI_INIT(tcomms_core_t),
    .log = core_log,
    .error = core_error,
    .dtype_size = tcomms_dtype_size,
    .reduce_fn = tc_reduce_fn,
    .avg_finish = tc_avg_finish,
    .store_set = tc_store_set,
    .store_get = tc_store_get,
    .store_wait = tc_store_wait,
    .store_add = tc_store_add,
    .store_del = tc_store_del,
    .hints_get = core_hints_get,
    .hints_count = core_hints_count,
    .hints_entry = tcomms_hints_entry,
    .store_allgather = tc_store_allgather,
    .dtype_name = tcomms_dtype_name,
    .op_name = tcomms_op_name,
    .coll_info = tcomms_coll_info,
    .setting_resolve = tc_setting_resolve,
    .env_int = tc_env_int,
    .env_bool = tc_env_bool,
    /* 7.2: the failure state (comm_state.c) */
    .comm_fail = tc_comm_state_report,
    .comm_failed = tc_comm_state_failed,
};
