/* SPDX-License-Identifier: BSD-3-Clause */
/* Logging, filtered by TCOMMS_LOG_LEVEL (error, warn, info, debug, trace or 1..5; default warn) and a per-component
 * override TCOMMS_<WHO>_LOG_LEVEL (e.g. TCOMMS_GLOO_LOG_LEVEL), to stderr or to TCOMMS_LOG_FILE. Never writes to
 * stdout. A line: `2026-11-26T13:51:28.123Z tcomms[PID] rank R 'COMM' LEVEL COMPONENT: message` (docs/env.md). */
#ifndef TC_LOG_H
#define TC_LOG_H

#include <stdatomic.h>

#include <tcomms/backend.h>
#include "error.h"

void tc_log(tcomms_log_level_t level, const char *who, const char *fmt, ...) TC_PRINTF(3, 4);
void tc_vlog(tcomms_log_level_t level, const char *who, const char *fmt, va_list ap);
/* Read the levels again (a split's creation; a root's goes through tc_log_env_check). */
void tc_log_refresh(void);
/* Whether a line of `level` from component `who` is written: one load and one compare when it is not. */
int tc_log_enabled(tcomms_log_level_t level, const char *who);
/* The most verbose level any component writes (the levels' `max`); TCOMMS_LOG_TRACE until they are first read. */
extern atomic_int tc_log_max;
/* tc_log_enabled for a per-operation path: a level above every component's costs no call. */
static inline int tc_log_on(tcomms_log_level_t level, const char *who)
{
    return (int)level <= atomic_load_explicit(&tc_log_max, memory_order_relaxed) && tc_log_enabled(level, who);
}

/* The rank this thread's lines carry from now on; the first call in the process also sets the rank of threads that
 * never call it (a backend's progress or watchdog thread). */
void tc_log_set_rank(int rank);
/* The communicator this thread's lines name until the next call; NULL or "" names none. */
void tc_log_set_comm(const char *name);

/* Read TCOMMS_LOG_LEVEL and every TCOMMS_<WHO>_LOG_LEVEL again (the levels are read at the first line and here
 * only), check them, and open TCOMMS_LOG_FILE (once per process): BAD_ENV naming the variable (and the errno text
 * for the file). Called when a communicator is created; logging before that uses the defaults for malformed values,
 * and stderr when the file cannot be opened. */
tcomms_status_t tc_log_env_check(void);

#endif
