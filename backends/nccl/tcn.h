/* SPDX-License-Identifier: BSD-3-Clause */
/* Internal declarations of the NCCL backend: communicators (an ncclComm_t bound to one GPU, an internal stream, the
 * operation pool and the list of operations the watchdog follows), operations (work handles: CUDA events), and
 * the functions the backend's files share. Nothing here is exported from the module (docs/nccl.md). */
#ifndef TCN_H
#define TCN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <tcomms/backend.h>

#include "clock.h" /* lib/util/clock.h */
#include "small_args.h"

/* ---- what the NCCL headers offer --------------------------------------------------------------------------------
 * configure requires ncclCommInitRankConfig (2.14); everything newer is guarded here, so the module builds (with
 * fewer features, reported as not supported) against older NCCL. */
#ifndef NCCL_VERSION
#define NCCL_VERSION(X, Y, Z) (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))
#endif
#define TCN_NCCL_AT_LEAST(x, y) (NCCL_VERSION_CODE >= NCCL_VERSION(x, y, 0))
#define TCN_HAS_SPLIT TCN_NCCL_AT_LEAST(2, 18)   /* ncclCommSplit, ncclConfig_t.splitShare */
#define TCN_HAS_MEM TCN_NCCL_AT_LEAST(2, 19)     /* ncclMemAlloc/Free, ncclCommRegister/Deregister */
#define TCN_HAS_WINDOW TCN_NCCL_AT_LEAST(2, 27)  /* ncclCommWindowRegister, NCCL_WIN_COLL_SYMMETRIC */
#define TCN_HAS_CONFIG_27 TCN_NCCL_AT_LEAST(2, 27) /* trafficClass, commName, collnetEnable, CTAPolicy, ... */
#define TCN_HAS_CONFIG_28 TCN_NCCL_AT_LEAST(2, 28) /* nChannelsPerNetPeer, nvlinkCentricSched */
#define TCN_HAS_A2A TCN_NCCL_AT_LEAST(2, 28)       /* ncclAlltoAll, ncclGather, ncclScatter */
#define TCN_HAS_SHRINK TCN_NCCL_AT_LEAST(2, 27)    /* ncclCommShrink */

#define TCN_NAME_MAX 64

/* The core's services, set by query() (called once, before any communicator exists). */
extern const tcomms_core_t *tcn_core;

/* ---- configuration (config.c) --------------------------------------------------------------------------------- */

/* A communicator's ncclConfig_t built from its hints, with what was asked, for comm_hint. Strings live here, so
 * the struct must not move between tcn_config_build and the NCCL call that reads it. */
#define TCN_CONFIG_KEYS 16
typedef struct tcn_config {
    ncclConfig_t nc;
    unsigned given;          /* bit per key of config.c's table: set by a hint */
    int high_priority;       /* high_priority_stream asked */
    int small_bytes;         /* nccl.small_bytes asked, or -1 */
    char net_name[128];
    char comm_name[128];
    tcomms_setting_t set[TCN_CONFIG_KEYS]; /* per key of config.c's table: what runs and why, as at creation */
} tcn_config_t;

tcomms_status_t tcn_config_build(const tcomms_hints_t *hints, const char *comm_name, tcn_config_t *cfg);
/* Does this configuration make NCCL calls non-blocking (they may return ncclInProgress)? */
int tcn_config_nonblocking(const tcn_config_t *cfg);
/* The window communicator's ncclConfig_t (window.c): the communicator's own, with resources of its own and, unless
 * the hints bound the CTAs, at least `ctas` CTAs (NCCL's maxCTAs default above). */
void tcn_config_windows(const tcn_config_t *cfg, int ctas, ncclConfig_t *out);
/* Does NCCL run communicators of this configuration with CTA policy zero (hint nccl.cta_policy or NCCL_CTA_POLICY),
 * where it runs all_gather, all_to_all, gather and scatter between windows on the copy engines? (window.c) */
int tcn_config_cta_zero(const tcn_config_t *cfg);

/* ---- operations (work.c) -------------------------------------------------------------------------------------- */

typedef struct tcn_comm tcn_comm_t;

/* A device buffer of `bytes`, with its ncclCommRegister handle when registered. */
typedef struct tcn_scratch {
    void *buf, *reg;
    size_t bytes;
} tcn_scratch_t;

enum {
    TCN_OP_BLOCKING = 1u << 0, /* ran on the caller's stream: already ordered before its later work */
    TCN_OP_CAPTURED = 1u << 1, /* captured into a CUDA graph: runs at replay, never followed by the watchdog */
    TCN_OP_RECORDED = 1u << 2, /* its completion event is recorded (false inside an open group) */
};

