/* SPDX-License-Identifier: BSD-3-Clause */
/* A communicator's record in the core, shared by reference count by the public communicator and every operation
 * posted on it: whether it still works (the first error that broke it, an operation's failure, a backend's report
 * or tcomms_comm_abort, and its message), and its backend communicators, which the last reference destroys. So a
 * work handle that outlives its public communicator still has somewhere to report, and its backend communicator
 * is still there for it (include/tcomms/backend.h, "Lifetime"). */
#ifndef TC_COMM_STATE_H
#define TC_COMM_STATE_H

#include <tcomms/backend.h>

typedef tcomms_comm_state_t tc_comm_state_t;

/* A healthy state for communicator `name` with one reference (the communicator's). */
tcomms_status_t tc_comm_state_new(const char *name, int rank, int size, tc_comm_state_t **out);
void tc_comm_state_ref(tc_comm_state_t *s);
/* Hand the backend communicator of slot `t` to the record: the last reference destroys it. */
void tc_comm_state_own(tc_comm_state_t *s, int t, const tcomms_backend_t *be, void *bcomm);
/* Drop a reference; the last one destroys the backend communicators the record owns (comm_destroy, slot by slot)
 * and frees the state, returning the first backend error (SUCCESS otherwise, and for every other reference).
 * NULL is a no-op. */
tcomms_status_t tc_comm_state_unref(tc_comm_state_t *s);

/* SUCCESS while healthy; else TCOMMS_ERR_ABORTED, "<who>: communicator '<name>' is unusable: <first error>". */
tcomms_status_t tc_comm_state_check(tc_comm_state_t *s, const char *who);
/* Record `st` with this thread's message as the communicator's failure unless one is recorded already. */
void tc_comm_state_fail(tc_comm_state_t *s, tcomms_status_t st);
/* Mark the state aborted by tcomms_comm_abort (the first error still wins); returns 1 the first time. */
int tc_comm_state_abort(tc_comm_state_t *s);
/* tcomms_core_t.comm_fail and comm_failed (backend.h). */
int tc_comm_state_report(tc_comm_state_t *s, tcomms_status_t st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
tcomms_status_t tc_comm_state_failed(tc_comm_state_t *s, const char **msg);
/* The first error's own words, without the status its message ends with: *why and the length (0 while healthy),
 * for the core's diagnosis, which adds the status once. */
int tc_comm_state_why(tc_comm_state_t *s, const char **why);
/* The core's diagnosis of the failure (this thread's last error: which ranks never posted the timed-out operation,
 * lib/flight_ask.c) stands for the first error's message from now on, as it says more about the same failure (a
 * backend reported its own words first). Written once; a no-op while the communicator has not failed. */
void tc_comm_state_explain(tc_comm_state_t *s);

/* Does a backend's error from post() mean the communicator is broken? Bad arguments, a missing feature or a
 * shortage of memory leave it as it was; a failed peer, transport, device or an abort do not. */
int tc_comm_state_breaks_post(tcomms_status_t st);

#endif
