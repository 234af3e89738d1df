/* SPDX-License-Identifier: BSD-3-Clause */
/* The collective engine as algorithms see it: a collective is a task, a state machine of rounds. Each round posts
 * tagged sends and receives; when all of them have completed the engine calls the algorithm's step again, which
 * does the round's local work (reduce, copy) and posts the next round. Algorithm files (allreduce.c, bcast.c, ...)
 * include only this header; the mechanics behind it live in engine.c, message.c, progress.c and context.c. */
#ifndef TCU_ENGINE_H
#define TCU_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include <tcomms/backend.h>

/* Not a UCX status: a receive completed with fewer bytes than posted (message.c). */
#define TCU_ERR_SHORT_MESSAGE ((ucs_status_t)-1000)

typedef struct tcu_task tcu_task_t;

/* What a step returns. A negative tcomms_status_t also fails the task; prefer tcu_fail() for a message. */
enum { TCU_DONE = 0, TCU_MORE = 1 };

/* One step of an algorithm. Called with t->round == 0 when the task starts, then again each time every message the
 * previous step posted has completed (t->round counts the steps already done). A step finishes the previous round's
 * local work, then either posts the next round with tcu_send/tcu_recv and returns TCU_MORE, or posts nothing and
 * returns TCU_DONE. Returning TCU_MORE without posting simply calls the step again (a local-only round). Steps run
 * with the engine's lock held, possibly on the progress thread: no blocking, no logging. The engine applies the AVG
 * epilogue after TCU_DONE, so algorithms treat AVG as SUM (t->reduce already does). */
typedef int (*tcu_step_fn)(tcu_task_t *t);

/* An algorithm, as named in TCOMMS_UCX_<COLL>_ALGO and selected by select.c. */
typedef struct tcu_algo {
    const char *name;
    tcu_step_fn step;
} tcu_algo_t;

/* A request in flight for a task (message.c), with the peer it involves. Engine only. */
struct tcu_req {
    void *req;
    int peer;
    int send;
    unsigned slot;
    size_t bytes; /* a receive's posted length: a shorter message means the ranks' counts differ */
};
/* Requests a task holds without an allocation of their own: a round of two messages (a send and a receive, as in
 * every round of a 2-rank all_reduce) stays within the task's lines, and UCX's requests for them live in the task's
 * allocation too, after the struct (message.c: lend). */
#define TCU_INLINE_REQS 2

/* A running collective. Algorithms read the fields of the first block and own `state`; everything after the
 * "engine only" line is private to engine.c, message.c and progress.c. */
struct tcu_task {
    tcomms_coll_args_t a;   /* the operation, validated by the core; v-variant arrays are the task's own copies
                               (never NULL: packed displacements are filled in) */
    int rank, size;         /* this rank and the communicator size (size >= 2 for algorithms) */
    size_t esize;           /* bytes per element of a.dtype */
    tcomms_reduce_fn_t reduce; /* c[i] = a[i] op b[i] for a.dtype and a.op (AVG as SUM); NULL for non-reducing ops */
    int round;              /* steps completed before this one */
    size_t state[4];        /* free for the algorithm; zero at round 0 */

    /* ---- engine only ---- */
    /* Laid out by cache line (tasks are 64-byte aligned: engine.c, take_task): the lines an operation touches from
     * post to completion cost it a miss each once the operations in flight outgrow the L2, a few hundred of them
     * (docs/perf.md, issue 29, "What the rise from 50 to 5000 in flight is"). Line 3 is what a completion callback
     * and the sweep touch, line 4 the round's first requests, line 6 the lists and buffers a free task keeps, line 7
     * the error message, which only a failure touches. */
    const tcomms_core_t *core;
    const tcu_algo_t *algo;
    /* line 3 (offset 192) */
    struct tcu_comm *comm;  /* alive while the task is: the core destroys a communicator after its last handle */
    struct tcu_req *reqs;   /* UCX requests of the current round: inline_reqs until a round posts more */
    int nreqs, cap_reqs;
    int pending;            /* requests of the current round still in flight */
    int ucs_error;          /* first failed request's ucs_status_t (or TCU_ERR_SHORT_MESSAGE), 0 when none */
    int post_peer;
    unsigned char ready;    /* on the context's ready list: the round is over or a request failed (engine.c) */
    unsigned char posting;  /* inside tcu_recv's UCX call: a completion it runs there is for post_bytes/post_peer */
    unsigned char watched;  /* its caller watches `pending` itself and advances it (pair.c): off the ready list */
    unsigned char stranded; /* requests in the task's own memory that UCX still holds after a failure (engine.c) */
    size_t post_bytes;
    struct tcu_task *rnext, *rprev; /* the context's list of ready tasks, while `ready` */
    /* line 4 (offset 256) */
    struct tcu_req inline_reqs[TCU_INLINE_REQS];
    /* line 5 (offset 320) */
    uint64_t tag_base;      /* kind, communicator id, this operation's sequence number and shape */
    size_t rndv_from;       /* sends this large may go by rendezvous (message.c, tcu_send) */
    uint64_t deadline_ns;   /* CLOCK_MONOTONIC: the operation fails with TCOMMS_ERR_TIMEOUT after it */
    tcomms_status_t status; /* TCOMMS_IN_PROGRESS until final */
    int error_peer;         /* the peer of the request that ucs_error names */
    unsigned char kind;     /* TCU_KIND_*: collective, send/recv (no slots, no shape) or creation (no shape) */
    unsigned char p2p;      /* kind == TCU_KIND_P2P */
    unsigned char sync;     /* sends complete only once received (rooted collectives: shape.c) */
    unsigned char held;     /* the caller still holds the handle */
    unsigned char big;      /* a collective whose message is at least TCU_BIG_BYTES (engine.c) */
    unsigned char owes;     /* received a message that may have come by rendezvous (message.c: OWE_BYTES) */
    unsigned char queued;   /* posted, waiting for one of its communicator's big-collective slots */
    struct tcu_task *anext, *aprev; /* the context's list of running tasks */
    unsigned char *scratch;      /* the view tcu_scratch returns: scratch_mem at recvbuf's offset modulo 64 */
    /* line 6 (offset 384) */
    struct tcu_task *cnext, *cprev; /* the communicator's list of tasks not on its free list */
    unsigned char *scratch_mem;  /* the allocation (64-byte aligned, cap_scratch + TCU_SCRATCH_ALIGN bytes) */
    size_t cap_scratch;
    struct tcu_task *qnext, *qprev; /* the communicator's queue of big collectives, while `queued` */
    size_t *varrays;        /* storage for the copied v-variant arrays */
    size_t cap_varrays;
    /* line 7 (offset 448) */
    char *msg;              /* the error message, when status is an error (allocated at the first failure) */
};

