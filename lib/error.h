/* SPDX-License-Identifier: BSD-3-Clause */
/* Error plumbing shared by every lib/ file: a thread-local detailed message beside each returned status. */
#ifndef TC_ERROR_H
#define TC_ERROR_H

#include <tcomms/tcomms.h>

#if defined(__GNUC__)
#define TC_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define TC_HIDDEN __attribute__((visibility("hidden")))
#else
#define TC_PRINTF(f, a)
#define TC_HIDDEN
#endif

/* Set this thread's message (printf-style) and return `status`: `return tc_error(TCOMMS_ERR_INVALID_ARG, ...)`. */
tcomms_status_t tc_error(tcomms_status_t status, const char *fmt, ...) TC_PRINTF(2, 3);
/* Prepend context to the current message ("split: " + message), keeping the status. */
tcomms_status_t tc_error_prefix(tcomms_status_t status, const char *fmt, ...) TC_PRINTF(2, 3);
void tc_error_clear(void);
/* SUCCESS, or TCOMMS_ERR_INVALID_ARG naming the bits of `mask` outside `known` ("<who>: <what> has unknown bits
 * 0x..."): every field_mask and flags word of the API is checked this way, so a caller built against a newer
 * header learns that this library ignores nothing silently. */
tcomms_status_t tc_check_mask(uint64_t mask, uint64_t known, const char *who, const char *what);

#endif
