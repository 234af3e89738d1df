/* SPDX-License-Identifier: BSD-3-Clause */
/* tcomms FSDP runtime: a rank layout and the communicators it implies, and a runtime that shards flat parameter
 * buckets over them (ZeRO-0..3, HSDP, hybrid sharding, expert groups), gathering and reducing asynchronously on
 * separate communicators. There are no hooks: a training loop, or a pipeline schedule that bypasses "module
 * forward", calls the entry points below. Part of libtcomms; see docs/fsdp.md for the model and an example. */
#ifndef TCOMMS_FSDP_H
#define TCOMMS_FSDP_H

#include <stddef.h>
#include <stdint.h>

#include <tcomms/tcomms.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- rank layout ----------------------------------------------------------------------------------------------- */

/* How ranks are arranged into tensor (tp), context (cp), expert (ep), data (dp) and pipeline (pp) parallel groups,
 * as Megatron's RankGenerator does. `order` lists the five tokens, most local (fastest varying) first; a rank is
 * rank_offset + sum(coord[i] * stride[i]). Two layouts are derived from one set of sizes:
 *   dense:  tp, cp, dp, pp (ep counted as 1)
 *   expert: expert_tp, ep, expert_dp, pp (cp counted as 1), expert_dp = tp*cp*dp / (expert_tp*ep)
 * outer_dp > 1 splits each dp-cp group into outer_dp replicas for HSDP: intra groups are contiguous slices of the
 * dp-cp member list (size dp*cp/outer_dp), inter groups the strided complement; the same for expert_dp.
 * Megatron's constraint applies: the order ends with pp, or pp == 1, or expert_dp == dp. */
typedef struct tcomms_fsdp_layout_params {
    int tp, cp, ep, dp, pp; /* 0 means 1 */
    int expert_tp;          /* 0 means 1 */
    int outer_dp;           /* HSDP replicas; 0 means 1 (no HSDP) */
    const char *order;      /* NULL means "tp-cp-ep-dp-pp"; every token once, '-' separated */
    int rank_offset;        /* the layout covers world ranks [rank_offset, rank_offset + tp*cp*dp*pp) */
} tcomms_fsdp_layout_params_t;

typedef struct tcomms_fsdp_layout tcomms_fsdp_layout_t;

/* Group kinds. Members of every group are listed in layout order (first token of the order fastest). */
typedef enum tcomms_fsdp_group_kind {
    TCOMMS_FSDP_GROUP_DP_CP,         /* dense data parallel including context parallel: the dense shard group */
    TCOMMS_FSDP_GROUP_DP_CP_INTRA,   /* HSDP: dense shard group (a slice of DP_CP); == DP_CP when outer_dp == 1 */
    TCOMMS_FSDP_GROUP_DP_CP_INTER,   /* HSDP: dense replicate group; size 1 when outer_dp == 1 */
    TCOMMS_FSDP_GROUP_EXPT_DP,       /* expert data parallel: the expert shard group */
    TCOMMS_FSDP_GROUP_EXPT_DP_INTRA, /* HSDP, expert domain */
    TCOMMS_FSDP_GROUP_EXPT_DP_INTER,
    TCOMMS_FSDP_GROUP_TP,
    TCOMMS_FSDP_GROUP_CP,
    TCOMMS_FSDP_GROUP_DP,
    TCOMMS_FSDP_GROUP_PP,
    TCOMMS_FSDP_GROUP_EP,            /* expert layout */
    TCOMMS_FSDP_GROUP_EXPT_TP,       /* expert layout */
    TCOMMS_FSDP_GROUP_KIND_COUNT
} tcomms_fsdp_group_kind_t;

/* Build a layout; INVALID_ARG naming the size, token or constraint at fault. */
TCOMMS_API tcomms_status_t tcomms_fsdp_layout_create(const tcomms_fsdp_layout_params_t *params,
                                                     tcomms_fsdp_layout_t **out);
