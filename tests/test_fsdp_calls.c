/* SPDX-License-Identifier: BSD-3-Clause */
/* The FSDP runtime's calls on the CPU backends, 2 ranks: reference counts and call-order errors (named, leaving the
 * runtime usable), keep_after_forward, configuration errors at create and register, a configuration mismatch
 * between ranks at finalize, check_issued and the issue log, and a failed collective making later calls ABORTED. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsdp_case.h"
#include "fsdp_values.h"

static int expect_invalid(tcomms_status_t st, const char *call, const char *needle, const char *what)
{
    if (st == TCOMMS_ERR_INVALID_ARG && (needle == NULL || strstr(tcomms_last_error(), needle) != NULL))
        return 0;
    return mrank_failf("FAIL %s: %s returned %d (%s), expected INVALID_ARG mentioning '%s'", what, call, st,
                       tcomms_last_error(), needle ? needle : "");
}
#define BAD(call, needle) (fails += expect_invalid((call), #call, (needle), what))

/* ZeRO-3 reference counts: an interleaved forward/backward keeps the weights until the last release, more units
 * than max_live_units cannot be held, and calls out of order are named errors that leave the runtime usable. */
static int refcount_case(const env_t *e, const char *what)
{
    int fails = 0;
    scen_t s = {"refcount", TCOMMS_FSDP_OPTIM_GRADS_PARAMS, TCOMMS_FSDP_OUTER_NONE, TCOMMS_FLOAT32, 1, 0, 1, 0, 0};
    tcomms_fsdp_t *f = make(e, &s, NULL, what, &fails);
    void *d = NULL;
    if (f == NULL)
        return fails;
    fails += load_all(f, what);
    BAD(tcomms_fsdp_param_data(f, 0, &d), "not gathered");
    BAD(tcomms_fsdp_post_forward(f, 1), "no forward reference");
    BAD(tcomms_fsdp_pre_backward(f, 0), "outside root_pre_backward");
    BAD(tcomms_fsdp_grad_data(f, 0, &d), "not between pre_backward");
    BAD(tcomms_fsdp_finish_grad_sync(f), "is_last");
    BAD(tcomms_fsdp_sync_shard(f, 0), "is_last");
    BAD(tcomms_fsdp_sync_shard(NULL, 0), "fsdp is NULL");
    BAD(tcomms_fsdp_pre_forward(f, NUNITS), "not a registered unit");
    BAD(tcomms_fsdp_load_param(f, -1, &d), "param_id -1");
    BAD(tcomms_fsdp_pre_forward(NULL, 0), "fsdp is NULL");
    BAD(tcomms_fsdp_root_post_backward(f), "without root_pre_backward");
    /* Without keep_after_forward the last release reshards. */
    CALL(tcomms_fsdp_pre_forward(f, 0));
    CALL(tcomms_fsdp_post_forward(f, 0));
    BAD(tcomms_fsdp_param_data(f, 0, &d), "not gathered");
    /* Interleaved: forward reference, backward reference, forward released, weights still valid. */
    CALL(tcomms_fsdp_zero_grad(f));
    CALL(tcomms_fsdp_pre_forward(f, 0));
    CALL(tcomms_fsdp_root_pre_backward(f, 1));
    CALL(tcomms_fsdp_pre_backward(f, 0));
    CALL(tcomms_fsdp_post_forward(f, 0));
    CALL(tcomms_fsdp_pre_forward(f, 1)); /* another microbatch's forward meanwhile */
    CALL(tcomms_fsdp_param_data(f, 0, &d));
    for (size_t i = 0; i < numel(0) && fails < 5; i++)
        if (((float *)d)[i] != (float)init_value(0, i))
            fails += mrank_failf("FAIL %s: unit 0 weights [%zu] changed while referenced for backward", what, i);
    /* Two buffers are referenced (units 0 and 1): a third unit cannot be gathered. */
    BAD(tcomms_fsdp_pre_forward(f, 2), "max_live_units");
    BAD(tcomms_fsdp_root_pre_backward(f, 0), "twice");
    CALL(tcomms_fsdp_post_backward(f, 0));
    BAD(tcomms_fsdp_param_data(f, 0, &d), "not gathered");
    CALL(tcomms_fsdp_post_forward(f, 1));
    CALL(tcomms_fsdp_pre_forward(f, 2));
    CALL(tcomms_fsdp_post_forward(f, 2));
    CALL(tcomms_fsdp_param_data(f, 5, &d)); /* the last forward unit stays gathered for the backward */
    CALL(tcomms_fsdp_root_post_backward(f));
    BAD(tcomms_fsdp_root_pre_backward(f, 1), "finish_grad_sync");
    CALL(tcomms_fsdp_finish_grad_sync(f));
    BAD(tcomms_fsdp_sync_shard(f, -1), "outside");
    BAD(tcomms_fsdp_root_pre_backward(f, 1), "zero_grad");
    CALL(tcomms_fsdp_pre_forward(f, 1));
    BAD(tcomms_fsdp_install_weights(f), "still holds a reference");
    CALL(tcomms_fsdp_post_forward(f, 1));
    CALL(tcomms_fsdp_install_weights(f));
    /* install_weights already gathered the first unit for the next step, with the installed values */
    CALL(tcomms_fsdp_param_data(f, 0, &d));
    for (size_t i = 0; i < numel(0) && fails < 5; i++)
        if (((float *)d)[i] != (float)init_value(0, i))
            fails += mrank_failf("FAIL %s: unit 0 weights [%zu] after install_weights are wrong", what, i);
    CALL(tcomms_fsdp_check_issued(f));
out:
    tcomms_fsdp_destroy(f);
    return fails;
}

