/* SPDX-License-Identifier: BSD-3-Clause */
/* Internal structures of the FSDP runtime (include/tcomms/fsdp.h) and the helpers its files share: runtime.c
 * (create, register, finalize, destroy), bucket.c (layout, shard views, load/read), gather.c (unit buffers and
 * references), reduce.c (gradients), install.c (main params to weights), issue.c (posting, log, hash), ops.c
 * (memory and element-wise work on the host, the control-plane exchange), cuda.c (the same on a GPU) and window.c
 * (symmetric windows for the pools on a GPU). */
#ifndef TC_FSDP_RT_H
#define TC_FSDP_RT_H

#include <stdio.h>
#include <tcomms/fsdp.h>

#include "../error.h"
#include "hash.h" /* lib/util/hash.h */

#define TC_FSDP_PAD 16         /* a bucket is padded to a multiple of S * TC_FSDP_PAD elements */
#define TC_FSDP_BYTE_ALIGN 64  /* offsets of buckets inside unit buffers and gradient slots */
#define TC_FSDP_MAX_NDIM 8

enum { TC_FSDP_DENSE, TC_FSDP_EXPERT, TC_FSDP_NDOMAINS };

/* Which communicator of a domain a collective runs on (also what the issue log names). */
typedef enum { TC_FSDP_ON_SHARD, TC_FSDP_ON_AG, TC_FSDP_ON_INTER } tc_fsdp_on_t;
typedef enum { TC_FSDP_ALL_GATHER, TC_FSDP_REDUCE_SCATTER, TC_FSDP_ALL_REDUCE } tc_fsdp_coll_t;

/* Where the step stands for gradients: accumulating microbatches, the last one's reductions posted, or final. */
typedef enum { TC_FSDP_ACCUM, TC_FSDP_REDUCING, TC_FSDP_SYNCED } tc_fsdp_phase_t;

/* The communicators of one domain (dense or expert) and this rank's place in them. */
typedef struct tc_fsdp_domain {
    tcomms_comm_t *shard, *ag, *inter; /* inter: NULL without HSDP */
    int shard_size, shard_rank, inter_size, inter_rank;
    int nmain;                         /* S: ranks the main params are sharded over (1 under NO_SHARD) */
    int main_index;                    /* this rank's piece among them */
} tc_fsdp_domain_t;

typedef struct tc_fsdp_param {
    char *name;
    int64_t shape[TC_FSDP_MAX_NDIM];
    int ndim;
    size_t numel;
    tcomms_dtype_t dtype;
    int unit;
    unsigned flags;
    int bucket;
    size_t offset; /* elements into its bucket */
} tc_fsdp_param_t;

/* One flat bucket: the parameters of one (unit, dtype, expert, requires-grad), padded (see docs/fsdp.md). */
typedef struct tc_fsdp_bucket {
    int unit, domain, no_grad;
    tcomms_dtype_t dtype;          /* compute dtype */
    size_t numel, padded;          /* packed parameters; L */
    size_t shard_len, shard_off;   /* L / shard_size and this rank's shard: weight shard, reduce-scatter block */
    size_t main_len, main_off;     /* this rank's main piece (the optimizer's view) */
    void *weights;                 /* compute dtype: L elements, or the shard (shard_len) under ZeRO-3 */
    void *main;                    /* main dtype, main_len */
    void *grad;                    /* main dtype: L under ZeRO-0/1 (accumulated), else shard_len; NULL if no_grad */
    size_t grad_view;              /* elements into `grad` where the reduced main piece lies */
    size_t ubuf_off, gslot_off;    /* bytes into a unit buffer (ZeRO-3) / a gradient slot (ZeRO-2/3) */
    tcomms_work_t *red_work;       /* the last microbatch's reduction on the shard communicator (ZeRO-0/1) */
    tcomms_work_t *outer_work;     /* the HSDP all-reduce or hybrid reduce-scatter over inter */
    int grad_fresh;                /* ZeRO-2/3: nothing was added into `grad` since zero_grad */
    int grad_stale;                /* ... and it was not zeroed: the first reduce-scatter overwrites it */
    int direct_slot;               /* the slot whose reduce-scatter writes straight into `grad`, or -1 */
} tc_fsdp_bucket_t;