TCOMMS_API void tcomms_fsdp_layout_free(tcomms_fsdp_layout_t *layout);
/* Number of ranks the layout covers (tp*cp*dp*pp). */
TCOMMS_API tcomms_status_t tcomms_fsdp_layout_size(const tcomms_fsdp_layout_t *layout, int *nranks);
/* Every group of `kind`: *ngroups groups of *group_size world ranks each. `ranks` (may be NULL to ask only for the
 * sizes) receives group g's members at ranks[g * group_size ...]; `cap` is its length in elements (INVALID_ARG when
 * too small). */
TCOMMS_API tcomms_status_t tcomms_fsdp_layout_groups(const tcomms_fsdp_layout_t *layout, tcomms_fsdp_group_kind_t kind,
                                                     int *ngroups, int *group_size, int *ranks, size_t cap);
/* The group of `kind` holding world rank `rank`: its index among the groups and `rank`'s index inside it.
 * INVALID_ARG when `rank` is outside the layout. */
TCOMMS_API tcomms_status_t tcomms_fsdp_layout_group_of(const tcomms_fsdp_layout_t *layout,
                                                       tcomms_fsdp_group_kind_t kind, int rank, int *group,
                                                       int *index);
/* Lower-case name of a kind ("dp_cp", "expt_dp_intra"); NULL when invalid. */
TCOMMS_API const char *tcomms_fsdp_group_kind_name(tcomms_fsdp_group_kind_t kind);

/* ---- process-group collection ---------------------------------------------------------------------------------- */

/* The communicators the runtime uses, passed to it explicitly. tcomms_fsdp_groups_create fills every field by
 * splitting `world` (one split per kind, in one fixed order on every rank); a program may also fill the struct
 * itself, and tcomms_fsdp_finalize then checks each communicator's members against the layout.
 * The *_ag communicators carry the all-gathers so they overlap the reduce-scatters: each is a duplicate of the
 * communicator that shards its domain (dp_cp, or dp_cp_intra under HSDP), with the same members in the same
 * order, never derived from the layout a second time. */
typedef struct tcomms_fsdp_groups {
    tcomms_comm_t *members;   /* every rank of the layout, in world order (world itself when rank_offset == 0 and
                                 the layout covers the world) */
    tcomms_comm_t *dp_cp, *dp_cp_ag, *dp_cp_intra, *dp_cp_inter;
    tcomms_comm_t *expt_dp, *expt_dp_ag, *expt_dp_intra, *expt_dp_inter;
    tcomms_comm_t *tp, *cp, *dp, *pp, *ep, *expt_tp;
    int owned;                /* set by tcomms_fsdp_groups_create: tcomms_fsdp_groups_destroy destroys them */
} tcomms_fsdp_groups_t;

/* Collective over `world` (every world rank calls it), ending with a barrier on it. Ranks outside the layout (below
 * rank_offset or beyond its end) get a struct of NULL communicators. Under outer_dp == 1 the intra fields equal
 * dp_cp/expt_dp (not duplicates) and the inter fields are NULL. */
TCOMMS_API tcomms_status_t tcomms_fsdp_groups_create(tcomms_comm_t *world, const tcomms_fsdp_layout_t *layout,
                                                     tcomms_fsdp_groups_t *groups);
/* Destroy the communicators tcomms_fsdp_groups_create made (each once) and zero the struct. Local. */
TCOMMS_API void tcomms_fsdp_groups_destroy(tcomms_fsdp_groups_t *groups);

/* ---- runtime --------------------------------------------------------------------------------------------------- */

typedef struct tcomms_fsdp tcomms_fsdp_t;

/* What is sharded over the shard group (ZeRO stages). Gradients are reduced in config->reduce_dtype (by default
 * the main dtype). */
