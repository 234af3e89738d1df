/* SPDX-License-Identifier: BSD-3-Clause */
/* The flight record: per communicator, a ring of its last operations (sequence number, what, how big, state,
 * times), written on the fast path with relaxed stores and no lock. flight.c keeps the rings and writes them as
 * JSON (TCOMMS_TRACE_DUMP); flight_ask.c answers other ranks' questions about them through the store and builds
 * the message of an operation that timed out, naming the ranks that never posted it. */
#ifndef TC_FLIGHT_H
#define TC_FLIGHT_H

#include <stdatomic.h>
#include <stdint.h>

#include <tcomms/backend.h>

#define TC_FLIGHT_RING 64 /* operations kept per communicator: a power of two */

typedef enum tc_flight_state {
    TC_FLIGHT_POSTED = 1, /* handed to the backend; nobody waits for it yet */
    TC_FLIGHT_WAITING,    /* a thread is inside a wait (or a blocking call) for it */
    TC_FLIGHT_COMPLETED,
    TC_FLIGHT_FAILED,
} tc_flight_state_t;

/* One operation as a rank saw it. Every field is a relaxed atomic so that readers on other threads (the store
 * listener, a dump) race with the owner without undefined behaviour; `seq` is stored last with release and read
 * twice by readers, so a copy whose seq did not change is one operation's fields. */
typedef struct tc_flight_entry {
    _Atomic uint64_t seq; /* 0: never written, or being rewritten */
    _Atomic uint64_t count;
    _Atomic int64_t t_post_us, t_end_us; /* CLOCK_REALTIME, so ranks on different hosts line up roughly */
    _Atomic int32_t root;                /* the arguments' root or peer, whatever the collective */
    _Atomic uint8_t type, dtype, op, state; /* op: the arguments' too */
} tc_flight_entry_t;

/* A plain copy of an entry, as readers see it and as it travels between ranks. */
typedef struct tc_flight_op {
    uint64_t seq, count;
    int64_t t_post_us, t_end_us;
    int root; /* -1 where the collective has neither root nor peer */
    int type, dtype, op, state; /* op: 0xff where the collective does not reduce */
} tc_flight_op_t;

typedef struct tc_flight tc_flight_t;
typedef struct tc_flight_listener tc_flight_listener_t;
struct tcomms_comm;

/* ---- flight.c ---- */
/* Give `comm` its record (root: parent NULL; a split: `parent_ranks` maps its ranks to the parent's) and list it
 * for the listener and for dumps. Never fails the communicator: without memory it simply has no record. */
void tc_flight_attach(struct tcomms_comm *comm, const struct tcomms_comm *parent, const int *parent_ranks);
/* Unlist `comm`'s record and drop the communicator's reference; posted operations keep theirs. */
void tc_flight_detach(struct tcomms_comm *comm);
void tc_flight_ref(tc_flight_t *f);
void tc_flight_unref(tc_flight_t *f);
/* Record the operation `a` (a->seq set) in `state`: POSTED, or WAITING for a blocking call that waits at once.
 * NULL `f` is a no-op. */
void tc_flight_post(tc_flight_t *f, const tcomms_coll_args_t *a, tc_flight_state_t state);
/* Move operation `seq` to `state` (its end time too, for COMPLETED and FAILED). */
void tc_flight_mark(tc_flight_t *f, uint64_t seq, tc_flight_state_t state);
/* When operation `seq` was posted (microseconds, CLOCK_REALTIME), or 0 if the ring no longer holds it. */
int64_t tc_flight_posted_us(tc_flight_t *f, uint64_t seq);
/* Write every listed record to the TCOMMS_TRACE_DUMP file, if that is set; `why` goes into the file. */
void tc_flight_dump(const char *why);

/* ---- flight_ask.c ---- */
/* Operation `seq` of `f` ended in a timeout (status `st`, whose message is this thread's last error): ask the
 * other ranks for their records, within a short bound, and replace the message with one that names the ranks that
 * never posted `seq` and where each rank is; the backend's own message is kept at the end. Returns 1 when the
 * message is now that diagnosis (0: nobody to ask, or asked before). */
int tc_flight_timed_out(tc_flight_t *f, uint64_t seq, uint32_t timeout_ms, tcomms_status_t st);
/* The backend broke `f`'s communicator (`st`: TCOMMS_ERR_ABORTED or TCOMMS_ERR_TIMEOUT, as an NCCL watchdog
 * reports a timeout to the operations that were not waited for) and this rank does not know which operation timed
 * out: ask as above and name the first operation where the ranks diverge. Other statuses: returns `st` at once.
 * Either of the two asks once per communicator. Returns as tc_flight_timed_out does. */
int tc_flight_broken(tc_flight_t *f, uint32_t timeout_ms, tcomms_status_t st);
/* Answer other ranks' questions about this process's records from a thread of its own, on a second connection to
 * the store at addr:port (the built-in store; `root_rank` is this process's rank in the root communicator). NULL
 * when the thread could not start: records are then just not shared. */
tc_flight_listener_t *tc_flight_listen(const char *addr, int port, int root_rank);
/* Stop the thread (waking it with a question through `store`, the process's own connection) and close its
 * connection. NULL: no-op. */
void tc_flight_listen_stop(tc_flight_listener_t *l, tcomms_store_t *store);

/* ---- shared between the two ---- */
/* Copy entry `seq` (or the newest entry when seq is 0) of `f`; 0 when the ring no longer holds it. */
int tc_flight_read(tc_flight_t *f, uint64_t seq, tc_flight_op_t *out);
/* The record of `f` as text lines, one operation a line ("seq type count dtype op root state t_post t_end"),
 * oldest first, after a first line "posted <ops posted>"; malloc'ed, *len set. */
char *tc_flight_text(tc_flight_t *f, size_t *len);
/* 1 for the first caller on `f`, then 0: a communicator is diagnosed once, at its first failure. */
int tc_flight_first_failure(tc_flight_t *f);
/* Look up this process's record of the communicator with store prefix `prefix`, with a reference. */
tc_flight_t *tc_flight_find(const char *prefix);
/* Identity of a record: its communicator's name, prefix, rank, size, members' root ranks; its store, under
 * tc_flight_lock_store: NULL once the communicator is destroyed, or where this process has no listener (an
 * application's store), so that no question is asked. */
typedef struct tc_flight_who {
    const char *name, *prefix;
    int rank, size;
    const int *root_ranks;
} tc_flight_who_t;
tc_flight_who_t tc_flight_who(const tc_flight_t *f);
tcomms_store_t *tc_flight_lock_store(tc_flight_t *f);
void tc_flight_unlock_store(tc_flight_t *f);
/* "all_reduce #12<where> (4 KiB float32 sum, <state>)" into buf; `where` (" on 'world'") and `state` may be
 * NULL. */
void tc_flight_describe(const tc_flight_op_t *op, const char *where, const char *state, char *buf, size_t len);
const char *tc_flight_state_name(int state);
int64_t tc_flight_now_us(void);

#endif
