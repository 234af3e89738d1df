/* SPDX-License-Identifier: BSD-3-Clause */
/* The FSDP trainer's state (private to examples/fsdp_mlp), shared by the driver in train.c, which builds the layout,
 * groups and runtime, registers the parameters and runs the schedules, and its compute back ends: the host one in
 * train.c and the CUDA one in cuda_train.c, which compute units, the optimizer and the step's loss. */
#ifndef FSDP_MLP_RUN_H
#define FSDP_MLP_RUN_H

#include "train.h"

#define EXD 17 /* width of the expert layer's rows in the exchanges */

typedef struct run run_t;

/* What a back end does; every hook returns 0, or -1 with the run's error set (mlp_run_failf). */
typedef struct mlp_backend {
    int (*configure)(run_t *r, tcomms_fsdp_config_t *c); /* before tcomms_fsdp_create; may be NULL */
    int (*alloc)(run_t *r);   /* after the coordinates and the exchange counts are known */
    void (*release)(run_t *r); /* after the runtime and groups are destroyed; also after a failed or skipped
                                  configure or alloc */
    int (*load_microbatch)(run_t *r, int step, int m);
    int (*forward)(run_t *r, int m, int u);  /* unit u of microbatch m, its weights referenced */
    int (*backward)(run_t *r, int m, int u); /* ... and its gradient buffers handed out */
    int (*sgd)(run_t *r, const tcomms_fsdp_shard_t *s, double lr);
    int (*step_loss)(run_t *r, double *loss); /* the step's global loss; collective over groups.dp_cp */
} mlp_backend_t;

/* One microbatch's state on this rank (host back end): activations of its samples (rows of MLP_MAX_DIM), targets,
 * and on the expert owner side the tokens received and the expert outputs. */
typedef struct mb {
    double *act[MLP_UNITS + 1];
    double *y;
    double *ex_in, *ex_out;
    double loss;
} mb_t;

struct run {
    const mlp_opts_t *o;
    mlp_result_t *res;
    const mlp_backend_t *be;
    tcomms_fsdp_layout_t *layout;
    tcomms_fsdp_groups_t groups;
    tcomms_fsdp_t *rt;
    tcomms_dtype_t cdt, mdt;
    int grid, E, per_ep, elo, ep, eprank, dp, dprank;
    int lo, n;             /* this rank's samples of each microbatch: [lo, lo + n) */
    int *peer_lo, *peer_n; /* the same for each member of the ep group */
    int nrecv;             /* tokens this rank's experts receive per microbatch */
    size_t *scount, *rcount;
    int nrid;
    int *gid_of_rid, *rid_of_gid;
    /* host back end */
    double *sendbuf, *recvbuf, *dcur, *dnext, *exdx;
    mb_t *mbs;
    void *priv; /* other back ends */
};

int mlp_run_failf(run_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int mlp_run_fail_call(run_t *r, const char *call, tcomms_status_t st);

#define MLP_CALL(r, expr)                                                                                          \
    do {                                                                                                           \
        tcomms_status_t st_ = (expr);                                                                              \
        if (st_ != TCOMMS_SUCCESS)                                                                                 \
            return mlp_run_fail_call((r), #expr, st_);                                                             \
    } while (0)

/* The runtime id of W (bias 0) or b (bias 1) of unit u, expert e. */
int mlp_run_rid(const run_t *r, int unit, int expert, int bias);
/* The owning ep rank of token t. */
int mlp_run_owner(const run_t *r, int t);
/* The local expert index of the i-th received token (received tokens are packed by source ep rank, in token
 * order). */
int mlp_run_received_expert(const run_t *r, int i);
/* The weights W and b (b may be NULL) of unit u, expert e (ignored for dense units), and their gradient buffers, as
 * tcomms_fsdp_param_data and tcomms_fsdp_grad_data give them. */
int mlp_run_weights(run_t *r, int unit, int expert, void **W, void **b);
int mlp_run_grads(run_t *r, int unit, int expert, void **gW, void **gb);

/* mlp_train_fsdp with back end `be`. */
int mlp_train_fsdp_on(tcomms_comm_t *world, const mlp_opts_t *o, mlp_result_t *res, const mlp_backend_t *be);

#endif
