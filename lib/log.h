/* Logging to stderr, filtered by TCOMMS_LOG_LEVEL (error, warn, info, debug, trace or 1..5; default warn) and a
 * per-component override TCOMMS_<WHO>_LOG_LEVEL (e.g. TCOMMS_GLOO_LOG_LEVEL). Never writes to stdout. */
#ifndef TC_LOG_H
#define TC_LOG_H

#include <tcomms/backend.h>
#include "error.h"

void tc_log(tcomms_log_level_t level, const char *who, const char *fmt, ...) TC_PRINTF(3, 4);
void tc_vlog(tcomms_log_level_t level, const char *who, const char *fmt, va_list ap);
int tc_log_enabled(tcomms_log_level_t level, const char *who);

#endif
