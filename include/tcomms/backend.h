/* SPDX-License-Identifier: BSD-3-Clause */
/* The contract between the tcomms core and a backend module (tcomms_<name>.so in $(pkglibdir) or
 * TCOMMS_BACKEND_PATH). A module exports one symbol, `tcomms_backend_module`, a tcomms_backend_t. The core checks
 * its `abi` header before reading anything else, calls query() once, and validates every argument before calling an
 * operation, so backends trust what they are given. Backends reach shared services (logging, errors, dtype table,
 * reductions, the rendezvous store) through the tcomms_core_t they receive, never by linking libtcomms. */
#ifndef TCOMMS_BACKEND_H
#define TCOMMS_BACKEND_H

#include <stdarg.h>
#include <stddef.h>
#include <tcomms/tcomms.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI is versioned by parts, as UCX's field_mask and NCCL's versioned plugin tables are, so that adding an
 * entry does not break every module built before it:
 * - MINOR grows when fields are appended to tcomms_backend_t or tcomms_core_t (never inserted, removed or
 *   retyped). A module built for an older minor still loads: the core reads only the bytes its table declares
 *   (abi.size) and treats every later field as 0/NULL, the "not offered" of an optional entry.
 * - MAJOR grows on any other change (a field of the argument structs below inserted, removed or retyped; appending
 *   one is a minor change: the core fills the newest layout, and an older module reads the part it knows). A
 *   module of another major, or of a newer minor than the core's, is refused with TCOMMS_ERR_ABI.
 * Major 7 follows the single version number 6 that came before, in the same first 4 bytes, so a core of either
 * scheme refuses a module of the other by its first field alone. Minor history: 7.0, the entries of ABI 6;
 * 7.1, tcomms_backend_t.priority and comm_abort, tcomms_core_t.coll_info and tcomms_coll_args_t.seq; 7.2,
 * tcomms_backend_t.algorithm and comm_setting, tcomms_backend_comm_args_t.state, tcomms_core_t.setting_resolve,
 * env_int, env_bool, comm_fail and comm_failed; 7.3, tcomms_backend_t.comm_shrink. */
#define TCOMMS_BACKEND_ABI_MAJOR 7u
#define TCOMMS_BACKEND_ABI_MINOR 3u

/* The first member of tcomms_backend_t and tcomms_core_t: which ABI the table was built against, and its size
 * then. */
typedef struct tcomms_abi {
    uint32_t major;
    uint32_t minor;
    uint32_t size; /* sizeof the table as its builder saw it: fields at or past this offset do not exist */
} tcomms_abi_t;

/* The `abi` header of a table of `type` built against this header: `.abi = TCOMMS_ABI_INIT(tcomms_backend_t)`. */
#define TCOMMS_ABI_INIT(type) {TCOMMS_BACKEND_ABI_MAJOR, TCOMMS_BACKEND_ABI_MINOR, (uint32_t)sizeof(type)}

/* Whether `field` of the table `*ptr` (of `type`) lies within the size its builder declared; a module may use it
 * on the tcomms_core_t it receives, e.g. TCOMMS_ABI_HAS(core, tcomms_core_t, op_name). */
#define TCOMMS_ABI_HAS(ptr, type, field) \
    (offsetof(type, field) + sizeof(((type *)0)->field) <= (size_t)(ptr)->abi.size)

#define TCOMMS_BACKEND_SYMBOL "tcomms_backend_module"

typedef enum tcomms_log_level {
    TCOMMS_LOG_ERROR = 1,
    TCOMMS_LOG_WARN = 2,
    TCOMMS_LOG_INFO = 3,
    TCOMMS_LOG_DEBUG = 4,
    TCOMMS_LOG_TRACE = 5
} tcomms_log_level_t;

/* c[i] = a[i] op b[i] for n elements; c may alias a or b. AVG reduces as SUM (finish with avg_finish). An integer
 * AVG reaches a CPU backend as an int64 AVG or SUM over the core's widened copy (lib/avg.c), so its sum cannot
 * wrap. */
typedef void (*tcomms_reduce_fn_t)(void *c, const void *a, const void *b, size_t n);

typedef struct tcomms_store tcomms_store_t;

/* A communicator's failure state, kept by the core (lib/comm_state.c) and lent to its backends through
 * tcomms_backend_comm_args_t.state: opaque, reached through tcomms_core_t.comm_fail and comm_failed. */
typedef struct tcomms_comm_state tcomms_comm_state_t;

