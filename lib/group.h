/* SPDX-License-Identifier: BSD-3-Clause */
/* Groups (tcomms_group_start/end): this thread's nesting depth, the backends bracketed so far, and the blocking
 * calls posted inside the group, which tcomms_group_end completes. coll.c asks here before and after each post. */
#ifndef TC_GROUP_H
#define TC_GROUP_H

#include <tcomms/backend.h>

#include "work.h"

/* Non-zero while this thread is inside a group. */
int tc_group_active(void);
/* Before a post to `be` inside a group: call be->group_start the first time this group posts to it. */
tcomms_status_t tc_group_join(const tcomms_backend_t *be);
/* Keep a blocking call's work for the outermost tcomms_group_end to wait for and free. */
tcomms_status_t tc_group_keep(tc_posted_t p);

#endif
