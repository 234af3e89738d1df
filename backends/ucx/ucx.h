/* SPDX-License-Identifier: BSD-3-Clause */
/* Internal declarations of the UCX backend: the process-wide context (one UCP context and worker, the endpoint
 * cache, the progress thread), communicators, tags, and the functions the backend's files share. Algorithms do not
 * include this: they see engine.h only. Nothing here is exported from the module. */
#ifndef TCU_UCX_H
#define TCU_UCX_H

#include <pthread.h>
#include <stdint.h>
#include <ucp/api/ucp.h>

#include "clock.h" /* lib/util/clock.h */
#include "hash.h"  /* lib/util/hash.h */
#include "engine.h"

/* ---- tags (docs/ucx.md): kind 2 | communicator id 18 | source rank 16 | low 28 ---------------------------------
 * low = collective sequence 12 | shape 8 | slot 8 for collectives, hash 20 | slot 8 for creation, or a per-peer
 * sequence 28 for send/recv. The shape (shape.c) makes ranks that disagree about a collective's type, dtype, op or
 * root post messages the other side never takes. */
enum { TCU_KIND_COLL = 0, TCU_KIND_P2P = 1, TCU_KIND_BOOT = 2 };
#define TCU_KIND_SHIFT 62
#define TCU_CID_SHIFT 44
#define TCU_CID_MAX ((1u << 18) - 1)
#define TCU_SRC_SHIFT 28
#define TCU_MAX_RANKS (1 << 16)
#define TCU_LOW_MASK ((1u << 28) - 1)
#define TCU_SEQ_SHIFT 16
#define TCU_SEQ_BITS 12
#define TCU_SHAPE_SHIFT 8
#define TCU_BOOT_HASH_MASK ((1u << 20) - 1)
/* Collectives of one communicator in flight at once on this rank: half the sequence space, so that a rank this far
 * ahead of a peer still cannot post a message the peer takes for an older operation's. */
#define TCU_MAX_IN_FLIGHT (1 << (TCU_SEQ_BITS - 1))

static inline uint64_t tcu_tag(int kind, uint32_t cid, int src, uint32_t low)
{
    return ((uint64_t)kind << TCU_KIND_SHIFT) | ((uint64_t)cid << TCU_CID_SHIFT) |
           ((uint64_t)(uint32_t)src << TCU_SRC_SHIFT) | (low & TCU_LOW_MASK);
}

/* The low tag bits of collective number `seq` with shape code `shape`. */
static inline uint32_t tcu_coll_low(uint32_t seq, unsigned shape)
{
    return (seq & ((1u << TCU_SEQ_BITS) - 1)) << TCU_SEQ_SHIFT | shape << TCU_SHAPE_SHIFT;
}

/* The shape code of a collective (shape.c): the same on every rank that makes the same call. */
unsigned tcu_shape(const tcomms_coll_args_t *a);
/* What a shape code says, for messages: "all_reduce (float32, sum)"; `size` decodes roots exactly up to 29 ranks. */
void tcu_shape_describe(const tcomms_core_t *core, unsigned shape, int size, char *buf, size_t len);
/* Rooted collectives (a rank may only send): their sends complete only once the receiver took them. */
int tcu_shape_rooted(tcomms_coll_type_t type);

/* ---- the process-wide context ------------------------------------------------------------------------------- */

/* One peer worker, reached by every communicator that has it as a member. */
typedef struct tcu_ep {
    tc_hlink_t link;       /* first: the endpoint cache's links are endpoints */
    ucp_ep_h ep;
    int failed;            /* ucs_status_t reported by the error handler (peer error mode), 0 while healthy */
    size_t addr_len;
    unsigned char addr[];  /* the peer worker's address */
} tcu_ep_t;

typedef struct tcu_comm tcu_comm_t;

/* A waiting caller polls this long before yielding between polls, unless the host is oversubscribed (progress.c). */
#define TCU_YIELD_AFTER_NS (1000ull * 1000)