typedef enum tcomms_coll_type {
    TCOMMS_COLL_ALL_REDUCE,
    TCOMMS_COLL_BROADCAST,
    TCOMMS_COLL_REDUCE,
    TCOMMS_COLL_ALL_GATHER,
    TCOMMS_COLL_ALL_GATHER_V,
    TCOMMS_COLL_REDUCE_SCATTER,
    TCOMMS_COLL_REDUCE_SCATTER_V,
    TCOMMS_COLL_ALL_TO_ALL,
    TCOMMS_COLL_ALL_TO_ALL_V,
    TCOMMS_COLL_GATHER,
    TCOMMS_COLL_SCATTER,
    TCOMMS_COLL_BARRIER,
    TCOMMS_COLL_SEND,
    TCOMMS_COLL_RECV,
    TCOMMS_COLL_TYPE_COUNT
} tcomms_coll_type_t;

/* What every operation is, described once (lib/coll_info.c). A PER_RANK buffer holds one block of `count` elements
 * per rank (the v-variants: a block per rank of the counts' lengths); at a root-only end (gather's receive,
 * scatter's send, reduce's receive) only the root has that buffer. */
enum {
    TCOMMS_COLL_REDUCES = 1u << 0,       /* takes `op` */
    TCOMMS_COLL_ROOTED = 1u << 1,        /* `peer` is the root */
    TCOMMS_COLL_P2P = 1u << 2,           /* `peer` is the other rank: point-to-point */
    TCOMMS_COLL_IN_PLACE = 1u << 3,      /* has an in-place form */
    TCOMMS_COLL_ONE_BUFFER = 1u << 4,    /* one buffer (broadcast): the root's data start in it */
    TCOMMS_COLL_SEND_PER_RANK = 1u << 5, /* the send buffer holds a block per rank */
    TCOMMS_COLL_RECV_PER_RANK = 1u << 6  /* the receive buffer holds a block per rank */
};

typedef struct tcomms_coll_info {
    const char *name;  /* "all_reduce": for messages, tables and environment variables */
    const char *api;   /* "tcomms_all_reduce": the public call */
    unsigned flags;    /* TCOMMS_COLL_* above */
    int count_arrays;  /* 0; 1: recvcounts (alike on every rank); 2: sendcounts and recvcounts (all_to_all_v) */
} tcomms_coll_info_t;

/* The row of `type`, or NULL for a value that is no tcomms_coll_type_t. For programs linking libtcomms (tools);
 * modules, which do not, reach the same table through tcomms_core_t. */
TCOMMS_API const tcomms_coll_info_t *tcomms_coll_info(tcomms_coll_type_t type);

/* Services the core lends to backends. Every entry is set; `abi` says which minor the core implements, and a
 * module never gets an older one than it was built for (the loader refuses such a module). */