/* Post a send of `bytes` at `buf` to rank `peer` (or a receive from `peer` into `buf`, at most `bytes`), counted in
 * the current round. `slot` (0..255) tells apart several messages between the same pair within one operation: the
 * receiver must name the same slot as the sender. Zero-byte messages are sent (both sides must agree). Failures are
 * recorded in the task, which the engine fails after the step returns: algorithms need not check. */
void tcu_send(tcu_task_t *t, int peer, unsigned slot, const void *buf, size_t bytes);
void tcu_recv(tcu_task_t *t, int peer, unsigned slot, void *buf, size_t bytes);

/* This task's scratch memory, at least `bytes` long and kept across steps (ask once, at round 0; asking again with
 * a larger size may move it, keeping its contents). Scratch is reused from task to task, so it is not zeroed. It
 * starts at the same offset modulo TCU_SCRATCH_ALIGN as a.recvbuf (engine.c says why: the kernel's copy of a
 * rendezvous message is several times slower between buffers that are not). NULL when out of memory: return
 * tcu_fail(t, TCOMMS_ERR_NO_MEMORY, ...) or simply TCOMMS_ERR_NO_MEMORY. */
#define TCU_SCRATCH_ALIGN 64
void *tcu_scratch(tcu_task_t *t, size_t bytes);

/* Fail the task with `status` and a message (the engine prefixes the operation and communicator); returns status so
 * that a step may `return tcu_fail(...)`. */
int tcu_fail(tcu_task_t *t, tcomms_status_t status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Byte address of element `elem` in `buf`. */
static inline unsigned char *tcu_at(const void *buf, size_t elem, size_t esize)
{
    return (unsigned char *)buf + elem * esize;
}

/* Block b of `count` elements split into `n` near-equal blocks (the first count % n one element longer): its
 * first element and length. Every algorithm that partitions a buffer uses this, so they agree. */
static inline void tcu_block(size_t count, int n, int b, size_t *first, size_t *len)
{
    size_t q = count / (size_t)n, r = count % (size_t)n, ub = (size_t)b;
    *len = q + (ub < r);
    *first = ub * q + (ub < r ? ub : r);
}

/* The per-rank count and displacement (elements) of rank `r` for gather-like layouts: the v-arrays when the
 * operation has them, else a.count and r * a.count. `counts`/`displs` pick the receive (0) or send (1) side. */
static inline size_t tcu_vcount(const tcu_task_t *t, int send_side, int r)
{
    const size_t *c = send_side ? t->a.sendcounts : t->a.recvcounts;
    return c ? c[r] : t->a.count;
}
static inline size_t tcu_vdispl(const tcu_task_t *t, int send_side, int r)
{
    const size_t *d = send_side ? t->a.sdispls : t->a.rdispls;
    return d ? d[r] : (size_t)r * t->a.count;
}

static inline int tcu_mod(int x, int n)
{
    return ((x % n) + n) % n;
}

/* Recursive doubling and halving over any n: the largest power of two p <= n ranks take part, and the other
 * rem = n - p are folded in first. Ranks below 2 * rem pair up: the even one of a pair ("extra", v = -1) hands its
 * input to the odd one and gets the result back at the end; the odd one becomes virtual rank r / 2. Ranks from
 * 2 * rem on are virtual rank r - rem. Virtual ranks keep the order of real ones. */
typedef struct tcu_fold {
    int p, rem, log2p; /* participants, folded pairs, log2(p) */
    int v;             /* this rank's virtual rank, -1 for an extra rank */
} tcu_fold_t;

static inline tcu_fold_t tcu_fold(int n, int r)
{
    tcu_fold_t f = {1, 0, 0, -1};
    while (2 * f.p <= n) {
        f.p *= 2;
        f.log2p++;
    }
    f.rem = n - f.p;
    f.v = r >= 2 * f.rem ? r - f.rem : r % 2 ? r / 2 : -1;
    return f;
}

/* The real rank of virtual rank v. */
static inline int tcu_fold_real(const tcu_fold_t *f, int v)
{
    return v < f->rem ? 2 * v + 1 : v + f->rem;
}

#endif /* TCU_ENGINE_H */