typedef struct tc_fsdp_unit {
    int *buckets, nbuckets;
    int ref[2];        /* references per tcomms_fsdp_dir_t */
    int buf;           /* unit buffer holding the gathered weights (ZeRO-3), or -1 */
    int slot;          /* gradient slot handed out (ZeRO-2/3), or -1 */
    int grad_open;     /* between pre_backward and post_backward: gradients may be added */
    int pos;           /* position in the forward order */
    size_t ubuf_bytes, gslot_bytes;
} tc_fsdp_unit_t;

typedef enum { TC_FSDP_EMPTY, TC_FSDP_BUSY, TC_FSDP_READY } tc_fsdp_state_t;

/* Memory and element-wise work where the buffers live: ops.c on the host, cuda.c on a GPU (device memory, work
 * queued on the configured stream). `dev` is the implementation's state. Everything the runtime writes or reads
 * in bucket, unit, slot or staging memory outside a collective goes through these. Sizes in bytes for alloc, zero
 * and copy, elements otherwise; copy takes either side on the host or the device (unified addressing). */
typedef struct tc_fsdp_ops {
    const char *name;
    tcomms_device_type_t device_type; /* what collectives on these buffers name as opts.device_type */
    tcomms_status_t (*alloc)(void *dev, size_t bytes, void **out); /* zero-filled; bytes == 0 gives NULL */
    void (*free)(void *dev, void *p);
    tcomms_status_t (*zero)(void *dev, void *buf, size_t bytes);
    tcomms_status_t (*cast)(void *dev, void *dst, tcomms_dtype_t dt, const void *src, tcomms_dtype_t st, size_t n);
    tcomms_status_t (*scale)(void *dev, void *buf, size_t n, tcomms_dtype_t dtype, double s);
    /* dst = s * src, plus dst's old value when `keep`; src may be of another dtype (a gradient slot in
     * config->reduce_dtype into a main-dtype shard) */
    tcomms_status_t (*add)(void *dev, void *dst, tcomms_dtype_t dt, const void *src, tcomms_dtype_t st, size_t n,
                           double s, int keep);
    tcomms_status_t (*copy)(void *dev, void *dst, const void *src, size_t bytes);
    tcomms_status_t (*sync)(void *dev); /* block the host until the queued work is done */
    int (*on_device)(void *dev, const void *p); /* 1 when `p` is memory the element-wise work can address */
    void (*close)(void *dev);                   /* after a sync: release `dev` */
    /* Lanes, where work is queued asynchronously (a GPU; NULL on the host, where work is done when called): the
     * caller's stream and the runtime's reduction and gather streams (TC_FSDP_LANE_*), made with `nevents` events
     * by lanes(). lane() picks where later work goes and returns its stream (for collectives' opts.stream);
     * signal records event `ev` at the end of a lane's queued work and await makes a lane's later work wait for
     * it. */
    tcomms_status_t (*lanes)(void *dev, int nevents);
    tcomms_status_t (*lane)(void *dev, int lane, void **stream);
    tcomms_status_t (*signal)(void *dev, int lane, int ev);
    tcomms_status_t (*await)(void *dev, int lane, int ev);
} tc_fsdp_ops_t;

extern const tc_fsdp_ops_t tc_fsdp_host_ops;

/* The lanes: config.stream, the stream where a gradient slot's reduction is queued at post_backward, and the one
 * where a unit buffer is filled and all-gathered. */
enum { TC_FSDP_LANE_CALLER, TC_FSDP_LANE_REDUCE, TC_FSDP_LANE_GATHER };