typedef enum tcomms_fsdp_strategy {
    TCOMMS_FSDP_NO_SHARD,           /* ZeRO-0 (DDP): all-reduce of full gradients on the last microbatch */
    TCOMMS_FSDP_OPTIM,              /* ZeRO-1: main params sharded; one reduce-scatter on the last microbatch */
    TCOMMS_FSDP_OPTIM_GRADS,        /* ZeRO-2: and gradients; reduce-scatter every microbatch */
    TCOMMS_FSDP_OPTIM_GRADS_PARAMS  /* ZeRO-3: and model weights; all-gather before forward and backward */
} tcomms_fsdp_strategy_t;

/* What happens across the HSDP inter (replicate) group; needs a layout with outer_dp > 1, and is required there. */
typedef enum tcomms_fsdp_outer {
    TCOMMS_FSDP_OUTER_NONE,
    TCOMMS_FSDP_OUTER_REPLICATE, /* HSDP: all-reduce the gradient shards across replicas on the last microbatch */
    TCOMMS_FSDP_OUTER_OPTIM      /* hybrid sharding: main params and gradients sharded over intra x inter; the
                                    last microbatch reduce-scatters across replicas, and tcomms_fsdp_install_weights
                                    all-gathers them back; needs strategy OPTIM_GRADS or OPTIM_GRADS_PARAMS */
} tcomms_fsdp_outer_t;

typedef enum tcomms_fsdp_dir { TCOMMS_FSDP_FORWARD, TCOMMS_FSDP_BACKWARD } tcomms_fsdp_dir_t;

enum {
    TCOMMS_FSDP_PARAM_EXPERT = 1u << 0,  /* sharded over the expert groups (expt_dp) */
    TCOMMS_FSDP_PARAM_NO_GRAD = 1u << 1  /* frozen: gathered, never reduced */
};

/* Runtime configuration. Start from `tcomms_fsdp_config_t c = {0};`: zero fields take the defaults named. */
typedef struct tcomms_fsdp_config {
    tcomms_fsdp_strategy_t strategy;   /* default NO_SHARD */
    tcomms_fsdp_outer_t outer;         /* default NONE */
    tcomms_dtype_t main_dtype;         /* main params and gradients; 0 (INT8) means FLOAT32; FLOAT32 or FLOAT64 */
    int prefetch_forward;              /* units gathered ahead of the one in use: forward, in the unit order set by
                                          tcomms_fsdp_set_order (default 0 = none) */
    int prefetch_backward;             /* the same in backward order */
    int max_live_units;                /* ZeRO-3: unit buffers (gathered weights) that exist at once, allocated
                                          at finalize and reused; default 2 (double buffer). A prefetch takes a free
                                          buffer or one holding an unreferenced unit, else it is skipped; a
                                          pre_forward/pre_backward that finds none is INVALID_ARG naming the holders.
                                          ZeRO-2/3 gradient buffers come from a pool of max(2, max_live_units) */
    int keep_after_forward;            /* ZeRO-3: keep weights gathered from forward until backward (no reshard) */
    double grad_scale;                 /* gradients are multiplied by it (ZeRO-0/1 before reduction, ZeRO-2/3 the
                                          reduced shard); 0 means 1 */
    const char *log_path;              /* when set, each rank appends its issued collectives (communicator, op,
                                          bucket, bytes) to "<log_path>.<members rank>" */
    uint32_t timeout_ms;               /* bounds each wait; 0 = the communicators' own timeouts */
    void *stream;                      /* CUDA: the stream the training loop computes on (a cudaStream_t; NULL is
                                          the legacy default stream) */
    int windows;                       /* CUDA: 0 (default) puts the unit buffers and gradient slots in symmetric
                                          windows where the backend has them (NCCL 2.27+), else plain device
                                          memory; 1 requires windows (finalize fails without); -1 never */
    int optimizer_casts;               /* 1: the optimizer writes each piece's model weights itself
                                          (tcomms_fsdp_shard_t.weights, the cast of the new main params, as a
                                          fused optimizer does), and install_weights does not cast; default 0 */
    tcomms_dtype_t reduce_dtype;       /* ZeRO-2/3: the dtype of the gradient buffers (tcomms_fsdp_grad_data) and of
                                          each microbatch's reduce-scatter; 0 (INT8) means main_dtype. BFLOAT16 or
                                          FLOAT16 halve the bytes reduced (FSDP2's reduce_dtype, Megatron's
                                          grad_reduce_in_fp32 off); each reduced block is then scaled and added
                                          into the main-dtype gradient shard, so microbatches still accumulate in
                                          main_dtype. ZeRO-0/1 accept main_dtype only */
} tcomms_fsdp_config_t;