typedef struct tcomms_core {
    tcomms_abi_t abi;          /* TCOMMS_ABI_INIT(tcomms_core_t) */
    /* Log to stderr when `level` <= TCOMMS_LOG_LEVEL (or TCOMMS_<BACKEND>_LOG_LEVEL). */
    void (*log)(tcomms_log_level_t level, const char *who, const char *fmt, ...)
#if defined(__GNUC__)
        __attribute__((format(printf, 3, 4)))
#endif
        ;
    /* Set this thread's detailed message and return `status`, for `return core->error(...)`. */
    tcomms_status_t (*error)(tcomms_status_t status, const char *fmt, ...)
#if defined(__GNUC__)
        __attribute__((format(printf, 2, 3)))
#endif
        ;
    /* Bytes per element of `dtype`. */
    size_t (*dtype_size)(tcomms_dtype_t dtype);
    /* The reduction kernel for (dtype, op); never NULL for valid arguments. */
    tcomms_reduce_fn_t (*reduce_fn)(tcomms_dtype_t dtype, tcomms_op_t op);
    /* Divide n elements in place by `divisor` (the AVG epilogue). */
    void (*avg_finish)(void *buf, size_t n, tcomms_dtype_t dtype, int divisor);
    /* The rendezvous store. Keys are plain strings; values are bytes. get() waits for the key up to timeout_ms and
     * returns a malloc'ed copy the caller frees. */
    tcomms_status_t (*store_set)(tcomms_store_t *s, const char *key, const void *value, size_t len);
    tcomms_status_t (*store_get)(tcomms_store_t *s, const char *key, void **value, size_t *len, uint32_t timeout_ms);
    tcomms_status_t (*store_wait)(tcomms_store_t *s, const char *const *keys, size_t nkeys, uint32_t timeout_ms);
    tcomms_status_t (*store_add)(tcomms_store_t *s, const char *key, int64_t delta, int64_t *result);
    tcomms_status_t (*store_del)(tcomms_store_t *s, const char *key);
    /* The value of canonical hint `key` in `hints` (may be NULL), or TCOMMS_ERR_NOT_FOUND. */
    tcomms_status_t (*hints_get)(const tcomms_hints_t *hints, const char *key, const char **value);
    /* Iterate the entries of `hints` (may be NULL: 0 entries), so a backend can reject namespaced keys it does not
     * know at creation. */
    size_t (*hints_count)(const tcomms_hints_t *hints);
    tcomms_status_t (*hints_entry)(const tcomms_hints_t *hints, size_t i, const char **key, const char **value);
    /* (ABI 4; 7.0) Every rank's `len` bytes on every one of `size` ranks, through rank 0, under keys starting with
     * `prefix`: about 3N store requests instead of the N^2 of every rank reading every key. vals[r] and lens[r]
     * for r < size, each malloc'ed (the caller frees them). On failure, *missing is the rank waited for (rank 0
     * waits for each rank, the others for rank 0), -1 for none. */
    tcomms_status_t (*store_allgather)(tcomms_store_t *s, const char *prefix, int rank, int size, const void *mine,
                                       size_t len, uint32_t timeout_ms, void **vals, size_t *lens, int *missing);
    /* (ABI 5; 7.0) The names tcomms_dtype_name and tcomms_op_name give, for messages. */
    const char *(*dtype_name)(tcomms_dtype_t dtype);
    const char *(*op_name)(tcomms_op_t op);
    /* (7.1) tcomms_coll_info: what each operation is (its name, whether it reduces, has a root, count arrays). */
    const tcomms_coll_info_t *(*coll_info)(tcomms_coll_type_t type);
    /* (7.2) A setting of a communicator being created whose library reads environment variable `var` (NULL: none)
     * over its config, as NCCL does NCCL_MIN_CTAS: `hint` is the hint's value (NULL: not given), `dflt` the default
     * (NULL where the backend computes it later). *out is what runs and where it came from (tcomms_comm_setting).
     * A hint the variable overrides is a warning naming both, or TCOMMS_ERR_BAD_ENV when `hints` set
     * strict_hints: one rule for every module. */
    tcomms_status_t (*setting_resolve)(const tcomms_hints_t *hints, const char *who, const char *key,
                                       const char *hint, const char *var, const char *dflt, tcomms_setting_t *out);
    /* (7.2) Read environment variable `name` as the core reads its own (docs/env.md): *out = dflt when unset;
     * otherwise the value must be an integer in [min, max], or a boolean (1/0, true/false, yes/no, on/off), an
     * empty value being malformed too: TCOMMS_ERR_BAD_ENV with a message naming the variable and its value. */
    tcomms_status_t (*env_int)(const char *name, long min, long max, long dflt, long *out);
    tcomms_status_t (*env_bool)(const char *name, int dflt, int *out);

    /* ---- 7.2: the communicator's failure state (the block at the end of this file says who does what) ---- */
    /* Record that the communicator owning `state` broke with `status` (< 0) and a message saying which rank, peer
     * and operation; the first failure wins, later ones are ignored. From then on the core refuses every call on
     * that communicator with TCOMMS_ERR_ABORTED naming this message. Any thread, any lock held. Returns 1 when this
     * call recorded the failure, 0 when one was recorded before. */
    int (*comm_fail)(tcomms_comm_state_t *state, tcomms_status_t status, const char *fmt, ...)
#if defined(__GNUC__)
        __attribute__((format(printf, 3, 4)))
#endif
        ;
    /* TCOMMS_SUCCESS while the communicator works; else the first failure's status, with *msg (if msg is not NULL)
     * its message, valid as long as the backend's communicator. One atomic load on the healthy path: cheap enough
     * for a progress loop. Any thread. */
    tcomms_status_t (*comm_failed)(tcomms_comm_state_t *state, const char **msg);
} tcomms_core_t;

/* What a backend needs to create its part of a communicator. For a split, `parent` is the backend's own parent
 * communicator and `parent_ranks` lists the child's members as parent ranks; both are NULL for a root. The
 * children of one split call have disjoint member lists, so parent_ranks[0] identifies the child among them (a
 * color for ncclCommSplit) and `rank` orders it (the key). */
