/* SPDX-License-Identifier: BSD-3-Clause */
/* Groups: thread-local state between tcomms_group_start and the outermost tcomms_group_end. A backend is bracketed
 * (group_start) lazily, before the group's first post to it; blocking calls are only queued and are completed,
 * in posting order, once every bracketed backend has issued its batch (group_end). */
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "error.h"
#include "group.h"
#include "work.h"

#define MAX_GROUP_BACKENDS 32 /* the loader holds at most this many modules */

static _Thread_local struct group {
    int depth;
    const tcomms_backend_t *started[MAX_GROUP_BACKENDS];
    int nstarted;
    tc_posted_t *kept;
    size_t nkept, cap;
} group;

atomic_int tc_groups_open;

int tc_group_active_here(void)
{
    return group.depth > 0;
}

tcomms_status_t tc_group_join(const tcomms_backend_t *be)
{
    for (int i = 0; i < group.nstarted; i++)
        if (group.started[i] == be)
            return TCOMMS_SUCCESS;
    if (group.nstarted == MAX_GROUP_BACKENDS)
        return tc_error(TCOMMS_ERR_INTERNAL, "tcomms group: more than %d backends in one group", MAX_GROUP_BACKENDS);
    if (be->group_start != NULL) {
        tcomms_status_t st = be->group_start();
        if (st != TCOMMS_SUCCESS)
            return tc_error_prefix(st, "tcomms group: starting a group on backend '%s': ", be->name);
    }
    group.started[group.nstarted++] = be;
    return TCOMMS_SUCCESS;
}

tcomms_status_t tc_group_keep(tc_posted_t p)
{
    if (group.nkept == group.cap) {
        size_t cap = group.cap ? 2 * group.cap : 16;
        tc_posted_t *k = realloc(group.kept, cap * sizeof(*k));
        if (k == NULL) {
            /* Already posted: finish it now rather than lose it (it may wait for a peer's later post). */
            tc_work_block(&p);
            return tc_error(TCOMMS_ERR_NO_MEMORY, "tcomms group: out of memory keeping a blocking call (it was "
                            "completed at once)");
        }
        group.kept = k;
        group.cap = cap;
    }
    group.kept[group.nkept++] = p;
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcomms_group_start(void)
{
    if (group.depth == INT_MAX)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_group_start: groups nested too deeply");
    if (group.depth++ == 0)
        atomic_fetch_add_explicit(&tc_groups_open, 1, memory_order_relaxed);
    return TCOMMS_SUCCESS;
}

/* Issue every bracketed backend's batch, then complete the kept calls; every step runs even after an error, so
 * nothing leaks, and the first error is returned with its message. */
tcomms_status_t tcomms_group_end(void)
{
    if (group.depth == 0)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_group_end: no group is open on this thread (unbalanced end)");
    if (--group.depth > 0)
        return TCOMMS_SUCCESS;
    atomic_fetch_sub_explicit(&tc_groups_open, 1, memory_order_relaxed);
    tcomms_status_t first = TCOMMS_SUCCESS;
    char saved[512] = "";
    for (int i = 0; i < group.nstarted; i++) {
        const tcomms_backend_t *be = group.started[i];
        tcomms_status_t st = be->group_end != NULL ? be->group_end() : TCOMMS_SUCCESS;
        if (st != TCOMMS_SUCCESS && first == TCOMMS_SUCCESS) {
            first = tc_error_prefix(st, "tcomms_group_end: backend '%s': ", be->name);
            snprintf(saved, sizeof(saved), "%s", tcomms_last_error());
        }
    }
    group.nstarted = 0;
    for (size_t i = 0; i < group.nkept; i++) {
        tcomms_status_t st = tc_work_block(&group.kept[i]);
        if (st != TCOMMS_SUCCESS && first == TCOMMS_SUCCESS) {
            first = tc_error_prefix(st, "tcomms_group_end: a blocking call of the group: ");
            snprintf(saved, sizeof(saved), "%s", tcomms_last_error());
        }
    }
    group.nkept = 0;
    free(group.kept);
    group.kept = NULL;
    group.cap = 0;
    if (first != TCOMMS_SUCCESS)
        return tc_error(first, "%s", saved);
    return TCOMMS_SUCCESS;
}