/* The lanes' events: the reduction lane waits for the caller's (fork) and the reverse (join), the same two for the
 * gather lane, then one per gradient slot (zeroed again) and one per unit (its latest additions done). */
enum { TC_FSDP_EV_FORK, TC_FSDP_EV_JOIN, TC_FSDP_EV_GATHER_FORK, TC_FSDP_EV_GATHER_JOIN, TC_FSDP_EV_SLOTS };

/* A ZeRO-3 unit buffer (BUSY: all-gather in flight) or a ZeRO-2/3 gradient slot (BUSY: handed out to a unit,
 * READY: its reduce-scatter is in flight). */
typedef struct tc_fsdp_buf {
    void *data;
    size_t bytes;
    tcomms_comm_t *owner;                       /* a symmetric window's: tcomms_mem_alloc'ed on it; else NULL */
    tcomms_mem_reg_t *reg[TC_FSDP_NDOMAINS];    /* its registrations, one per communicator using the pool */
    int unit;
    tc_fsdp_state_t state;
    uint64_t stamp;          /* when last used (unit buffers) or posted (slots): eviction / completion order */
    tcomms_work_t **works;   /* one per bucket of the unit */
} tc_fsdp_buf_t;

struct tcomms_fsdp {
    tcomms_fsdp_groups_t groups;
    tcomms_fsdp_config_t cfg;
    char *log_path;
    tc_fsdp_domain_t dom[TC_FSDP_NDOMAINS];
    int finalized;

    tc_fsdp_param_t *params;
    int nparams, cap_params;
    tc_fsdp_bucket_t *buckets;
    int nbuckets;
    tc_fsdp_unit_t *units;
    int nunits;
    int *order, norder; /* forward order of units (set_order), or NULL for 0..n-1 */
    int max_unit_buckets;

    tc_fsdp_buf_t *ubufs; /* ZeRO-3 unit buffers */
    int nubufs;
    tc_fsdp_buf_t *gslots; /* ZeRO-2/3 gradient slots */
    int ngslots;
    int eager;             /* the device made the lanes: a slot's reduction and add are queued on the reduction
                              lane at post (reduce.c), a unit's copy-in and all-gather on the gather lane (gather.c) */
    void *staging;         /* hybrid: one intra shard of main params, for install_weights */
    uint64_t clock;

    int in_backward, is_last, microbatches;
    tc_fsdp_phase_t phase;

    uint64_t issued, hash;
    FILE *log;
    int members_rank;
    const tc_fsdp_ops_t *ops; /* host until finalize, which picks them by groups.members' device */
    void *dev;
    tcomms_op_opts_t opts;    /* what every collective of the runtime passes: timeout, stream, device type */
    tcomms_status_t failed; /* first failed collective: later calls answer ABORTED */
    char failed_msg[256];
};

/* runtime.c: the checks every entry point starts with (NULL, finalized, no earlier failure), and id checks. */
tcomms_status_t tc_fsdp_ready(const tcomms_fsdp_t *rt, const char *fn);
tcomms_status_t tc_fsdp_check_unit(const tcomms_fsdp_t *rt, int unit, const char *fn);
/* What a per-parameter entry point checks first: tc_fsdp_ready, a registered `param_id`, and a non-NULL `ptr`
 * (named `what` in the message). */
tcomms_status_t tc_fsdp_param_entry(const tcomms_fsdp_t *rt, int param_id, const void *ptr, const char *what,
                                    const char *fn);
/* The strategy shards the model weights (ZeRO-3). */
int tc_fsdp_zero3(const tcomms_fsdp_t *rt);
/* The strategy reduce-scatters every microbatch from gradient slots (ZeRO-2/3). */
int tc_fsdp_slots(const tcomms_fsdp_t *rt);
/* ZeRO-3 whose all-gathers cast the main params straight into the unit buffers: no optimizer_casts, and the main
 * piece is this rank's whole shard (not hybrid sharding). Such buckets keep no weight shard. */