typedef struct tcomms_backend_comm_args {
    const tcomms_core_t *core;
    const char *name;          /* the communicator's name, for messages */
    const char *prefix;        /* a store-key prefix unique to this creation and identical on its members; the core
                                  deletes the keys under it once every member's creation has returned, so use it
                                  during creation only */
    tcomms_store_t *store;
    int rank, size;
    int local_rank, local_size; /* (local_size: ABI 6) this rank's index among the members on its host, and their
                                   number, as the core's rendezvous found them (the launcher's variables only
                                   cross-check them); a split's non-member gets the parent's */
    const int *hosts;          /* (ABI 6) hosts[r] for r < size: equal for members on one host, different
                                  otherwise (an id, not an index: do not count on its range); NULL for a split's
                                  non-member. Valid during comm_create only: copy what is needed later. */
    tcomms_device_t device;    /* index >= 0; a CUDA device asked as -1 arrives as local_rank: take it modulo the
                                  number of visible devices */
    const char *master_addr;   /* may be NULL (user store, or size 1) */
    uint32_t timeout_ms;
    const tcomms_hints_t *hints;
    void *parent;
    const int *parent_ranks;
    const char *comm_prefix;   /* the communicator's own prefix, kept while it lives (ABI 3): keys a backend needs
                                  later (e.g. per-split agreements on the parent) go under it, never under
                                  "<comm_prefix>/s", "<comm_prefix>/k" or "<comm_prefix>/create", which the core
                                  uses */
    tcomms_comm_state_t *state; /* (7.2) the communicator's failure state, for core->comm_fail and comm_failed:
                                   valid until comm_destroy returns (also during a failed comm_create);
                                   NULL for comm_split_nonmember, which makes no communicator */
} tcomms_backend_comm_args_t;

/* One operation, validated by the core. Field use per type follows the public API: `count` is the element count
 * per rank (sendcount for gathers, recvcount for scatters/reduce_scatter, the per-peer block for all_to_all);
 * v-variants use the count/displacement arrays (never NULL: the core fills packed displacements). `in_place` is
 * set when the caller used the in-place aliasing of that operation. `peer` is the root or the p2p peer. */
typedef struct tcomms_coll_args {
    tcomms_coll_type_t type;
    const void *sendbuf;
    void *recvbuf;
    size_t count;
    const size_t *sendcounts, *sdispls, *recvcounts, *rdispls;
    tcomms_dtype_t dtype;
    tcomms_op_t op;
    int peer;
    int in_place;
    uint32_t timeout_ms;       /* resolved: never 0 */
    void *stream;              /* the caller's stream (device backends); NULL = the legacy default stream */
    uint32_t flags;            /* TCOMMS_COLL_FLAG_* */
    uint64_t seq;              /* (7.1) the operation's number among those posted on this communicator by this
                                  rank, from 1: the number the core's trace line gives it, for a backend's own */
} tcomms_coll_args_t;

/* Posted by a blocking call: the core waits for the work and frees it right after post() returns (outside a
 * group), so a device backend may order the operation on the caller's stream directly. */
#define TCOMMS_COLL_FLAG_BLOCKING (1u << 0)
/* Blocking and outside a group: nothing of the caller's runs between post() and the core's wait, on this thread.
 * A backend may then run the operation to its end inside post() and, when it succeeded, return TCOMMS_SUCCESS
 * with *bwork = NULL: the core then neither waits nor frees (a small call saves the handle's round trips). A
 * failed operation still comes back as a handle, whose wait reports it. Cores before this flag never set it. */
#define TCOMMS_COLL_FLAG_INLINE (1u << 1)

/* Fill it with designated initialisers, `.abi = TCOMMS_ABI_INIT(tcomms_backend_t), .name = ...`, never by
 * position: entries may be appended in any minor, and an entry left out is NULL (optional) or refused at load
 * (required). A C++ module defines the table in a small C file (backends/gloo/table.c) until C++20 can. */
