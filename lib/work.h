/* SPDX-License-Identifier: BSD-3-Clause */
/* Work handles: the core's wrapper around a backend's in-flight operation. */
#ifndef TC_WORK_H
#define TC_WORK_H

#include <tcomms/backend.h>

#include "avg.h"
#include "comm_state.h"

/* A posted operation as the core holds it until completion: the backend's work, the timeout it was posted with,
 * what the core still does when it completes (NULL, or an exact integer AVG to narrow: avg.h), and a reference to
 * its communicator's state, where a final error is recorded even after the communicator was destroyed. */
typedef struct tc_posted {
    const tcomms_backend_t *be;
    void *bwork;
    uint32_t timeout_ms;
    tc_wide_avg_t *avg;
    tc_comm_state_t *state;
    struct tc_flight *flight; /* a reference to the communicator's flight record (flight.h), or NULL */
    uint64_t seq;             /* its sequence number there */
    int asked;                /* its timeout was diagnosed once already */
    /* A blocking call outside a group, which ends before its call returns: `state` and `flight` are the
     * communicator's own references, lent (calls on one communicator are serialised, so it cannot be destroyed
     * meanwhile), and its flight entry says WAITING from the post on. */
    int inline_call;
} tc_posted_t;

/* Wait for `*p` (a blocking call; by reference, as every call passes it), finish and free it (its references too, unless lent), and return its status.
 * A NULL `bwork` is an inline call the backend completed in post() (TCOMMS_COLL_FLAG_INLINE): only finished. */
tcomms_status_t tc_work_block(tc_posted_t *p);
/* Wrap `p` into a public handle. */
tcomms_status_t tc_work_wrap(tc_posted_t p, tcomms_work_t **out);

#endif
