/* SPDX-License-Identifier: BSD-3-Clause */
/* A communicator's record (comm_state.h). The failure is written once, by the first error, and read on every call
 * (and in backends' progress loops): the status is atomic so that the healthy path takes no lock; the message is
 * written under the lock before the status becomes visible, so a reader that sees the status sees the message, and
 * it never changes afterwards, so comm_failed may hand out a pointer to it. */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_state.h"
#include "error.h"
#include "log.h"

struct tcomms_comm_state {
    atomic_int refs;
    struct {
        const tcomms_backend_t *be;
        void *bcomm;
    } owned[TCOMMS_DEVICE_TYPE_COUNT]; /* destroyed with the last reference */
    _Atomic int failed;  /* 0 while healthy, else the first error's status */
    atomic_int aborted;  /* tcomms_comm_abort was called */
    pthread_mutex_t lock; /* serialises the writers of `failed` and `msg` */
    char name[128];
    int rank, size;
    char msg[768];
    int why_len; /* the first error's own words: msg up to its status suffix */
    atomic_int explained; /* set once `diagnosis` is written: it then stands for `msg` (tc_comm_state_explain) */
    char diagnosis[1024];
};

/* What callers are told about the failure: the core's diagnosis of it where there is one, else the first error. */
static const char *message(tc_comm_state_t *s)
{
    return atomic_load_explicit(&s->explained, memory_order_acquire) ? s->diagnosis : s->msg;
}

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

void tc_comm_state_own(tc_comm_state_t *s, int t, const tcomms_backend_t *be, void *bcomm)
{
    s->owned[t].be = be;
    s->owned[t].bcomm = bcomm;
}

/* Runs on whichever thread dropped the last reference: tcomms_comm_destroy's, or that of the last
 * tcomms_work_free, whose caller does not expect a communicator's error, hence the warning. */
static tcomms_status_t destroy_backends(tc_comm_state_t *s)
{
    tcomms_status_t first = TCOMMS_SUCCESS;
    char msg[1024] = "";
    for (int t = 0; t < TCOMMS_DEVICE_TYPE_COUNT; t++) {
        if (s->owned[t].bcomm == NULL)
            continue;
        tc_log_set_comm(s->name);
        tcomms_status_t st = s->owned[t].be->comm_destroy(s->owned[t].bcomm);
        tc_log_set_comm(NULL);
        if (st != TCOMMS_SUCCESS) {
            tc_log(TCOMMS_LOG_WARN, "core", "communicator '%s': backend '%s' comm_destroy: %s", s->name,
                   s->owned[t].be->name, tcomms_last_error());
            if (first == TCOMMS_SUCCESS) {
                first = st;
                snprintf(msg, sizeof(msg), "%s", tcomms_last_error());
            }
        }
    }
    return first == TCOMMS_SUCCESS ? first : tc_error(first, "%s", msg);
}

tcomms_status_t tc_comm_state_unref(tc_comm_state_t *s)
{
    if (s == NULL || atomic_fetch_sub(&s->refs, 1) != 1)
        return TCOMMS_SUCCESS;
    tcomms_status_t st = destroy_backends(s);
    pthread_mutex_destroy(&s->lock);
    free(s);
    return st;
}

tcomms_status_t tc_comm_state_check(tc_comm_state_t *s, const char *who)
{
    if (atomic_load_explicit(&s->failed, memory_order_acquire) == 0)
        return TCOMMS_SUCCESS;
    return tc_error(TCOMMS_ERR_ABORTED, "%s: communicator '%s' (rank %d of %d) is unusable: %s", who, s->name,
                    s->rank, s->size, message(s));
}

/* The lock orders two first failures on different threads; the release store publishes the message. */
static int record(tc_comm_state_t *s, tcomms_status_t st, const char *msg, size_t why_len)
{
    pthread_mutex_lock(&s->lock);
    int first = atomic_load_explicit(&s->failed, memory_order_relaxed) == 0;
    if (first) {
        snprintf(s->msg, sizeof(s->msg), "%s", msg);
        s->why_len = (int)(why_len < strlen(s->msg) ? why_len : strlen(s->msg));
        atomic_store_explicit(&s->failed, (int)st, memory_order_release);
    }
    pthread_mutex_unlock(&s->lock);
    return first;
}

/* The first failure, "<message> (<status>)", from the core or a backend. */
static int record_failure(tc_comm_state_t *s, tcomms_status_t st, const char *why)
{
    if (st >= 0 || atomic_load_explicit(&s->failed, memory_order_relaxed) != 0)
        return 0;
    char msg[768];
    snprintf(msg, sizeof(msg), "%s (%s)", why, tcomms_strerror(st));
    int first = record(s, st, msg, strlen(why));
    if (first)
        tc_log(TCOMMS_LOG_INFO, "core", "communicator '%s' is broken from now on: %s", s->name, msg);
    return first;
}

void tc_comm_state_fail(tc_comm_state_t *s, tcomms_status_t st)
{
    record_failure(s, st, tcomms_last_error());
}

int tc_comm_state_report(tc_comm_state_t *s, tcomms_status_t st, const char *fmt, ...)
{
    if (s == NULL || st >= 0 || atomic_load_explicit(&s->failed, memory_order_relaxed) != 0)
        return 0;
    char why[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    return record_failure(s, st, why);
}

tcomms_status_t tc_comm_state_failed(tc_comm_state_t *s, const char **msg)
{
    int st = s != NULL ? atomic_load_explicit(&s->failed, memory_order_acquire) : 0;
    if (msg != NULL)
        *msg = st != 0 ? message(s) : "";
    return (tcomms_status_t)st;
}

int tc_comm_state_why(tc_comm_state_t *s, const char **why)
{
    *why = s->msg;
    return atomic_load_explicit(&s->failed, memory_order_acquire) != 0 ? s->why_len : 0;
}

void tc_comm_state_explain(tc_comm_state_t *s)
{
    if (s == NULL)
        return;
    pthread_mutex_lock(&s->lock);
    int st = atomic_load_explicit(&s->failed, memory_order_relaxed);
    if (st != 0 && !atomic_load_explicit(&s->explained, memory_order_relaxed)) {
        snprintf(s->diagnosis, sizeof(s->diagnosis), "%s (%s)", tcomms_last_error(), tcomms_strerror(st));
        atomic_store_explicit(&s->explained, 1, memory_order_release);
    }
    pthread_mutex_unlock(&s->lock);
}

int tc_comm_state_abort(tc_comm_state_t *s)
{
    if (atomic_exchange(&s->aborted, 1))
        return 0;
    char msg[256];
    snprintf(msg, sizeof(msg), "tcomms_comm_abort was called on it");
    record(s, TCOMMS_ERR_ABORTED, msg, strlen(msg));
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
