/* SPDX-License-Identifier: BSD-3-Clause */
/* A communicator's failure state (comm_state.h). Written once, by the first error, and read on every call: the
 * status is atomic so that the healthy path takes no lock; the message is written under the lock before the status
 * becomes visible, so a reader that sees the status sees the message. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "comm_state.h"
#include "error.h"
#include "log.h"

struct tc_comm_state {
    atomic_int refs;
    _Atomic int failed;  /* 0 while healthy, else the first error's status */
    atomic_int aborted;  /* tcomms_comm_abort was called */
    pthread_mutex_t lock; /* serialises the writers of `failed` and `msg` */
    char name[128];
    int rank, size;
    char msg[768];
};

tcomms_status_t tc_comm_state_new(const char *name, int rank, int size, tc_comm_state_t **out)
{
    tc_comm_state_t *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "out of memory for the state of communicator '%s'", name);
    atomic_init(&s->refs, 1);
    pthread_mutex_init(&s->lock, NULL);
    snprintf(s->name, sizeof(s->name), "%s", name);
    s->rank = rank;
    s->size = size;
    *out = s;
    return TCOMMS_SUCCESS;
}

void tc_comm_state_ref(tc_comm_state_t *s)
{
    atomic_fetch_add(&s->refs, 1);
}

void tc_comm_state_unref(tc_comm_state_t *s)
{
    if (s == NULL || atomic_fetch_sub(&s->refs, 1) != 1)
        return;
    pthread_mutex_destroy(&s->lock);
    free(s);
}

tcomms_status_t tc_comm_state_check(tc_comm_state_t *s, const char *who)
{
    if (atomic_load_explicit(&s->failed, memory_order_acquire) == 0)
        return TCOMMS_SUCCESS;
    return tc_error(TCOMMS_ERR_ABORTED, "%s: communicator '%s' (rank %d of %d) is unusable: %s", who, s->name,
                    s->rank, s->size, s->msg);
}

/* The lock orders two first failures on different threads; the release store publishes the message. */
static int record(tc_comm_state_t *s, tcomms_status_t st, const char *msg)
{
    pthread_mutex_lock(&s->lock);
    int first = atomic_load_explicit(&s->failed, memory_order_relaxed) == 0;
    if (first) {
        snprintf(s->msg, sizeof(s->msg), "%s", msg);
        atomic_store_explicit(&s->failed, (int)st, memory_order_release);
    }
    pthread_mutex_unlock(&s->lock);
    return first;
}

void tc_comm_state_fail(tc_comm_state_t *s, tcomms_status_t st)
{
    if (st >= 0 || atomic_load_explicit(&s->failed, memory_order_relaxed) != 0)
        return;
    char msg[768];
    snprintf(msg, sizeof(msg), "%s (%s)", tcomms_last_error(), tcomms_strerror(st));
    if (record(s, st, msg))
        tc_log(TCOMMS_LOG_INFO, "core", "communicator '%s' is broken from now on: %s", s->name, msg);
}

int tc_comm_state_abort(tc_comm_state_t *s)
{
    if (atomic_exchange(&s->aborted, 1))
        return 0;
    char msg[256];
    snprintf(msg, sizeof(msg), "tcomms_comm_abort was called on it");
    record(s, TCOMMS_ERR_ABORTED, msg);
    return 1;
}

int tc_comm_state_breaks_post(tcomms_status_t st)
{
    switch (st) {
    case TCOMMS_ERR_ABORTED:
    case TCOMMS_ERR_REMOTE:
    case TCOMMS_ERR_TIMEOUT:
    case TCOMMS_ERR_SYSTEM:
    case TCOMMS_ERR_INTERNAL:
    case TCOMMS_ERR_PROTOCOL:
        return 1;
    default:
        return 0;
    }
}