typedef struct tcu_ctx {
    const tcomms_core_t *core;
    pthread_mutex_t lock;   /* serialises every use of the worker and all engine state (tasks, comms, eps) */
    ucp_context_h ucp;
    ucp_worker_h worker;
    ucp_address_t *addr;
    size_t addr_len;
    int efd;                /* the worker's event fd */
    int peer_errors;        /* endpoints use UCP_ERR_HANDLING_MODE_PEER (TCOMMS_UCX_ERR_MODE=peer) */
    uint64_t spin_ns;       /* how long a waiting caller polls before sleeping on efd */
    int warmup_rounds;      /* TCOMMS_UCX_WARMUP: rounds of the transport warm-up (0: none) */
    int warm;               /* this context's worker took part in a warm-up */
    int use_thread;         /* TCOMMS_UCX_PROGRESS_THREAD: start the progress thread (default 1) */
    int refs;               /* live communicators; guarded by the creation lock in context.c */
    int local_size;         /* the most ranks on this host of any communicator created on it (progress.c) */
    uint64_t yield_after_ns; /* how long a waiting caller polls before yielding: 0 when oversubscribed */

    tc_htable_t eps;        /* endpoint cache keyed by worker address (lib/hash.h) */

    tcu_task_t active;      /* sentinel of the running tasks' list */
    int nactive;
    tcu_task_t ready;       /* sentinel of the tasks the next sweep advances (engine.c: tcu_task_ready) */
    int events;             /* a callback marked a task ready, a communicator broke or an endpoint failed: sweep */
    int broken;             /* a communicator broke: the sweep fails the running tasks of broken ones */
    int ep_failed;
    int waiters;            /* callers progressing inline: the progress thread stays off the worker */
    uint64_t wait_epoch;    /* bumped by every wait and test: the thread sees whether a caller came by */
    uint64_t last_post_ns;  /* when the last operation was posted */
    int deep_sleep;         /* the thread sleeps IDLE_NS: a post wakes it (progress.c) */
    int task_ended;         /* a task that received a large message ended since the thread last looked: it serves
                               the worker a while longer */
    uint64_t linger_until_ns; /* ... until then (progress.c) */
    uint64_t next_check_ns; /* when running tasks' deadlines are next checked */
    tcu_task_t *stranded;   /* failed tasks UCX may still write into, freed with the worker (engine.c) */

    pthread_t thread;
    int thread_started, stop;
    int wake_fd;            /* eventfd that interrupts the progress thread's poll */
} tcu_ctx_t;

/* ---- communicators ------------------------------------------------------------------------------------------ */

#define TCU_COLL_TYPES ((int)TCOMMS_COLL_TYPE_COUNT)

struct tcu_comm {
    tcu_ctx_t *ctx;
    const tcomms_core_t *core;
    char name[96];
    int rank, size;
    uint32_t cid;
    uint32_t timeout_ms;
    tcu_ep_t **eps;                          /* per rank; NULL for this rank */
    uint32_t coll_seq;                       /* next collective's sequence number */
    int in_flight;                           /* collectives posted and not yet final (TCU_MAX_IN_FLIGHT) */
    uint32_t *send_seq, *recv_seq;           /* per peer: point-to-point messages so far */
    const tcu_algo_t *forced[TCU_COLL_TYPES]; /* TCOMMS_UCX_<COLL>_ALGO, NULL for auto */
    tcomms_comm_state_t *state;              /* the core's failure state (core->comm_fail, comm_failed) */
    tcu_task_t live;                         /* sentinel: tasks posted and not yet recycled */
    int nactive;                             /* of those, running */
    tcu_task_t bigq;                         /* sentinel: big collectives waiting for a slot, oldest first */
    int big_running;                         /* big collectives running (engine.c: BIG_RUNNING) */
    tcu_task_t *free;                        /* recycled tasks, with their buffers */
    int nfree;
    int nlive;                               /* tasks not on the free list (posted, not yet recycled) */
    int peak;                                /* most of those at once since the communicator was last idle */
    int keep;                                /* free tasks kept (engine.c: trim) */
    uint64_t keep_ns;                        /* when a busy spell last needed about `keep` tasks */
    size_t kept_scratch;                     /* scratch bytes held by free tasks */
    tcu_task_t *pair;                        /* the task of blocking single exchanges on 2 ranks (pair.c), NULL
                                                until the first; never on the free list, idle while cnext is NULL */
    struct tcu_pair_facts {                  /* the last call pair.c looked at, and what it decided */
        uint32_t key;                        /* type, dtype and op; 0: none yet */
        int fits;
        size_t count, esize;
        unsigned shape;
        tcomms_reduce_fn_t reduce;
    } pair_facts;
};

/* ---- context.c ------------------------------------------------------------------------------------------------ */

/* Take a reference on the process-wide context, creating it (UCP context, worker, progress thread) on first use;
 * drop it, destroying everything with the last reference. Called under the creation lock (tcu_create_lock). */
tcomms_status_t tcu_ctx_acquire(const tcomms_core_t *core, tcu_ctx_t **out);
/* Returns 1 when that destroyed the context. */
int tcu_ctx_release(tcu_ctx_t *ctx);
/* Serialises communicator creation and destruction in this process (see docs/ucx.md: communicator ids). */
void tcu_create_lock(void);
void tcu_create_unlock(void);
/* The endpoint to the worker at `addr`, created on first use; NULL with the core's error set on failure. Lock
 * held. */
