/* SPDX-License-Identifier: BSD-3-Clause */
/* Groups (tcomms_group_start/end): this thread's nesting depth, the backends bracketed so far, and the blocking
 * calls posted inside the group, which tcomms_group_end completes. coll.c asks here before and after each post. */
#ifndef TC_GROUP_H
#define TC_GROUP_H

#include <stdatomic.h>

#include <tcomms/backend.h>

#include "work.h"

/* Groups open in the process, over all threads. A thread's own start is seen by its own later calls, so 0 here
 * means "not in a group" without the thread-local lookup (a __tls_get_addr call from a shared library) that every
 * call outside a group would otherwise pay. */
extern atomic_int tc_groups_open;
int tc_group_active_here(void);

/* Non-zero while this thread is inside a group. */
static inline int tc_group_active(void)
{
    return atomic_load_explicit(&tc_groups_open, memory_order_relaxed) != 0 && tc_group_active_here();
}
/* Before a post to `be` inside a group: call be->group_start the first time this group posts to it. */
tcomms_status_t tc_group_join(const tcomms_backend_t *be);
/* Keep a blocking call's work for the outermost tcomms_group_end to wait for and free. */
tcomms_status_t tc_group_keep(tc_posted_t p);

#endif