/* CUDA. When groups.members is bound to a CUDA device (tcomms_comm_device), the runtime's buffers are device memory
 * on that device, allocated at finalize; its element-wise work runs on config.stream and its collectives take that
 * stream as their caller's stream, so every result is ordered on it and no entry point blocks the host for device
 * work, except tcomms_fsdp_read_param (and load_param from host memory). param_data, grad_data and the shard views
 * are then device pointers: add gradients into grad_data by work on the stream between pre_backward and
 * post_backward, and run the optimizer on the stream before install_weights. load_param and read_param take host
 * or device pointers (unified addressing tells them apart). The communicators may hold NCCL alone or
 * "cpu:<x>,cuda:nccl": the runtime's own checks work in both cases. Needs a libtcomms built with nvcc. */

/* Create a runtime over `groups` (copied; the communicators must outlive the runtime); `config` may be NULL (all
 * defaults). Local. INVALID_ARG when the configuration and the communicators present disagree (HSDP without inter
 * groups, expert params later without expert groups, ...). */
TCOMMS_API tcomms_status_t tcomms_fsdp_create(const tcomms_fsdp_groups_t *groups, const tcomms_fsdp_config_t *config,
                                              tcomms_fsdp_t **out);
/* Free the runtime and its buffers after its pending collectives complete; NULL is a no-op. Local, except when its
 * buffers are symmetric windows (CUDA, config->windows): releasing a window is collective over the communicators
 * it is registered on, so every member calls destroy. */
TCOMMS_API void tcomms_fsdp_destroy(tcomms_fsdp_t *fsdp);

/* Register a parameter before tcomms_fsdp_finalize. `dtype` is its compute dtype (FLOAT32, BFLOAT16, FLOAT16 or
 * FLOAT64); `unit` (>= 0) groups parameters gathered and reduced together (one layer); ids count from 0 in
 * registration order. Every rank registers the same parameters in the same order. */
TCOMMS_API tcomms_status_t tcomms_fsdp_register_param(tcomms_fsdp_t *fsdp, const char *name, const int64_t *shape,
                                                      int ndim, tcomms_dtype_t dtype, int unit, unsigned flags,
                                                      int *param_id);

/* Lay out the buckets and allocate them. Collective over groups.members: it checks every communicator's members
 * against the layout, that each *_ag communicator matches its shard communicator, and that every rank holds the
 * same configuration (a hash of order, sizes, offset, strategy, bucket layout and dtypes). A mismatch is
 * INVALID_ARG naming both hashes (or the communicator), on every rank, never a hang. Weights start at zero. */
TCOMMS_API tcomms_status_t tcomms_fsdp_finalize(tcomms_fsdp_t *fsdp, const tcomms_fsdp_layout_t *layout);

/* The order units run in forward (backward is its reverse); prefetch follows it. Default: 0, 1, ..., n-1. */
TCOMMS_API tcomms_status_t tcomms_fsdp_set_order(tcomms_fsdp_t *fsdp, const int *units, int nunits);

/* Set parameter `param_id` from its full value `values` (numel elements of the main dtype, the same on every rank):
 * each rank keeps its slice of the main params and of the model weights. Local. */
TCOMMS_API tcomms_status_t tcomms_fsdp_load_param(tcomms_fsdp_t *fsdp, int param_id, const void *values);
/* Gather the full main-dtype value of `param_id` into `values` on every rank. Collective over the parameter's
 * shard group (and inter group under hybrid sharding). */
TCOMMS_API tcomms_status_t tcomms_fsdp_read_param(tcomms_fsdp_t *fsdp, int param_id, void *values);