/* keep_after_forward keeps every unit gathered after its forward (enough buffers), in a unit order of its own. */
static int keep_case(const env_t *e, const char *what)
{
    int fails = 0, order[NUNITS] = {2, 0, 1}, twice[NUNITS] = {0, 0, 1};
    scen_t s = {"keep", TCOMMS_FSDP_OPTIM_GRADS_PARAMS, TCOMMS_FSDP_OUTER_NONE, TCOMMS_BFLOAT16, 1, 0, 2, 0, 0};
    tcomms_fsdp_config_t c = {0};
    c.keep_after_forward = 1;
    c.max_live_units = NUNITS;
    tcomms_fsdp_t *f = make(e, &s, &c, what, &fails);
    if (f == NULL)
        return fails;
    fails += load_all(f, what);
    BAD(tcomms_fsdp_set_order(f, twice, NUNITS), "listed twice");
    CALL(tcomms_fsdp_set_order(f, order, NUNITS));
    for (int k = 0; k < NUNITS; k++) {
        CALL(tcomms_fsdp_pre_forward(f, order[k]));
        CALL(tcomms_fsdp_post_forward(f, order[k]));
    }
    for (int p = 0; p < NPARAMS; p++) {
        void *d = NULL;
        CALL(tcomms_fsdp_param_data(f, p, &d));
        for (size_t i = 0; i < numel(p) && fails < 5; i++)
            if (get(d, dtype_of(&s, p), i) != as_dtype(init_value(p, i), dtype_of(&s, p)))
                fails += mrank_failf("FAIL %s: kept weights of %s[%zu] are wrong", what, model[p].name, i);
    }
    CALL(tcomms_fsdp_check_issued(f));
out:
    tcomms_fsdp_destroy(f);
    return fails;
}

