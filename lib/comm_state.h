/* SPDX-License-Identifier: BSD-3-Clause */
/* Whether a communicator still works, kept once in the core for every backend: the first error that broke it (an
 * operation's failure or tcomms_comm_abort) and its message. Shared, by reference count, by the communicator and
 * every operation posted on it, so a work handle that outlives its communicator still has somewhere to report. */
#ifndef TC_COMM_STATE_H
#define TC_COMM_STATE_H

#include <tcomms/tcomms.h>

typedef struct tc_comm_state tc_comm_state_t;

/* A healthy state for communicator `name` with one reference (the communicator's). */
tcomms_status_t tc_comm_state_new(const char *name, int rank, int size, tc_comm_state_t **out);
void tc_comm_state_ref(tc_comm_state_t *s);
/* Drop a reference; the last one frees the state. NULL is a no-op. */
void tc_comm_state_unref(tc_comm_state_t *s);

/* SUCCESS while healthy; else TCOMMS_ERR_ABORTED, "<who>: communicator '<name>' is unusable: <first error>". */
tcomms_status_t tc_comm_state_check(tc_comm_state_t *s, const char *who);
/* Record `st` with this thread's message as the communicator's failure unless one is recorded already. */
void tc_comm_state_fail(tc_comm_state_t *s, tcomms_status_t st);
/* Mark the state aborted by tcomms_comm_abort (the first error still wins); returns 1 the first time. */
int tc_comm_state_abort(tc_comm_state_t *s);

/* Does a backend's error from post() mean the communicator is broken? Bad arguments, a missing feature or a
 * shortage of memory leave it as it was; a failed peer, transport, device or an abort do not. */
int tc_comm_state_breaks_post(tcomms_status_t st);

#endif