/* ---- a step ---------------------------------------------------------------------------------------------------- */
/* Per optimizer step:
 *   tcomms_fsdp_zero_grad
 *   per microbatch: per unit in order  pre_forward, compute, post_forward
 *                   root_pre_backward(is_last)
 *                   per unit in reverse pre_backward, compute (add gradients), post_backward
 *                   root_post_backward
 *   tcomms_fsdp_finish_grad_sync (or tcomms_fsdp_sync_shard per piece), an optimizer over tcomms_fsdp_shard
 *   views, tcomms_fsdp_install_weights
 * A schedule may interleave the forward of one microbatch with the backward of another (1F1B): each unit counts its
 * users per direction and is resharded only when both counts are zero. Backward passes of microbatches do not
 * interleave with each other. All entry points are local calls that post or wait collectives; every rank must
 * make the same calls in the same order. */

TCOMMS_API tcomms_status_t tcomms_fsdp_zero_grad(tcomms_fsdp_t *fsdp);

/* Post the all-gather of `unit` without waiting (explicit prefetch); a no-op when the unit is gathered, in flight,
 * or not sharded. */
TCOMMS_API tcomms_status_t tcomms_fsdp_unshard(tcomms_fsdp_t *fsdp, int unit, tcomms_fsdp_dir_t dir);

/* Take a reference on `unit`'s weights for `dir`: wait for its all-gather (posting it first if needed), then post
 * the prefetch of the next units in that direction. The weights stay valid until the matching release. */
TCOMMS_API tcomms_status_t tcomms_fsdp_pre_forward(tcomms_fsdp_t *fsdp, int unit);
/* Drop the forward reference; reshard when no reference remains, unless keep_after_forward, or the unit is the
 * last of the forward order (the backward starts with it; its buffer is reused when another unit needs one). */
TCOMMS_API tcomms_status_t tcomms_fsdp_post_forward(tcomms_fsdp_t *fsdp, int unit);

/* Mark the start of one microbatch's backward; `is_last` says it is the step's last microbatch, whose
 * root_post_backward completes the gradient reduction (ZeRO-0/1 reduce here, HSDP all-reduces, hybrid sharding
 * reduce-scatters across replicas). */
TCOMMS_API tcomms_status_t tcomms_fsdp_root_pre_backward(tcomms_fsdp_t *fsdp, int is_last);
/* As pre_forward for backward; also hands out `unit`'s gradient buffers (zeroed, or holding the gradients of
 * earlier microbatches under ZeRO-0/1), into which the caller adds its gradients. */
TCOMMS_API tcomms_status_t tcomms_fsdp_pre_backward(tcomms_fsdp_t *fsdp, int unit);
/* Drop the backward reference and post `unit`'s gradient reduce-scatter (ZeRO-2/3; the result is added into the
 * main-dtype gradient shard), or keep accumulating (ZeRO-0/1). The gradient buffers are invalid afterwards. */
TCOMMS_API tcomms_status_t tcomms_fsdp_post_backward(tcomms_fsdp_t *fsdp, int unit);
/* End one microbatch's backward: reduce units whose post_backward was not called (their gradients count as zero),
 * and on the last microbatch post the remaining reductions. */
TCOMMS_API tcomms_status_t tcomms_fsdp_root_post_backward(tcomms_fsdp_t *fsdp);

/* Wait for every posted reduction: the main-dtype gradient shards are final. */
TCOMMS_API tcomms_status_t tcomms_fsdp_finish_grad_sync(tcomms_fsdp_t *fsdp);
/* finish_grad_sync for shard piece `i` alone (tcomms_fsdp_shard): its gradients are final, while other units'
 * reductions may still run. An optimizer that steps each piece after its sync_shard, in the order backward
 * completed units (reverse forward order), overlaps the step with the reductions of the last units. Local; the
 * pieces' values equal finish_grad_sync's. */