typedef struct tcomms_backend {
    tcomms_abi_t abi;          /* TCOMMS_ABI_INIT(tcomms_backend_t): checked before any other field is read */
    /* ---- 7.0: name, device_types, comm_create, comm_destroy, post and work_* are required (a module lacking
     * one is refused at load); the others may be NULL ---- */
    const char *name;          /* for messages; normally that of its file, tcomms_<name>.so, which is what a
                                  selection names and what hints "<name>.<key>" are accepted for (the core checks
                                  only that such a module exists; the module checks its own keys) */
    const char *description;
    uint32_t device_types;     /* bit (1u << tcomms_device_type_t) for each type served; not 0 */
    const char *const *hints;  /* NULL-terminated list of hint keys this backend honours, for tcomms-info */
    /* Can this backend run here? Write a reason into `reason` and return non-SUCCESS to decline. Optional: NULL
     * accepts. Called only for a module that is selected or is the next default candidate, never merely to read
     * its table, so a GPU module does not initialise its driver in a CPU-only program. */
    tcomms_status_t (*query)(const tcomms_core_t *core, char *reason, size_t len);
    /* Collective over the members: create, then run a barrier so the communicator is ready on return. */
    tcomms_status_t (*comm_create)(const tcomms_backend_comm_args_t *args, void **bcomm);
    tcomms_status_t (*comm_destroy)(void *bcomm);
    /* The applied value of a canonical hint key, or TCOMMS_ERR_NOT_SUPPORTED for "not applicable". Optional:
     * NULL reads "not applicable" for every key. */
    tcomms_status_t (*comm_hint)(void *bcomm, const char *key, char *buf, size_t len);
    /* Start an operation; *bwork is its handle. `args` and the arrays it points to belong to the caller and may be
     * freed as soon as post() returns: copy what the operation needs later. */
    tcomms_status_t (*post)(void *bcomm, const tcomms_coll_args_t *args, void **bwork);
    tcomms_status_t (*work_test)(void *bwork);
    tcomms_status_t (*work_wait)(void *bwork, uint32_t timeout_ms);
    void (*work_free)(void *bwork);

    /* ---- optional (NULL: not offered; the core's fallback is given) ---- */
    /* Block the host until the work completed on its device (fallback: work_wait). */
    tcomms_status_t (*work_synchronize)(void *bwork, uint32_t timeout_ms);
    /* A split's non-members, collectively with the members' comm_create (ncclCommSplit with NCCL_SPLIT_NOCOLOR).
     * Fallback: nothing is called on non-members. */
    tcomms_status_t (*comm_split_nonmember)(void *parent, const tcomms_backend_comm_args_t *args);
    /* Bracket the operations this thread posts to this backend inside a tcomms group. The core calls
     * group_start before the first such post and group_end at the outermost tcomms_group_end, before it waits for
     * the group's blocking calls. Fallback: operations are posted one by one (CPU backends never block in post). */
    tcomms_status_t (*group_start)(void);
    tcomms_status_t (*group_end)(void);
    /* Memory suited to this backend (fallback: page-aligned malloc for a CPU backend, NOT_SUPPORTED otherwise). */
    tcomms_status_t (*mem_alloc)(void *bcomm, size_t bytes, void **ptr);
    tcomms_status_t (*mem_free)(void *bcomm, void *ptr);
    /* Register a buffer (flags: TCOMMS_MEM_REG_*); *handle is passed back to deregister. Fallback: a no-op
     * registration, and NOT_SUPPORTED for TCOMMS_MEM_REG_WINDOW. */
    tcomms_status_t (*mem_register)(void *bcomm, void *buf, size_t bytes, unsigned flags, void **handle);
    tcomms_status_t (*mem_deregister)(void *bcomm, void *handle);

    /* ---- 7.1 ---- */
    /* Rank among the modules serving a device type when no selection names one (Open MPI's comm_query
     * priority, UCC's score): the greatest wins, ties go to the name first in strcmp order, and a module that
     * declines makes way for the next. A 7.0 module has 0. The modules of this tree use 10 (gloo), 20 (ucx),
     * 20 (nccl); docs/backends.md says why. */
    int32_t priority;
    /* (7.1) End every pending operation of `bcomm` promptly: each one's work_test/wait/synchronize returns
     * TCOMMS_ERR_ABORTED (one already complete keeps its status) within about a second, and stops using the
     * caller's buffers before it does. Called at most once per communicator, from any thread, while other threads
     * may be inside post(), work_wait() or work_test() on it; never concurrently with comm_destroy. Must return
     * within a bound of its own whatever the peers do (a blocking library call goes on a thread of its own and is
     * left behind after the bound, as backends/nccl/end.c does). Affects `bcomm` only: neither its split children
     * nor its parent. Later calls on it (post, comm_destroy) must still work; the core refuses new operations
     * itself. Optional: without it, pending operations end at their timeouts. */
    tcomms_status_t (*comm_abort)(void *bcomm);

    /* ---- 7.2 ---- */
    /* The name of the algorithm post() would run `args` with (a static string, e.g. "ring"), for the core's
     * TRACE line of the operation, which calls it just before post() and only while that level is on. Optional:
     * NULL, or a NULL answer, says the backend chooses nothing the user could tell apart (or cannot know). */
    const char *(*algorithm)(void *bcomm, const tcomms_coll_args_t *args);
    /* tcomms_comm_setting: the value of canonical key `key` in force and where it came from, or
     * TCOMMS_ERR_NOT_SUPPORTED for "not applicable". Optional: NULL falls back to comm_hint, a given hint then
     * reading as TCOMMS_SETTING_HINT and anything else as TCOMMS_SETTING_DEFAULT. */
    tcomms_status_t (*comm_setting)(void *bcomm, const char *key, tcomms_setting_t *out);

    /* ---- 7.3 ---- */
    /* tcomms_comm_shrink of a parent that is healthy on every survivor: the survivors' child from `parent`, the
     * backend's own communicator (ncclCommShrink), collective over the survivors only; args->parent_ranks lists
     * them (the child's ranks in order), every other parent rank is left out and calls nothing. Optional: NULL, and
     * a parent that failed on any survivor, make the core call comm_create instead, with `parent` and
     * `parent_ranks` NULL, as for a root: a fresh exchange through the store among the survivors. */
    tcomms_status_t (*comm_shrink)(void *parent, const tcomms_backend_comm_args_t *args, void **bcomm);
} tcomms_backend_t;