int tc_fsdp_casts_in(const tcomms_fsdp_t *rt);

/* bucket.c */
tcomms_status_t tc_fsdp_build_buckets(tcomms_fsdp_t *rt);
tcomms_status_t tc_fsdp_alloc_buckets(tcomms_fsdp_t *rt);
void tc_fsdp_free_buckets(tcomms_fsdp_t *rt);

/* gather.c */
tcomms_status_t tc_fsdp_gather_init(tcomms_fsdp_t *rt);
/* Take a reference for `dir` on `unit`, gathering its weights (ZeRO-3) and posting the prefetch that follows. */
tcomms_status_t tc_fsdp_acquire(tcomms_fsdp_t *rt, int unit, tcomms_fsdp_dir_t dir, const char *fn);
tcomms_status_t tc_fsdp_release(tcomms_fsdp_t *rt, int unit, tcomms_fsdp_dir_t dir, const char *fn);
/* Finish every all-gather in flight and forget gathered, unreferenced weights (they are stale after the shards
 * change). INVALID_ARG when a unit holds a reference, unless `force` (destroy). */
tcomms_status_t tc_fsdp_drop_gathered(tcomms_fsdp_t *rt, int force, const char *fn);
/* The gathered weights of `unit` when it has any (waiting for their all-gather), else NULL. */
tcomms_status_t tc_fsdp_gathered(tcomms_fsdp_t *rt, int unit, void **data);
/* The caller's lane waits for everything queued on the gather lane: before the caller writes what a unit
 * buffer's copy-in may still read (main params, weight shards). Nothing to do without lanes. */
tcomms_status_t tc_fsdp_gather_settle(tcomms_fsdp_t *rt);

/* window.c: after finalize's agreement, move the unit buffers and gradient slots into symmetric windows where
 * config->windows and the backend allow (collective over groups->members); tc_fsdp_pool_free frees either kind. */
tcomms_status_t tc_fsdp_windows(tcomms_fsdp_t *rt);
void tc_fsdp_pool_free(tcomms_fsdp_t *rt, tc_fsdp_buf_t *b);

/* reduce.c */
tcomms_status_t tc_fsdp_reduce_init(tcomms_fsdp_t *rt);
/* Complete every reduction in flight (destroy, zero_grad, finish_grad_sync). */
tcomms_status_t tc_fsdp_reduce_drain(tcomms_fsdp_t *rt);
/* Zero bucket `b`'s main-grad shard if zero_grad left it stale and nothing overwrote it since. */
tcomms_status_t tc_fsdp_grad_settle(tcomms_fsdp_t *rt, int b);

/* issue.c: whether any work handle of the runtime is still held (destroy must not free its buffers). */
int tc_fsdp_pending(const tcomms_fsdp_t *rt);
/* Post one collective in place on `buf` (count: elements per rank for gathers and scatters, all of them
 * for an all-reduce), recording it; *work stays NULL when the communicator has one rank (nothing to do). */
tcomms_status_t tc_fsdp_post(tcomms_fsdp_t *rt, tc_fsdp_coll_t coll, int domain, tc_fsdp_on_t on, int bucket,
                             void *buf, size_t count, tcomms_dtype_t dtype, tcomms_work_t **work);
/* A reduce-scatter over the shard communicator out of place: `buf`'s blocks reduced with `op` into `out`. */
tcomms_status_t tc_fsdp_post_scatter_into(tcomms_fsdp_t *rt, int domain, int bucket, const void *buf, void *out,
                                          size_t count, tcomms_dtype_t dtype, tcomms_op_t op, tcomms_work_t **work);
/* Wait for *work (NULL: done) within the configured timeout and free it. A failure marks the runtime failed; a
 * timeout keeps the handle, as the operation may still write its buffer. */
