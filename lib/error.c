/* SPDX-License-Identifier: BSD-3-Clause */
/* Status strings and the thread-local detailed message behind tcomms_last_error(). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "error.h"

#define TC_ERROR_LEN 1024

static _Thread_local char last_error[TC_ERROR_LEN];

const char *tcomms_strerror(tcomms_status_t status)
{
    switch (status) {
    case TCOMMS_SUCCESS: return "TCOMMS_SUCCESS: success";
    case TCOMMS_IN_PROGRESS: return "TCOMMS_IN_PROGRESS: operation in progress";
    case TCOMMS_ERR_INVALID_ARG: return "TCOMMS_ERR_INVALID_ARG: invalid argument";
    case TCOMMS_ERR_NO_MEMORY: return "TCOMMS_ERR_NO_MEMORY: out of memory";
    case TCOMMS_ERR_NOT_SUPPORTED: return "TCOMMS_ERR_NOT_SUPPORTED: not supported by this backend";
    case TCOMMS_ERR_TIMEOUT: return "TCOMMS_ERR_TIMEOUT: operation timed out";
    case TCOMMS_ERR_BACKEND_UNAVAILABLE: return "TCOMMS_ERR_BACKEND_UNAVAILABLE: backend module unavailable";
    case TCOMMS_ERR_NO_BACKEND_FOR_DEVICE:
        return "TCOMMS_ERR_NO_BACKEND_FOR_DEVICE: no backend for this device type in the communicator";
    case TCOMMS_ERR_BAD_ENV: return "TCOMMS_ERR_BAD_ENV: environment variable missing or malformed";
    case TCOMMS_ERR_SYSTEM: return "TCOMMS_ERR_SYSTEM: system call failed";
    case TCOMMS_ERR_REMOTE: return "TCOMMS_ERR_REMOTE: a peer failed or closed its connection";
    case TCOMMS_ERR_ABORTED: return "TCOMMS_ERR_ABORTED: communicator is in an error state";
    case TCOMMS_ERR_PROTOCOL: return "TCOMMS_ERR_PROTOCOL: malformed or refused message";
    case TCOMMS_ERR_ABI: return "TCOMMS_ERR_ABI: backend module built for an incompatible backend ABI";
    case TCOMMS_ERR_NOT_FOUND: return "TCOMMS_ERR_NOT_FOUND: not found";
    case TCOMMS_ERR_INTERNAL: return "TCOMMS_ERR_INTERNAL: internal error";
    case TCOMMS_ERR_NOT_BOUND:
        return "TCOMMS_ERR_NOT_BOUND: the communicator is not bound to a device of that type";
    case TCOMMS_ERR_MISMATCH: return "TCOMMS_ERR_MISMATCH: the ranks called a collective differently";
    }
    return "TCOMMS_ERR_UNKNOWN: unknown status";
}

const char *tcomms_last_error(void)
{
    return last_error;
}

tcomms_status_t tc_error(tcomms_status_t status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
    return status;
}

tcomms_status_t tc_error_prefix(tcomms_status_t status, const char *fmt, ...)
{
    char prefix[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    /* Shift the old message right and put the prefix in front; the tail is cut if it no longer fits. */
    size_t plen = strlen(prefix), olen = strnlen(last_error, sizeof(last_error) - 1 - plen);
    memmove(last_error + plen, last_error, olen);
    memcpy(last_error, prefix, plen);
    last_error[plen + olen] = '\0';
    return status;
}

void tc_error_clear(void)
{
    last_error[0] = '\0';
}

tcomms_status_t tc_check_mask(uint64_t mask, uint64_t known, const char *who, const char *what)
{
    if ((mask & ~known) == 0)
        return TCOMMS_SUCCESS;
    return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: %s has unknown bits 0x%llx (known: 0x%llx)", who, what,
                    (unsigned long long)(mask & ~known), (unsigned long long)known);
}