/* ---- what the core does for every backend, and what it leaves to it ----------------------------------------------
 * Failure. The core keeps whether a communicator failed and the first error's message (lib/comm_state.c): a
 * failure a backend reports with core->comm_fail(args->state, ...), a final error returned by
 * work_test/wait/synchronize, an error of post() other than INVALID_ARG, NOT_SUPPORTED, NO_MEMORY and MISMATCH, or
 * tcomms_comm_abort. From then on the core answers every operation and split on that communicator with
 * TCOMMS_ERR_ABORTED naming the first error, before the backend sees the call. A backend keeps no copy of it. It
 * returns its errors with a message (core->error); it reports with comm_fail, the moment it sees it, a failure that
 * leaves its transport inconsistent (a lost peer, a timeout that leaves messages in flight), naming the rank, the
 * peer and the operation, so the core knows even when nobody waits on the failed handle; and where it runs
 * operations on its own (a progress sweep, a worker's queue, a watchdog) it reads comm_failed and fails them, which
 * also covers failures the core recorded itself (an abort, another device's slot, a final error). comm_failed may
 * change from healthy to failed between the core's check and post(): a post that finds it failed returns
 * TCOMMS_ERR_ABORTED with its message.
 * Lifetime. The core calls comm_destroy(bcomm) only once nothing of that communicator is left: the public
 * communicator, every work handle (a group's kept blocking calls too, until completed) and every mem_register
 * handle hold a reference on the core's record of it (lib/comm_state.c; a blocking call outside a group borrows
 * the communicator's, which cannot be destroyed before the call returns), and the last one released destroys the
 * backend's communicators, on that thread: tcomms_comm_destroy when no handle is left, else the last
 * tcomms_work_free or tcomms_mem_deregister. So post, work_test/wait/synchronize, work_free and mem_deregister
 * always find bcomm and what it owns alive, and a backend needs no
 * bookkeeping of its handles for the communicator's sake (no detaching, no count of handles out). Left to the
 * backend: work_free does not wait, so comm_destroy must still wait for operations freed while running (each
 * ends by its timeout at the latest) and free nothing they use before; comm_destroy may run on any thread (set the
 * device current itself) and its error reaches the caller only when tcomms_comm_destroy ran it (else it is logged);
 * a split child and its parent are destroyed independently, each with its own references, so what a child shares
 * with its parent (UCX's endpoints, Gloo's device, NCCL's splitShare) needs a reference count of its own; and
 * mem_deregister may come after tcomms_comm_destroy, on a communicator no other call reaches any more.
 * Threads. The core serialises nothing: the public API asks callers to serialise calls on one communicator, but
 * work handles of one communicator may be waited for on different threads, a progress thread of the backend's own
 * runs beside them, and comm_abort may come from any thread at any time. */

#ifdef __cplusplus
}
#endif
#endif /* TCOMMS_BACKEND_H */