/* Configuration errors found locally, before any collective. */
static int config_case(const env_t *e, const char *what)
{
    int fails = 0;
    tcomms_fsdp_t *f = NULL;
    tcomms_fsdp_config_t c = {0};
    int64_t shape[1] = {5};
    c.outer = TCOMMS_FSDP_OUTER_OPTIM;
    BAD(tcomms_fsdp_create(&e->groups, &c, &f), "OUTER_OPTIM");
    c.outer = TCOMMS_FSDP_OUTER_REPLICATE;
    BAD(tcomms_fsdp_create(&e->groups, &c, &f), "dp_cp_inter is NULL");
    c = (tcomms_fsdp_config_t){0};
    c.main_dtype = TCOMMS_BFLOAT16;
    BAD(tcomms_fsdp_create(&e->groups, &c, &f), "main_dtype");
    c = (tcomms_fsdp_config_t){0};
    c.reduce_dtype = TCOMMS_INT32;
    BAD(tcomms_fsdp_create(&e->groups, &c, &f), "reduce_dtype must be");
    c.strategy = TCOMMS_FSDP_OPTIM;
    c.reduce_dtype = TCOMMS_BFLOAT16; /* ZeRO-1 accumulates full gradients in the main dtype */
    BAD(tcomms_fsdp_create(&e->groups, &c, &f), "OPTIM_GRADS or OPTIM_GRADS_PARAMS");
    c = (tcomms_fsdp_config_t){0};
    c.windows = 2;
    BAD(tcomms_fsdp_create(&e->groups, &c, &f), "config->windows 2");
    BAD(tcomms_fsdp_create(NULL, NULL, &f), "groups is NULL");
    tcomms_fsdp_groups_t g = e->groups;
    g.expt_dp = NULL;
    CALL(tcomms_fsdp_create(&g, NULL, &f));
    BAD(tcomms_fsdp_register_param(f, "e", shape, 1, TCOMMS_FLOAT32, 0, TCOMMS_FSDP_PARAM_EXPERT, NULL), "expt_dp");
    BAD(tcomms_fsdp_register_param(f, "z", shape, 1, TCOMMS_INT32, 0, 0, NULL), "dtype");
    BAD(tcomms_fsdp_register_param(f, "n", shape, 1, TCOMMS_FLOAT32, -1, 0, NULL), "unit -1");
    shape[0] = 0;
    BAD(tcomms_fsdp_register_param(f, "s", shape, 1, TCOMMS_FLOAT32, 0, 0, NULL), "shape[0]");
    BAD(tcomms_fsdp_pre_forward(f, 0), "before tcomms_fsdp_finalize");
out:
    tcomms_fsdp_destroy(f);
    return fails;
}

/* One rank registers a different shape: finalize fails on every rank, naming both hashes, without hanging. */
static int mismatch_case(const env_t *e, const char *what)
{
    int fails = 0;
    tcomms_fsdp_t *f = NULL;
    int64_t shape[2] = {13, e->rank == 1 ? 16 : 17};
    CALL(tcomms_fsdp_create(&e->groups, NULL, &f));
    CALL(tcomms_fsdp_register_param(f, "w", shape, 2, TCOMMS_FLOAT32, 0, 0, NULL));
    BAD(tcomms_fsdp_finalize(f, e->layout), "configuration differs across ranks: hash 0x");
    if (strstr(tcomms_last_error(), " seen") == NULL)
        fails += mrank_failf("FAIL %s: mismatch message lacks the hashes seen: %s", what, tcomms_last_error());
    /* config->windows decides collective registrations on a GPU: ranks that differ fail alike. */
    tcomms_fsdp_destroy(f);
    f = NULL;
    tcomms_fsdp_config_t c = {0};
    c.windows = e->rank == 1 ? -1 : 0;
    shape[1] = 17;
    CALL(tcomms_fsdp_create(&e->groups, &c, &f));
    CALL(tcomms_fsdp_register_param(f, "w", shape, 2, TCOMMS_FLOAT32, 0, 0, NULL));
    BAD(tcomms_fsdp_finalize(f, e->layout), "configuration differs across ranks");
out:
    tcomms_fsdp_destroy(f);
    return fails;
}