typedef struct tcn_op {
    struct tcn_op *next, *prev; /* the communicator's pending list, or its pool (next only) */
    struct tcn_op *gnext;       /* this thread's open group, until group end */
    tcn_comm_t *comm;           /* outlives the operation: the core destroys it only after its last handle */
    cudaEvent_t start, done;    /* start: the caller's stream reached the post; done: the operation finished */
    cudaStream_t caller, run;   /* the caller's stream, and the stream the operation ran on */
    void *scratch;              /* stream-ordered scratch (cudaMallocAsync), freed after the launch */
    uint64_t deadline_ns;       /* posting time + timeout */
    uint32_t timeout_ms;
    tcomms_coll_type_t type;
    unsigned flags;             /* TCN_OP_* */
    _Atomic int status;         /* tcomms_status_t: TCOMMS_IN_PROGRESS until final */
    int held;                   /* the caller holds the handle (work_free not called yet) */
    int watched;                /* on the pending list */
    int grouped;                /* deferred by an open group: group end finishes it */
    uint64_t gen;               /* counts the uses of this pooled operation: tells a reuse from the original */
    char msg[256];              /* why it failed */
} tcn_op_t;

/* An empty pool is refilled by event queries (tcn_reap) only once this many operations were posted since the last
 * refill; until then a new operation is made. Refilling whenever the pool ran dry cost several queries a post when
 * the GPU ran a steady few calls behind the host (each search found only those few finished, so the pool never
 * grew) and a search on every post when it ran far behind (docs/perf.md). So the pool grows to this many plus how
 * far the GPU runs behind, and a search retires about this many at once. A communicator starts with this many, so
 * its first calls do not create events. */
#define TCN_REAP_EVERY 64
/* Put `n` new operations (with their events) into the pool; the device set. */
tcomms_status_t tcn_pool_fill(tcn_comm_t *c, int n);
/* An operation for `c` from the pool (or a new one, with its events); guarded internally. `may_reap`: finished
 * operations may be queried back into an empty pool (not while the caller's stream is capturing). */
tcomms_status_t tcn_op_get(tcn_comm_t *c, int may_reap, tcn_op_t **out);
/* After the launch (at once, or at group end): free the scratch, record the completion event, hand the operation
 * to the watchdog. `launch` is the launch's result: an error marks the operation failed. */
