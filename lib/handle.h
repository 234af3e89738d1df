/* SPDX-License-Identifier: BSD-3-Clause */
/* Liveness of the public handles (communicators, work handles, hints): a magic word first in each struct, checked
 * at every public entry and overwritten when the handle is released, and a small quarantine that keeps the last
 * released handles' memory aside, so a use after release is caught rather than reading reused memory. */
#ifndef TC_HANDLE_H
#define TC_HANDLE_H

#include <stdint.h>

#include <tcomms/tcomms.h>

typedef enum tc_handle_kind { TC_HANDLE_COMM, TC_HANDLE_WORK, TC_HANDLE_HINTS, TC_HANDLE_KIND_COUNT } tc_handle_kind_t;

/* The magic word of a live handle of each kind; a released one holds TC_HANDLE_DEAD. */
extern const uint32_t tc_handle_magic[TC_HANDLE_KIND_COUNT];
#define TC_HANDLE_DEAD 0xdeadbeefu

/* The error for a handle that fails the check below: NULL, released, or not a handle of this kind. `who` is the
 * public call, `arg` the parameter's name ("comm", "parent"). */
tcomms_status_t tc_handle_bad(const void *handle, tc_handle_kind_t kind, const char *who, const char *arg);

/* SUCCESS for a live handle of `kind`. `handle` points to a struct whose first member is its uint32_t magic. */
static inline tcomms_status_t tc_handle_check(const void *handle, tc_handle_kind_t kind, const char *who,
                                              const char *arg)
{
    if (handle != NULL && *(const uint32_t *)handle == tc_handle_magic[kind])
        return TCOMMS_SUCCESS;
    return tc_handle_bad(handle, kind, who, arg);
}

/* Mark `handle` released and put its memory in the quarantine of its kind, freeing the oldest one there. The
 * caller has released everything the handle owned. */
void tc_handle_retire(void *handle, tc_handle_kind_t kind);

#endif
