/* SPDX-License-Identifier: BSD-3-Clause */
/* Handle liveness (handle.h): the magic words, the message for a bad handle, and the quarantines. A quarantine is
 * a ring per kind, lock-free: a release takes the next slot and frees the handle it displaces. */
#include <stdatomic.h>
#include <stdlib.h>

#include "error.h"
#include "handle.h"
#include "log.h"

const uint32_t tc_handle_magic[TC_HANDLE_KIND_COUNT] = {
    [TC_HANDLE_COMM] = 0x74636f6du,  /* "tcom" */
    [TC_HANDLE_WORK] = 0x7463776bu,  /* "tcwk" */
    [TC_HANDLE_HINTS] = 0x74636869u, /* "tchi" */
};

static const struct {
    const char *noun, *released;
    size_t ring; /* handles kept: work handles churn with every async operation, the others rarely */
} kinds[TC_HANDLE_KIND_COUNT] = {
    [TC_HANDLE_COMM] = {"communicator", "destroyed", 16},
    [TC_HANDLE_WORK] = {"work handle", "freed", 64},
    [TC_HANDLE_HINTS] = {"hints object", "freed", 16},
};

#define RING_MAX 64

/* Reachable from here until displaced, so a leak checker at exit sees nothing lost. */
static _Atomic(void *) rings[TC_HANDLE_KIND_COUNT][RING_MAX];
static atomic_size_t next[TC_HANDLE_KIND_COUNT];

tcomms_status_t tc_handle_bad(const void *handle, tc_handle_kind_t kind, const char *who, const char *arg)
{
    if (handle == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: %s is NULL", who, arg);
    if (*(const uint32_t *)handle == TC_HANDLE_DEAD)
        tc_error(TCOMMS_ERR_INVALID_ARG, "%s: %s %p was already %s", who, kinds[kind].noun, handle,
                 kinds[kind].released);
    else
        tc_error(TCOMMS_ERR_INVALID_ARG, "%s: %s %p is not a live %s (released long ago and its memory reused, or "
                 "never one)", who, arg, handle, kinds[kind].noun);
    /* Callers rarely check what a free or destroy returns: say it where it will be seen. */
    tc_log(TCOMMS_LOG_WARN, "core", "%s", tcomms_last_error());
    return TCOMMS_ERR_INVALID_ARG;
}

void tc_handle_retire(void *handle, tc_handle_kind_t kind)
{
    *(uint32_t *)handle = TC_HANDLE_DEAD;
    size_t slot = atomic_fetch_add(&next[kind], 1) % kinds[kind].ring;
    free(atomic_exchange(&rings[kind][slot], handle));
}