TCOMMS_API tcomms_status_t tcomms_fsdp_sync_shard(tcomms_fsdp_t *fsdp, int i);

/* The model weights of `param_id` (compute dtype, row-major, numel elements). Valid while its unit holds a
 * reference (ZeRO-3), or always for other strategies; INVALID_ARG when the unit is not gathered. */
TCOMMS_API tcomms_status_t tcomms_fsdp_param_data(tcomms_fsdp_t *fsdp, int param_id, void **data);
/* The gradient buffer of `param_id` (config->reduce_dtype, numel elements) between pre_backward and post_backward
 * of its unit; add into it. INVALID_ARG otherwise, and for NO_GRAD parameters. */
TCOMMS_API tcomms_status_t tcomms_fsdp_grad_data(tcomms_fsdp_t *fsdp, int param_id, void **data);

/* One contiguous piece of main params and gradients owned by this rank, for an optimizer. Padding elements are
 * included and stay zero in both. */
typedef struct tcomms_fsdp_shard {
    void *main;            /* main params (main dtype) */
    const void *grad;      /* reduced gradients (main dtype); NULL for a NO_GRAD bucket */
    size_t count;          /* elements */
    tcomms_dtype_t dtype;  /* the main dtype */
    int unit;
    int expert;            /* 1 for an expert bucket */
    void *weights;         /* this piece of the model weights (weights_dtype, count elements, element i the cast
                              of main[i]): what an optimizer writes under config->optimizer_casts. NULL under
                              ZeRO-3 with neither optimizer_casts nor OUTER_OPTIM: no weight shard is kept
                              there, the all-gathers cast main into the gathered weights */
    tcomms_dtype_t weights_dtype; /* the compute dtype */
} tcomms_fsdp_shard_t;

/* Number of shard pieces on this rank (one per bucket), and the i-th. */
TCOMMS_API tcomms_status_t tcomms_fsdp_shard_count(const tcomms_fsdp_t *fsdp, int *count);
TCOMMS_API tcomms_status_t tcomms_fsdp_shard(const tcomms_fsdp_t *fsdp, int i, tcomms_fsdp_shard_t *shard);
/* Where `param_id` meets this rank's pieces: the shard index, the offset in it, the offset inside the parameter
 * (elements), and how many elements. *count == 0 when this rank holds none of it. Parameters are laid out
 * contiguously, so one range per rank. */
TCOMMS_API tcomms_status_t tcomms_fsdp_param_range(const tcomms_fsdp_t *fsdp, int param_id, int *shard,
                                                   size_t *shard_offset, size_t *param_offset, size_t *count);

/* After the optimizer changed the main params: cast them into the model weights (unless config->optimizer_casts:
 * the optimizer wrote each piece's weights; nor under ZeRO-3 without hybrid sharding, whose all-gathers cast the
 * main params themselves), and all-gather them where the model weights are not sharded like the main params
 * (ZeRO-1/2, hybrid sharding). Posts the collectives and waits for them. Under ZeRO-3 with prefetch_forward > 0 it
 * also posts the next step's all-gather of the first unit in forward order, once its weights are in place, and
 * leaves it in flight for pre_forward. */
TCOMMS_API tcomms_status_t tcomms_fsdp_install_weights(tcomms_fsdp_t *fsdp);

/* ---- debugging ------------------------------------------------------------------------------------------------- */

/* Number of collectives this runtime has issued, and a hash of their sequence (communicator kind, op, bucket,
 * bytes). */
TCOMMS_API tcomms_status_t tcomms_fsdp_issued(const tcomms_fsdp_t *fsdp, uint64_t *count, uint64_t *hash);
/* Collective over groups.members: INVALID_ARG naming the lowest and highest (count, hash) when the ranks issued
 * different sequences. Every member issues the same sequence in a correct program. */
TCOMMS_API tcomms_status_t tcomms_fsdp_check_issued(tcomms_fsdp_t *fsdp);

#ifdef __cplusplus
}
#endif
#endif /* TCOMMS_FSDP_H */