void tcn_op_finish(tcn_op_t *op, tcomms_status_t launch, const char *why);
/* Set a final status unless one is set already; returns 1 when this call set it. */
int tcn_op_settle(tcn_op_t *op, tcomms_status_t st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Retire completed operations from the pending list (c->plock held) with at most about `max` rounds of event
 * queries. Returns how many were retired. */
int tcn_reap(tcn_comm_t *c, int max);
/* Free the pool's operations and the communicator itself (at destroy, once the pending list is empty, so that
 * every operation is back in the pool: the core destroys a communicator only after its last handle is freed). */
void tcn_pool_drain(tcn_comm_t *c);

tcomms_status_t tcn_work_test(void *bwork);
tcomms_status_t tcn_work_wait(void *bwork, uint32_t timeout_ms);
tcomms_status_t tcn_work_synchronize(void *bwork, uint32_t timeout_ms);
void tcn_work_free(void *bwork);

/* ---- one-shot kernels for small messages (small.c) ----------------------------------------------------------- */

/* The path's limit where neither TCOMMS_NCCL_SMALL_BYTES nor the nccl.small_bytes hint sets one: on up to 4 ranks
 * only. On 8 x H200 it lost to NCCL for all_gather, reduce_scatter and all_to_all; on 4 x H100 all four beat
 * tcomms' NCCL route up to 256 KiB a block (all_gather and all_to_all beat raw NCCL there too) and all_reduce lost
 * from 512 KiB; on 2 x H100 every collective won up to 512 KiB a block, and reduce_scatter lost at 1 MiB to NCCL on
 * windows (docs/perf.md). */
#define TCN_SMALL_DEFAULT_BYTES 262144
#define TCN_SMALL_DEFAULT_BYTES_2 524288 /* on 2 ranks */
#define TCN_SMALL_DEFAULT_RANKS 4

typedef struct tcn_small {
    size_t slot;                           /* bytes per rank's block at most; 0: the path is off */
    void *mine;                            /* this rank's staging area and flags (cudaMalloc, exported by IPC) */
    void *peer[TCN_SMALL_MAX_RANKS];       /* every rank's, mapped here (mine at [rank]) */
    int *abort_flag;                       /* mapped host memory the kernels poll: set when the communicator fails */
    uint64_t epoch;                        /* calls on the path so far */
    cudaStream_t last_stream;              /* where the last call ran, and its completion event */
    cudaEvent_t last_done;
} tcn_small_t;

/* ---- communicators (comm.c) ----------------------------------------------------------------------------------- */

struct tcn_comm {
    char name[TCN_NAME_MAX];
    char prefix[256];           /* its lasting store-key prefix (args->comm_prefix), where its splits vote */
    unsigned splits;            /* splits of this communicator so far, members' and non-members' alike */
    int rank, size, device;
    ncclComm_t nccl;            /* NULL once aborted or destroyed */
    ncclComm_t wnccl;           /* where its symmetric windows live (window.c): NULL until the first, and once ended */
    int win_ctas;               /* the window communicator's CTA floor; 0: windows on `nccl`, as NCCL has them */
    size_t win_ar_max;          /* all_reduce between windows above this many bytes runs on `nccl` */
    int win_ce;                 /* CTA policy zero: NCCL's copy engines run all_to_all between windows */
    int nonblocking;            /* NCCL calls on it may return ncclInProgress */
    int orphan;                 /* a split's init job NCCL never ended may still store into `nccl`: never freed */
    cudaStream_t stream;        /* internal stream for operations that return a handle */
    int prio, prio_greatest, prio_least;
    void *one;                  /* a small device buffer for barriers */
    tcn_config_t cfg;
    int cc_major;               /* compute capability, for the defaults comm_hint reports */
    uint32_t timeout_ms;
    pthread_mutex_t lock;       /* every NCCL call on `nccl`, and its abort */
    pthread_mutex_t plock;      /* the pending list and the pool */
    tcn_op_t pending;           /* sentinel of the operations the watchdog follows, oldest first */
    size_t npending;
    size_t reap_at;             /* tcn_op_get refills an empty pool from the pending list at this many pending */
    tcn_op_t *pool;
    tcomms_comm_state_t *state; /* the core's failure state, which tcn_comm_fail reports to (tcn_comm_broken) */
    _Atomic int ended;          /* tcn_comm_fail ran: pending operations settled, ncclCommAbort called or given up */
    struct tcn_ender *ender;    /* the thread ending its NCCL communicator (end.c), or NULL */
    long end_wait_ms;           /* how long destroy still waits for that end before leaving device memory */
    tcn_comm_t *wnext, *wprev;  /* the watchdog's registry */
    tcn_scratch_t scratch[2];   /* in-place all_to_all scratch (scratch.c): plain, and registered */
    cudaEvent_t scratch_ev;     /* recorded after each use of a scratch */
    struct tcn_retired *retired; /* outgrown scratch buffers, freed at destroy */
    struct tcn_reg *regs;       /* buffers registered through mem_register (mem.c), under `lock` */
    _Atomic int nwindows;       /* how many of them are symmetric windows (ops.c: copy-engine collectives) */
    tcn_small_t small;          /* the small-message path (small.c) */
};

tcomms_status_t tcn_comm_create(const tcomms_backend_comm_args_t *args, void **bcomm);
tcomms_status_t tcn_comm_split_nonmember(void *parent, const tcomms_backend_comm_args_t *args);
tcomms_status_t tcn_comm_shrink(void *parent, const tcomms_backend_comm_args_t *args, void **bcomm);
tcomms_status_t tcn_comm_destroy(void *bcomm);
#if TCN_HAS_SPLIT
/* After a failed split of `p`'s NCCL communicator (before its child is aborted): fail `p`, so peers waiting in
 * their split end too. Returns `st`. c->lock not held. */
tcomms_status_t tcn_split_failed(tcn_comm_t *p, tcomms_status_t st, ncclResult_t r, const char *call);
/* A split that failed before making its child leaves `p`'s NCCL communicator unsafe to end: give it up (p->lock
 * held). */
void tcn_split_refused(tcn_comm_t *p, const char *call);
/* Wait up to `deadline` for a non-blocking split's child to be stored into *child and settle. */
ncclResult_t tcn_settle_child(ncclComm_t *child, const tcn_comm_t *p, uint64_t deadline);
#endif
/* The applied value of a hint (config.c). */
tcomms_status_t tcn_comm_setting(void *bcomm, const char *key, tcomms_setting_t *out);
/* TCOMMS_ERR_ABORTED naming the failure that aborted `c`, for calls made after it. */
tcomms_status_t tcn_comm_aborted(tcn_comm_t *c, const char *what);
/* Has `c` failed? The core's state says, for every cause: tcn_comm_fail reports there before it aborts, and the
 * core records an abort, another slot's failure or an operation's final error there itself. */
static inline int tcn_comm_broken(const tcn_comm_t *c)
{
    return tcn_core->comm_failed(c->state, NULL) != TCOMMS_SUCCESS;
}

/* ---- operations on a communicator (ops.c), groups (group.c), memory (mem.c) ---------------------------------- */

tcomms_status_t tcn_post(void *bcomm, const tcomms_coll_args_t *a, void **bwork);
/* "small" (tcomms' small-message kernel) or "nccl": what tcn_post will run `a` with, for the core's trace line. */
const char *tcn_algorithm(void *bcomm, const tcomms_coll_args_t *a);
const char *tcn_coll_name(tcomms_coll_type_t type);
/* Enqueue `a` on `stream` (c->lock held, device set). In-place all_to_all uses the communicator's scratch, except
 * inside a capture or an open group, where *scratch receives a stream-ordered allocation to free after the launch. */
tcomms_status_t tcn_launch(tcn_comm_t *c, const tcomms_coll_args_t *a, cudaStream_t stream, int captured,
                           void **scratch);
/* The communicator's scratch of at least `bytes`, once its previous use is over (ordered on `s`); give it back
 * after the launch that uses it. Free at destroy. c->lock held. */
tcomms_status_t tcn_scratch_take(tcn_comm_t *c, size_t bytes, int registered, cudaStream_t s, void **out);
/* The ncclCommRegister handles of c's registered scratch buffers, up to `max` into out; returns how many there are
 * (c->lock held). */
size_t tcn_scratch_regs(const tcn_comm_t *c, void **out, size_t max);
tcomms_status_t tcn_scratch_give(tcn_comm_t *c, cudaStream_t s);
void tcn_scratch_free(tcn_comm_t *c);

/* Collective over the members at creation: map every rank's staging area, or agree that the path is off
 * (`bytes` is TCOMMS_NCCL_SMALL_BYTES; 0 turns it off). Fails only when the store exchange fails. */
tcomms_status_t tcn_small_setup(tcn_comm_t *c, const tcomms_backend_comm_args_t *args, long bytes);
/* Does `a` go by the small-message path (the caller has ruled out captures and groups)? */
int tcn_small_fits(const tcn_comm_t *c, const tcomms_coll_args_t *a);
/* Launch `a` on `stream` (c->lock held, device set); `done` will be its completion event. */
tcomms_status_t tcn_small_launch(tcn_comm_t *c, const tcomms_coll_args_t *a, cudaStream_t stream, cudaEvent_t done);
/* Make waiting kernels give up (tcn_comm_fail); any thread. */
void tcn_small_abort(tcn_comm_t *c);
/* Unmap and free, once no call is pending; safe on a communicator whose setup never ran or failed. */
void tcn_small_free(tcn_comm_t *c);

int tcn_group_open(void);
void tcn_group_defer(tcn_op_t *op);
tcomms_status_t tcn_group_start(void);
tcomms_status_t tcn_group_end(void);

tcomms_status_t tcn_mem_alloc(void *bcomm, size_t bytes, void **ptr);
tcomms_status_t tcn_mem_free(void *bcomm, void *ptr);
tcomms_status_t tcn_mem_register(void *bcomm, void *buf, size_t bytes, unsigned flags, void **handle);
tcomms_status_t tcn_mem_deregister(void *bcomm, void *handle);
/* Does [buf, buf + bytes) lie in one buffer or window of `c` registered with NCCL communicator `on`, c->nccl or
 * c->wnccl (c->lock held)? NCCL's registration is per NCCL communicator: a window on c->wnccl is plain memory to
 * c->nccl. */
int tcn_mem_registered(const tcn_comm_t *c, const void *buf, size_t bytes, ncclComm_t on);
/* The same as tcn_scratch_regs for tcomms_mem_register's buffers on c->nccl (windows aside). */
size_t tcn_mem_buffer_regs(const tcn_comm_t *c, void **out, size_t max);

/* ---- symmetric windows on a communicator of their own (window.c) ---------------------------------------------- */

/* Read TCOMMS_NCCL_WINDOW_CTAS and TCOMMS_NCCL_WINDOW_ALL_REDUCE_MAX for a communicator of `size` ranks (at
 * creation, before any NCCL call, so a bad value fails every rank alike), and the CTA policy from c->cfg. */
tcomms_status_t tcn_win_settings(tcn_comm_t *c, int size);
/* Split the window communicator off `nccl` unless it exists or windows stay on `nccl`. Collective, as the window
 * registration that calls it; c->lock not held. A failed split fails `c`. */
tcomms_status_t tcn_win_open(tcn_comm_t *c);
/* The NCCL communicator `a` runs on (c->lock held): the window communicator when every buffer it names lies in a
 * window and NCCL can run it between windows, the plain one otherwise. */
ncclComm_t tcn_route(const tcn_comm_t *c, const tcomms_coll_args_t *a);
/* Does [buf, buf + bytes) lie in one symmetric window registered on `c` (c->lock held)? (mem.c) */
int tcn_mem_in_window(const tcn_comm_t *c, const void *buf, size_t bytes);
/* tcn_settle on both NCCL communicators of a non-blocking `c` (c->lock held). */
ncclResult_t tcn_settle_comm(tcn_comm_t *c, uint64_t deadline_ns);

/* ---- the watchdog (watchdog.c) -------------------------------------------------------------------------------- */

/* Follow / stop following `c`. The thread starts with the first communicator, checking every `ms` (from
 * TCOMMS_NCCL_WATCHDOG_MS), and ends with the last. */
tcomms_status_t tcn_watch_add(tcn_comm_t *c, long ms);
void tcn_watch_remove(tcn_comm_t *c);
/* end.c: ncclCommAbort (destroy 0) or ncclCommDestroy (1) of c->wnccl and c->nccl on a thread of its own; 1 when
 * it returned within `wait_ms`; the caller then clears both. An abort with `deregister` (the caller holds c->lock)
 * deregisters c's ncclCommRegister buffers first. tcn_end_done at destroy: 1 when no end was started or it has
 * returned, waiting up to `wait_ms`; 0 when it is stuck (c's device memory must then stay allocated). */
int tcn_end_nccl(tcn_comm_t *c, int destroy, int deregister, long wait_ms);
int tcn_end_done(tcn_comm_t *c, long wait_ms);
/* Fail `c` once: report the failure to the core (whose message users see on every later call), mark its pending
 * operations (`culprit`, if still the use numbered `culprit_gen`, gets TCOMMS_ERR_TIMEOUT, the others `st`, or
 * TCOMMS_ERR_ABORTED for a timeout), abort the NCCL communicator (waiting for that up to a bound). Any thread;
 * never with c->lock held. */
void tcn_comm_fail(tcn_comm_t *c, tcomms_status_t st, tcn_op_t *culprit, uint64_t culprit_gen, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;
/* The backend's comm_abort: tcn_comm_fail with TCOMMS_ERR_ABORTED. */
tcomms_status_t tcn_comm_abort(void *bcomm);
/* After a launch on `c` failed with `st`: NCCL's system, internal, remote and CUDA failures leave a communicator
 * unusable (NCCL asks for ncclCommAbort), so fail it; bad arguments and a shortage of memory leave it as it was. */
void tcn_fail_launch(tcn_comm_t *c, tcomms_status_t st, const char *what);
/* Check `c`'s asynchronous NCCL error now, failing it on one; returns the status it failed with, or 0. */
tcomms_status_t tcn_check_async(tcn_comm_t *c);

/* ---- helpers (util.c) ------------------------------------------------------------------------------------------ */

/* The CLOCK_REALTIME time `ms` from now, as pthread's timed waits take it. */
struct timespec tcn_in_ms(long ms);
/* Sleep a little while polling: `round` counts the polls so far (spin, then yield, then sleep up to 1 ms). */
void tcn_backoff(unsigned round);
/* Make c's device current; returns the device to restore, or -1 when it already was. */
int tcn_device_enter(const tcn_comm_t *c);
void tcn_device_leave(int prev);
/* The tcomms status for a failed CUDA or NCCL call, with a message naming the call and the communicator. */
tcomms_status_t tcn_cuda_error(cudaError_t err, const char *call, const char *comm_name);
tcomms_status_t tcn_nccl_error(const tcn_comm_t *c, ncclResult_t res, const char *call);
/* For a non-blocking communicator: poll ncclCommGetAsyncError while `res` is ncclInProgress, until `deadline_ns`
 * (ncclInProgress is returned when it passes). */
ncclResult_t tcn_settle(ncclComm_t comm, ncclResult_t res, uint64_t deadline_ns);

#endif