/* With config.log_path each rank writes one line per collective it issued. */
static int log_case(const env_t *e, const char *base, const char *what)
{
    int fails = 0;
    char path[256];
    snprintf(path, sizeof(path), "%s.%d", base, e->rank);
    unlink(path);
    scen_t s = {"log", TCOMMS_FSDP_OPTIM_GRADS_PARAMS, TCOMMS_FSDP_OUTER_NONE, TCOMMS_BFLOAT16, 3, 0, 1, 0, 0};
    tcomms_fsdp_config_t c = {0};
    c.log_path = base;
    tcomms_fsdp_t *f = make(e, &s, &c, what, &fails);
    uint64_t count = 0, hash = 0;
    if (f == NULL)
        return fails;
    fails += run_step(f, e, &s, -1, what);
    CALL(tcomms_fsdp_check_issued(f));
    CALL(tcomms_fsdp_issued(f, &count, &hash));
    tcomms_fsdp_destroy(f);
    f = NULL;
    FILE *fp = fopen(path, "r");
    long lines = 0;
    char line[512];
    while (fp && fgets(line, sizeof(line), fp))
        lines += strstr(line, "bucket") != NULL;
    if (fp)
        fclose(fp);
    unlink(path);
    /* 3 microbatches x (3 unit gathers forward + 3 backward + 4 reduce-scatters) on 2 ranks, at least. */
    if (count < 30 || (uint64_t)lines != count)
        fails += mrank_failf("FAIL %s: %ld log lines in %s, %llu collectives issued", what, lines, path,
                             (unsigned long long)count);
out:
    tcomms_fsdp_destroy(f);
    return fails;
}

/* Rank 1 joins a unit's all-gather late: rank 0's call fails (its timeout) instead of hanging, later calls answer
 * ABORTED, and destroy returns (its gather completes once rank 1 joins, so no buffer is left behind). */
static int failure_case(const env_t *e, volatile int *counter, const char *what)
{
    int fails = 0;
    scen_t s = {"failure", TCOMMS_FSDP_OPTIM_GRADS_PARAMS, TCOMMS_FSDP_OUTER_NONE, TCOMMS_FLOAT32, 1, 0, 0, 0, 0};
    tcomms_fsdp_config_t c = {0};
    c.timeout_ms = 300;
    tcomms_fsdp_t *f = make(e, &s, &c, what, &fails);
    void *d = NULL;
    if (f == NULL)
        goto out;
    if (e->rank != 0) {
        if (mrank_host_barrier(counter, e->size, 1, JOB_S) != 0)
            fails += mrank_failf("FAIL %s: host barrier", what);
        tcomms_fsdp_pre_forward(f, 0); /* completes rank 0's gather where the backend still runs it */
        goto out;
    }
    tcomms_status_t st = tcomms_fsdp_pre_forward(f, 0);
    if (st == TCOMMS_SUCCESS)
        fails += mrank_failf("FAIL %s: pre_forward succeeded without its peer", what);
    st = tcomms_fsdp_param_data(f, 0, &d);
    if (st != TCOMMS_ERR_ABORTED || strstr(tcomms_last_error(), "failed collective") == NULL)
        fails += mrank_failf("FAIL %s: after a failed collective param_data returned %d (%s), expected ABORTED", what,
                             st, tcomms_last_error());
    if (mrank_host_barrier(counter, e->size, 1, JOB_S) != 0)
        fails += mrank_failf("FAIL %s: host barrier", what);
out:
    tcomms_fsdp_destroy(f);
    return fails;
}

static int misc_rank(int rank, int size, void *arg)
{
    const job_t *j = arg;
    char what[96];
    snprintf(what, sizeof(what), "%s rank %d/%d", mrank_backend(j->backend), rank, size);
    env_t e;
    int fails = env_open(&e, mrank_backend(j->backend), rank, size, 1, 1);
    if (!fails)
        fails += refcount_case(&e, what);
    if (!fails)
        fails += keep_case(&e, what);
    if (!fails)
        fails += config_case(&e, what);
    if (!fails)
        fails += mismatch_case(&e, what);
    if (!fails)
        fails += log_case(&e, j->log_base, what);
    if (!fails)
        fails += failure_case(&e, j->counter, what);
    env_close(&e);
    return fails;
}

START_TEST(test_misc)
{
    run_job(misc_rank, 2, _i);
}
END_TEST

static void add_tests(Suite *s, int nbackends)
{
    TCase *tc = mrank_tcase(s, "fsdp_calls", JOB_S + 30);
    tcase_add_loop_test(tc, test_misc, 0, nbackends);
}

int main(void)
{
    return mrank_main("fsdp_calls", MRANK_BACKEND, add_tests);
}
