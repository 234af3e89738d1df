/* SPDX-License-Identifier: BSD-3-Clause */
/* What test_fsdp_runtime (results against loops) and test_fsdp_calls (call order, configuration and failures)
 * share: the test model, one rank's environment (world, layout, communicators), a scenario, and the runtime's step
 * and checks for it on the CPU backends (tests/fsdp_case.c). */
#ifndef TESTS_FSDP_CASE_H
#define TESTS_FSDP_CASE_H

#include <stddef.h>
#include <stdint.h>
#include <check.h>
#include <tcomms/fsdp.h>

#include "mrank.h"

#define OP_TIMEOUT_MS 20000u
#define JOB_S 60
#define SCALE 0.5
#define NPARAMS 8
#define NUNITS 3

/* A parameter of the test model: three units, odd shapes (padding), a frozen parameter, float32 ones beside the
 * compute-dtype ones, two that are expert parameters in expert cases (the table is in tests/fsdp_case.c). */
typedef struct pdef {
    const char *name;
    int ndim;
    int64_t shape[3];
    int unit;
    int compute; /* 1: the case's compute dtype, 0: float32 */
    unsigned flags;
} pdef_t;

extern const pdef_t model[NPARAMS];
size_t numel(int p);

typedef struct env {
    const char *backend;
    tcomms_comm_t *world;
    tcomms_fsdp_layout_t *layout;
    tcomms_fsdp_groups_t groups;
    int rank, size, ep, outer;
} env_t;

int env_layout(env_t *e, int ep, int outer);
void env_unlayout(env_t *e);
/* The world communicator (one per job: a root needs its own port) and a first layout. */
int env_open(env_t *e, const char *backend, int rank, int size, int ep, int outer);
void env_close(env_t *e);

typedef struct scen {
    const char *label;
    tcomms_fsdp_strategy_t strategy;
    tcomms_fsdp_outer_t outer;
    tcomms_dtype_t cd;
    int mb, expert, prefetch;
    int casts; /* config.optimizer_casts: the test's optimizer writes the weights, install_weights does not cast */
    tcomms_dtype_t rd; /* config.reduce_dtype; 0: the main dtype (float32). The gradients are small integers, exact
                          in bfloat16 and summed exactly there, so want_grad holds for either */
} scen_t;

tcomms_dtype_t dtype_of(const scen_t *s, int p);

/* A failing call counts one failure in `fails`, naming `what`, and jumps to `out`. */
#define CALL(x)                                                                                                       \
    do {                                                                                                              \
        tcomms_status_t st_ = (x);                                                                                    \
        if (st_ != TCOMMS_SUCCESS) {                                                                                  \
            fails += mrank_failf("FAIL %s: %s returned %d: %s", what, #x, st_, tcomms_last_error());                \
            goto out;                                                                                                 \
        }                                                                                                             \
    } while (0)

/* A runtime for `s` (over `base`'s configuration when given), its parameters registered and finalized; NULL with
 * *fails counted on failure. */
tcomms_fsdp_t *make(const env_t *e, const scen_t *s, const tcomms_fsdp_config_t *base, const char *what, int *fails);
/* When set, make() calls it on each runtime it has finalized (test_fsdp_lanes swaps the runtime's ops there). */
extern void (*case_made)(tcomms_fsdp_t *f, const scen_t *s);
/* load_param of every parameter with init_value. */
int load_all(tcomms_fsdp_t *f, const char *what);
/* One step: s->mb microbatches, gradients added on every unit but `skip` (-1: none). */
int run_step(tcomms_fsdp_t *f, const env_t *e, const scen_t *s, int skip, const char *what);
/* Weights, read-back, gradients and pieces over three steps, against loop-computed references. */
int run_case(const env_t *e, const scen_t *s);

typedef struct job {
    int backend;
    char log_base[128];
    volatile int *counter; /* shared, for mrank_host_barrier */
} job_t;

/* `fn` on `nranks` ranks of mrank_backend(backend); a Check assertion on the ranks that failed. */
void run_job(mrank_fn_t fn, int nranks, int backend);

#endif
