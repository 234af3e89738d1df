/* SPDX-License-Identifier: BSD-3-Clause */
/* The communicator as the core sees it: identity, the rendezvous store it shares with its splits, and one backend
 * communicator per device type. comm.c creates root communicators, split.c children, coll.c routes operations. */
#ifndef TC_COMM_H
#define TC_COMM_H

#include <stdatomic.h>

#include <tcomms/backend.h>

#include "comm_state.h"
#include "handle.h"
#include "store/store.h"

/* Store-key prefixes grow by a few characters per split level; keys add a short suffix to a prefix. */
#define TC_PREFIX_MAX 256
#define TC_SUBPREFIX_MAX (TC_PREFIX_MAX + 32) /* a prefix plus one "/s<n>/x" level */
#define TC_KEY_MAX (TC_SUBPREFIX_MAX + 32)

/* A store shared by a root communicator and every communicator split from it; freed with the last of them. */
typedef struct tc_store_ref {
    tcomms_store_t *store;
    tc_store_server_t *server; /* rank 0 of a root using the built-in store */
    int refs;                  /* guarded by a process-wide lock in comm.c */
    uint32_t linger_ms;        /* how long the server waits for the other ranks to disconnect (the root's timeout) */
    struct tc_flight_listener *flight; /* answers other ranks' questions about this process's operations (flight.h) */
} tc_store_ref_t;

/* A slot is bound when the communicator's device can serve it: the bound device's own type, or CPU (host buffers
 * always work). An unbound slot (a CUDA backend on a communicator bound to cpu) is loaded, never created. */
typedef struct tc_slot {
    const tcomms_backend_t *be; /* NULL: no backend for this device type */
    void *bcomm;                /* NULL while unbound */
    int bound;
} tc_slot_t;

struct tcomms_comm {
    uint32_t magic;    /* live once its backends exist (tc_comm_create_backends); handle.h */
    char name[128];
    char prefix[TC_PREFIX_MAX]; /* store-key prefix, identical on all members */
    int rank, size;
    int local_rank, local_size; /* among the members on this rank's host, as the rendezvous found them (topo.c) */
    int *hosts;        /* size entries: equal for members on one host (the lowest such rank of the root) */
    tcomms_device_t device;
    uint32_t timeout_ms;
    tcomms_hints_t *hints;
    tc_store_ref_t *store;
    char master_addr[256];
    uint64_t splits;   /* split calls so far, refused ones too (split.c): part of children's prefixes */
    uint64_t shrinks;  /* shrink calls so far, counted apart (split.c): the excluded ranks make none */
    int check_calls;   /* TCOMMS_CHECK_CALLS, read by the root, inherited by splits (call_check.c) */
    atomic_uint_least64_t calls_checked; /* the call check's sequence number */
    atomic_uint_least64_t ops_posted;    /* operations that passed validation: the trace's sequence number */
    tc_slot_t slot[TCOMMS_DEVICE_TYPE_COUNT];
    tc_comm_state_t *state; /* broken or aborted, and why, and the owner of the slots' bcomm: shared with the
                               operations posted on it, the last of which destroys the backends (comm_state.h) */
    struct tc_flight *flight; /* its last operations, for timeout messages and dumps (flight.h); may be NULL */
};

/* How a child's backends come from its parent's: split from them, or for a shrink through each backend's
 * comm_shrink where it has one (a parent healthy on every survivor), else afresh through the store (comm_create
 * as for a root: a failed parent's transport cannot be trusted). */
typedef enum tc_derive {
    TC_DERIVE_SPLIT = 0,
    TC_DERIVE_SHRINK,
    TC_DERIVE_AFRESH
} tc_derive_t;

/* Create every backend the communicator's slots name (collective over its members), then let the last member out
 * delete the creation keys (everything under "<prefix>/create/"; splits use "<prefix>/s<n>/", which a fast rank
 * may already be writing). On failure the slots created so far are destroyed. `parent` and `parent_ranks` are
 * NULL for a root; `how` says what a child takes from them. On success the communicator is live: tc_comm_check
 * accepts it. */
tcomms_status_t tc_comm_create_backends(tcomms_comm_t *comm, const tcomms_comm_t *parent, const int *parent_ranks,
                                        tc_derive_t how);
/* Delete every key under `prefix` (ending in '/') once all `members` callers have called this with it (last one
 * out, counted in the key "<prefix>done"). */
void tc_comm_cleanup_keys(tcomms_comm_t *comm, const char *prefix, int members);
/* The arguments a backend's comm_create (or comm_split_nonmember) gets for slot `t` of `comm`; `prefix` is the
 * backend's store-key prefix. */
void tc_comm_backend_args(const tcomms_comm_t *comm, int t, const char *prefix, const tcomms_comm_t *parent,
                          const int *parent_ranks, tcomms_backend_comm_args_t *args);
/* The bound backend slot serving `type`, or TCOMMS_ERR_NO_BACKEND_FOR_DEVICE naming what the communicator holds,
 * or TCOMMS_ERR_NOT_BOUND for a loaded slot the communicator is not bound to; `who` starts the message. */
tcomms_status_t tc_comm_slot(const tcomms_comm_t *comm, tcomms_device_type_t type, const char *who,
                             const tc_slot_t **out);
/* TCOMMS_ERR_NOT_BOUND if `comm` holds a slot it is not bound to (such a communicator cannot be split). */
tcomms_status_t tc_comm_check_bound(const tcomms_comm_t *comm, const char *who);
void tc_store_ref_release(tc_store_ref_t *ref);

/* SUCCESS for a live communicator; else TCOMMS_ERR_INVALID_ARG saying it is NULL (`arg` names the parameter),
 * destroyed, or no communicator. Every public entry taking a communicator calls it first. */
static inline tcomms_status_t tc_comm_check(const tcomms_comm_t *comm, const char *who, const char *arg)
{
    return tc_handle_check(comm, TC_HANDLE_COMM, who, arg);
}

void tc_store_ref_acquire(tc_store_ref_t *ref);

/* "tcomms_all_reduce" for TCOMMS_COLL_ALL_REDUCE, and so on (coll.c). */
const char *tc_coll_name(tcomms_coll_type_t type);

/* Timeout used when a blocking call waits on a backend: the operation's own plus a margin for the backend to
 * report its timeout first. */
#define TC_WAIT_MARGIN_MS 5000u

#endif