tcomms_status_t tc_fsdp_wait(tcomms_fsdp_t *rt, tcomms_work_t **work);
/* Record `st` (the current message) as the runtime's failure and return it. */
tcomms_status_t tc_fsdp_fail(tcomms_fsdp_t *rt, tcomms_status_t st);
/* tc_hash_more (lib/util/hash.h) over v's bytes. */
uint64_t tc_fsdp_hash_i64(uint64_t h, int64_t v);
tcomms_status_t tc_fsdp_log_open(tcomms_fsdp_t *rt);

/* ops.c: the runtime's calls into rt->ops. A failure (device work only) marks the runtime failed. */
tcomms_status_t tc_fsdp_alloc(tcomms_fsdp_t *rt, size_t bytes, void **out);
void tc_fsdp_free(tcomms_fsdp_t *rt, void *p);
tcomms_status_t tc_fsdp_zero(tcomms_fsdp_t *rt, void *buf, size_t n, tcomms_dtype_t dtype);
tcomms_status_t tc_fsdp_cast(tcomms_fsdp_t *rt, void *dst, tcomms_dtype_t dt, const void *src, tcomms_dtype_t st,
                             size_t n);
tcomms_status_t tc_fsdp_scale(tcomms_fsdp_t *rt, void *buf, size_t n, tcomms_dtype_t dtype, double s);
/* dst (dtype dt) = s * src (dtype st), plus dst's old value when `keep` */
tcomms_status_t tc_fsdp_add(tcomms_fsdp_t *rt, void *dst, tcomms_dtype_t dt, const void *src, tcomms_dtype_t st,
                            size_t n, double s, int keep);
tcomms_status_t tc_fsdp_copy(tcomms_fsdp_t *rt, void *dst, const void *src, size_t bytes);
tcomms_status_t tc_fsdp_sync(tcomms_fsdp_t *rt);
/* Lanes (tc_fsdp_ops_t): queue later work and collectives on `lane`; record / wait for event `ev`. */
tcomms_status_t tc_fsdp_lane(tcomms_fsdp_t *rt, int lane);
tcomms_status_t tc_fsdp_signal(tcomms_fsdp_t *rt, int lane, int ev);
tcomms_status_t tc_fsdp_await(tcomms_fsdp_t *rt, int lane, int ev);
/* Lane `to` waits for the work queued so far on lane `from`, through event `ev`. */
tcomms_status_t tc_fsdp_follow(tcomms_fsdp_t *rt, int from, int to, int ev);
/* Pick rt->ops from groups.members' device (finalize); tc_fsdp_ops_close returns to the host ops (destroy). */
tcomms_status_t tc_fsdp_ops_open(tcomms_fsdp_t *rt);
void tc_fsdp_ops_close(tcomms_fsdp_t *rt);

/* ops.c: a blocking control-plane collective (all_gather, or all_reduce with `op`) on host buffers over `comm`,
 * on the CPU backend when it has one, else staged through device memory on the communicator's GPU (a
 * communicator with NCCL alone). `count` as tcomms_all_gather / tcomms_all_reduce. */
tcomms_status_t tc_fsdp_ctl(tcomms_comm_t *comm, tc_fsdp_coll_t coll, const void *send, void *recv, size_t count,
                            tcomms_dtype_t dtype, tcomms_op_t op, uint32_t timeout_ms);

/* cuda.c (or cuda_none.c without nvcc): the device ops on CUDA device `device`, work queued on `stream`; sync
 * waits at most `sync_ms`. */
tcomms_status_t tc_fsdp_cuda_open(int device, void *stream, uint32_t sync_ms, const tc_fsdp_ops_t **ops,
                                  void **dev);

/* Byte address of element `i` of a `dtype` array. */
static inline void *tc_fsdp_at(void *base, size_t i, tcomms_dtype_t dtype)
{
    return (char *)base + i * tcomms_dtype_size(dtype);
}

#endif
