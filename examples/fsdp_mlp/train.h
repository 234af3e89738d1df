/* SPDX-License-Identifier: BSD-3-Clause */
/* fsdp_mlp trainers: one over the FSDP runtime on the ranks of a world communicator, and the unsharded reference
 * in one process, both on the model of model.h; main.c and tests/test_fsdp_train.c drive them. */
#ifndef FSDP_MLP_TRAIN_H
#define FSDP_MLP_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include <tcomms/fsdp.h>
#include <tcomms/tcomms.h>

#include "model.h"

typedef enum mlp_schedule { MLP_STANDARD, MLP_1F1B } mlp_schedule_t;

/* A run. Start from mlp_opts_default(). The global batch of a microbatch is `batch` samples; data rank d of dp
 * takes samples [d*batch/dp, (d+1)*batch/dp) of each. */
typedef struct mlp_opts {
    int steps, microbatches, batch;
    int strategy;         /* tcomms_fsdp_strategy_t */
    int prefetch;         /* forward and backward */
    int outer;            /* HSDP replicas (1: none) */
    int hybrid;           /* with outer > 1: TCOMMS_FSDP_OUTER_OPTIM instead of REPLICATE */
    int ep, tp;           /* expert parallel size (2*ep experts), tensor parallel stand-in */
    int offset;           /* first world rank of the layout */
    int dp;               /* 0: (world size - offset) / tp */
    const char *order;    /* NULL: the default */
    mlp_schedule_t schedule;
    mlp_mode_t mode;
    tcomms_dtype_t dtype; /* compute dtype; TCOMMS_INT8 (0): float64 (deterministic) or float32 (random) */
    uint64_t seed;
    int lr_log2;          /* learning rate 2^lr_log2 */
    const char *log_path; /* the runtime's issue log */
    uint32_t timeout_ms;  /* the runtime's waits */
} mlp_opts_t;

mlp_opts_t mlp_opts_default(void);

/* Compute and main dtype of a run. */
tcomms_dtype_t mlp_compute_dtype(const mlp_opts_t *o);
tcomms_dtype_t mlp_main_dtype(const mlp_opts_t *o);

/* Results: losses[steps] (the global loss of each step) and the final main params of the full model in the global
 * order of model.h, as doubles (mlp_total(2*ep) of them); an FSDP rank writes NaN where it holds no copy (experts
 * of other ep ranks). Either pointer may be NULL. `err` receives a message on failure. */
typedef struct mlp_result {
    double *losses;
    double *params;
    int in_layout; /* set by the FSDP trainer: 0 on ranks below the offset, which only took part in groups */
    char err[512];
} mlp_result_t;

/* Check options that need no communicator; 0, or -1 with res->err set. */
int mlp_opts_check(const mlp_opts_t *o, mlp_result_t *res);

/* Train on every rank of `world` (collective): ranks outside the layout take part in creating the groups, then
 * wait in a barrier on `world` for the others. 0, or -1 with res->err naming the call that failed and
 * tcomms_last_error(). */
int mlp_train_fsdp(tcomms_comm_t *world, const mlp_opts_t *o, mlp_result_t *res);

/* Train the same model unsharded in this process; 0, or -1 with res->err. */
int mlp_train_reference(const mlp_opts_t *o, mlp_result_t *res);

/* Loss and gradient (float64, no grid) of the full model `params` (global order) over `n` samples starting at
 * sample `first` of the data stream; for finite-difference checks. */
double mlp_full_loss_grad(const mlp_opts_t *o, const double *params, uint64_t first, int n, double *grad);

/* Forward only: the full model `params` (global order; NaN where a rank holds no copy makes it unusable) on `n`
 * samples from sample `first`; the fraction whose largest output is the target's largest (the class, in learn
 * mode), and *loss their mean loss. NaN when out of memory. */
double mlp_full_accuracy(const mlp_opts_t *o, const double *params, uint64_t first, int n, double *loss);

/* A program: its name, the world's device, its trainers, and whether it can run here. */
typedef struct mlp_driver {
    const char *prog;
    tcomms_device_t device; /* the world communicator's device; its backend is TCOMMS_BACKEND's, else the default */
    int (*available)(char *why, size_t len); /* 0 when it can run; else `why` says why not; NULL: always */
    int (*train_fsdp)(tcomms_comm_t *world, const mlp_opts_t *o, mlp_result_t *res);
    int (*train_reference)(const mlp_opts_t *o, mlp_result_t *res);
} mlp_driver_t;

/* The command line (cli.c): parses the options, trains and prints "step N loss X" per step from the layout's
 * first rank (or the reference). Returns the exit status: 0, 1 on a failure, 2 on a bad option, 77 when
 * d->available says the program cannot run here. */
int mlp_main(int argc, char **argv, const mlp_driver_t *d);

#endif