tcu_ep_t *tcu_ep_get(tcu_ctx_t *ctx, const void *addr, size_t len);
const char *tcu_version(void);
/* Send UCX's own log lines to tcomms' logger (stderr) instead of UCX's default, stdout; once per process, before any
 * UCP call that may log. */
void tcu_route_ucx_logs(const tcomms_core_t *core);

/* ---- progress.c ----------------------------------------------------------------------------------------------- */

/* Running tasks' deadlines and shapes are looked at this often. */
#define TCU_CHECK_EVERY_NS (100ull * 1000 * 1000)
/* Progress the worker on the calling thread until done(arg) or `timeout_ns` have passed (UINT64_MAX: no limit);
 * returns done(arg). The timeout counts from the wait's first clock reading, a few polls in. Spins for
 * ctx->spin_ns, then sleeps on the worker's event fd. Lock held (dropped while sleeping). */
int tcu_drive(tcu_ctx_t *ctx, int (*done)(void *), void *arg, uint64_t timeout_ns);
/* One pass after progress: advance the tasks on the ready list, fail those of broken communicators. Lock held. */
void tcu_sweep(tcu_ctx_t *ctx);
/* Fail running tasks past their deadline. Lock held. */
void tcu_check_deadlines(tcu_ctx_t *ctx, uint64_t now);
tcomms_status_t tcu_thread_start(tcu_ctx_t *ctx);
/* A communicator of `local_size` ranks on this host was created: decide whether waiting callers yield at once. */
void tcu_ctx_note_local_size(tcu_ctx_t *ctx, int local_size);
/* Whether that decided the host is oversubscribed (more ranks on it than this process has CPUs). */
int tcu_oversubscribed(const tcu_ctx_t *ctx);
void tcu_thread_stop(tcu_ctx_t *ctx);
/* Interrupt the progress thread's sleep (its wake fd). */
void tcu_thread_wake(tcu_ctx_t *ctx);

/* ---- engine.c ------------------------------------------------------------------------------------------------- */

/* Start an operation on `c` with the given tag kind and sequence (collective, point-to-point or creation), run its
 * first step, and hand back the task (the caller's handle). Lock held. */
tcomms_status_t tcu_task_start(tcu_comm_t *c, const tcomms_coll_args_t *a, const tcu_algo_t *algo, int kind,
                               uint32_t seq, tcu_task_t **out);
/* The part of tcu_task_start after the facts of the call: `t` has its a, esize, reduce, sync and big set; `low` is
 * the tag's low bits. Links the task, runs its first step. Lock held. It is tcu_task_arm, then tcu_task_enlist: a
 * caller may post messages between the two (tcu_send, tcu_recv: they need only what arm sets, and a failure they
 * record fails the task at enlist's first step), and may never enlist a task whose messages ended at once, ending it
 * with tcu_task_end_locally instead (pair.c). enlist runs the step of the task's current round, or its failure. */
void tcu_task_launch(tcu_task_t *t, tcu_comm_t *c, const tcu_algo_t *algo, int kind, uint32_t low);
void tcu_task_arm(tcu_task_t *t, tcu_comm_t *c, const tcu_algo_t *algo, int kind, uint32_t low);
void tcu_task_enlist(tcu_task_t *t);
/* A task armed and never enlisted whose last step ran (pair.c): the AVG epilogue, and success. Lock held. */
void tcu_task_end_locally(tcu_task_t *t);
/* Run steps while the current round is complete. Lock held. */
void tcu_task_advance(tcu_task_t *t);
/* Put `t` on the context's ready list (once) for the next sweep; take it off. Lock held. */
void tcu_task_ready(tcu_task_t *t);
void tcu_task_unready(tcu_task_t *t);
/* Cancel the task's requests and make `status` its final result; the task's communicator breaks with it. */
void tcu_task_fail(tcu_task_t *t, tcomms_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Drop the caller's handle; the task returns to its communicator's free list once final. Lock held. */
void tcu_task_release(tcu_task_t *t);
/* A new task, zeroed and laid out as engine.h says (64-byte aligned, its requests inline); NULL when out of
 * memory. */
tcu_task_t *tcu_task_alloc(void);
/* Free a task and its buffers. */
void tcu_task_destroy(tcu_task_t *t);
/* Keep a task with t->stranded requests on its context's list instead of freeing it (lock held); free that list's
 * tasks once the worker is destroyed. */
void tcu_task_strand(tcu_task_t *t);
void tcu_task_free_stranded(tcu_ctx_t *ctx);
/* The final result, with the task's message set as the calling thread's error. */
tcomms_status_t tcu_task_report(tcu_task_t *t);
/* Report `c` broken by `status` to the core (the first error wins); running tasks are failed by the next sweep.
 * Lock held. */
void tcu_comm_break(tcu_comm_t *c, tcomms_status_t status, const char *msg);
/* The core's failure of `c` (SUCCESS while it works), with its message in *msg. */
static inline tcomms_status_t tcu_comm_failed(const tcu_comm_t *c, const char **msg)
{
    return c->core->comm_failed(c->state, msg);
}
/* For tcu_drive: has the task `arg` ended? */
int tcu_task_final(void *arg);
/* The core this module was queried by (set by query(), which the core calls before anything else): its
 * description of each operation is the module's too. */
extern const tcomms_core_t *tcu_core;
static inline const tcomms_coll_info_t *tcu_coll_info(tcomms_coll_type_t type)
{
    return tcu_core->coll_info(type);
}
const char *tcu_coll_name(tcomms_coll_type_t type);

/* ---- message.c ------------------------------------------------------------------------------------------------ */

/* Learn UCX's request size, so that tasks allocated from now on hold their first requests (message.c: lend). */
void tcu_task_lend_requests(ucp_context_h ucp);
/* Bytes to allocate for a task: the struct and the requests it lends UCX. */
size_t tcu_task_bytes(void);
/* After a round: give UCX back the requests it allocated, forget the round's requests. Lock held. */
void tcu_task_release_requests(tcu_task_t *t);
/* Cancel the task's requests in flight and hand them back (lent ones UCX still holds are counted in `stranded`).
 * Lock held. */
void tcu_task_drop_requests(tcu_task_t *t);
/* Fail the collective with TCOMMS_ERR_MISMATCH when a peer's message for one of its waiting receives came with
 * another shape; returns 1 then. Lock held. */
int tcu_task_check_shape(tcu_task_t *t);

/* ---- select.c ------------------------------------------------------------------------------------------------- */

/* Read TCOMMS_UCX_<COLL>_ALGO for every operation into c->forced; TCOMMS_ERR_BAD_ENV naming the variable and the
 * known names when one is unknown. */
tcomms_status_t tcu_select_init(tcu_comm_t *c);
/* The algorithm for `a` on `c`: the forced one, else the first matching row of the operation's table. */
const tcu_algo_t *tcu_select(const tcu_comm_t *c, const tcomms_coll_args_t *a, size_t esize);

/* ---- pair.c: blocking single exchanges on 2 ranks --------------------------------------------------------------- */

/* The algorithm of those calls: one send and one receive, the same messages as the algorithm select.c picks. */
extern const tcu_algo_t tcu_algo_pair;
/* The types that may: a test before tcu_pair_fits, so that other calls pay no function call. */
static inline int tcu_pair_type(tcomms_coll_type_t type)
{
    return type == TCOMMS_COLL_ALL_REDUCE || type == TCOMMS_COLL_ALL_GATHER || type == TCOMMS_COLL_REDUCE_SCATTER ||
           type == TCOMMS_COLL_ALL_TO_ALL;
}
/* Whether the call `a` (blocking, outside a group) runs as a pair exchange on `c`: 2 ranks, all_reduce,
 * all_gather, reduce_scatter or all_to_all of a small message, no algorithm forced. Keeps the facts of the call in
 * c->pair_facts without the lock: calls on one communicator are serialised by the caller. */
int tcu_pair_fits(tcu_comm_t *c, const tcomms_coll_args_t *a);
/* Run collective number `seq` as a pair exchange (tcu_pair_fits said yes) and wait for it up to `timeout_ns`:
 * returns 0 when it cannot (out of memory, or an earlier call's failure still holds the pair task: the generic path
 * runs it then), else 1 with *out NULL when it succeeded, or the task, as the caller's handle, when it failed or
 * still runs. Lock held. */
int tcu_pair_run(tcu_comm_t *c, const tcomms_coll_args_t *a, uint32_t seq, uint64_t timeout_ns, tcu_task_t **out);

/* ---- basic.c: the algorithms with no choice ------------------------------------------------------------------- */

extern const tcu_algo_t tcu_algo_p2p;   /* send or recv: one message */
extern const tcu_algo_t tcu_algo_alone; /* any collective on a communicator of one: local copies */
extern const tcu_algo_t tcu_algo_warmup; /* a.count ring rounds of mid-sized messages (a barrier's args) */

/* ---- comm.c / module.c ---------------------------------------------------------------------------------------- */

tcomms_status_t tcu_comm_create(const tcomms_backend_comm_args_t *args, void **bcomm);
tcomms_status_t tcu_comm_destroy(void *bcomm);

#endif /* TCU_UCX_H */
