/* SPDX-License-Identifier: BSD-3-Clause */
/* The FSDP runtime (lib/fsdp/runtime.c and the files lib/fsdp/rt.h lists) on every CPU backend, 2-4 ranks: odd
 * parameter shapes in float32 and bfloat16 under every strategy, HSDP, hybrid sharding and expert groups, gradients
 * reduced in the main dtype and in bfloat16. Weights, read-back values, reduced gradients and installed weights are
 * compared with values computed by a loop over ranks and microbatches in double (tests/fsdp_case.c). Call order,
 * configuration errors and failures are in test_fsdp_calls.c. */
#include <check.h>
#include <stdio.h>

#include "fsdp_case.h"

static const char *const strategy_names[] = {"NO_SHARD", "OPTIM", "OPTIM_GRADS", "OPTIM_GRADS_PARAMS"};

/* Every strategy, float32 and bfloat16, 1 and 3 microbatches, on a plain data-parallel layout; ZeRO-2/3 also
 * reducing in bfloat16. */
static int strategies_rank(int rank, int size, void *arg)
{
    const job_t *j = arg;
    env_t e;
    int fails = env_open(&e, mrank_backend(j->backend), rank, size, 1, 1);
    for (int st = 0; st < 4 && !fails; st++)
        for (int d = 0; d < 2; d++)
            for (int mb = 1; mb <= 3; mb += 2) {
                if (size == 3 && (d == 1 || mb == 1))
                    continue; /* 3 ranks: uneven shard counts, one combination is enough */
                scen_t s = {strategy_names[st], st, TCOMMS_FSDP_OUTER_NONE, d ? TCOMMS_BFLOAT16 : TCOMMS_FLOAT32,
                            mb, 0, st == 3 ? 1 + mb / 3 : 0, d == 1 && mb == 3, 0};
                fails += run_case(&e, &s);
                s.rd = TCOMMS_BFLOAT16;
                if (st >= 2 && d == (size == 3 ? 0 : 1) && mb == 3 && !fails)
                    fails += run_case(&e, &s);
            }
    env_close(&e);
    return fails;
}

/* 4 ranks: HSDP and hybrid sharding (outer 2), expert parameters over expt_dp (ep 2), and both at once. */
static int hsdp_rank(int rank, int size, void *arg)
{
    const job_t *j = arg;
    static const scen_t hsdp[] = {
        {"HSDP OPTIM", TCOMMS_FSDP_OPTIM, TCOMMS_FSDP_OUTER_REPLICATE, TCOMMS_BFLOAT16, 3, 0, 0, 1, 0},
        {"HSDP OPTIM_GRADS", TCOMMS_FSDP_OPTIM_GRADS, TCOMMS_FSDP_OUTER_REPLICATE, TCOMMS_FLOAT32, 3, 0, 0, 0, 0},
        {"HSDP OPTIM_GRADS_PARAMS", TCOMMS_FSDP_OPTIM_GRADS_PARAMS, TCOMMS_FSDP_OUTER_REPLICATE, TCOMMS_BFLOAT16, 3,
         0, 1, 0, 0},
        {"hybrid OPTIM_GRADS", TCOMMS_FSDP_OPTIM_GRADS, TCOMMS_FSDP_OUTER_OPTIM, TCOMMS_BFLOAT16, 3, 0, 0, 0, 0},
        {"hybrid OPTIM_GRADS", TCOMMS_FSDP_OPTIM_GRADS, TCOMMS_FSDP_OUTER_OPTIM, TCOMMS_BFLOAT16, 3, 0, 0, 0,
         TCOMMS_BFLOAT16},
        {"hybrid OPTIM_GRADS_PARAMS", TCOMMS_FSDP_OPTIM_GRADS_PARAMS, TCOMMS_FSDP_OUTER_OPTIM, TCOMMS_FLOAT32, 1, 0,
         1, 1, 0},
    };
    static const scen_t expert[] = {
        {"expert NO_SHARD", TCOMMS_FSDP_NO_SHARD, TCOMMS_FSDP_OUTER_NONE, TCOMMS_FLOAT32, 3, 1, 0, 0, 0},
        {"expert OPTIM", TCOMMS_FSDP_OPTIM, TCOMMS_FSDP_OUTER_NONE, TCOMMS_BFLOAT16, 3, 1, 0, 0, 0},
        {"expert OPTIM_GRADS", TCOMMS_FSDP_OPTIM_GRADS, TCOMMS_FSDP_OUTER_NONE, TCOMMS_FLOAT32, 3, 1, 0, 0, 0},
        {"expert OPTIM_GRADS_PARAMS", TCOMMS_FSDP_OPTIM_GRADS_PARAMS, TCOMMS_FSDP_OUTER_NONE, TCOMMS_BFLOAT16, 3, 1,
         2, 0, 0},
        {"expert OPTIM_GRADS_PARAMS", TCOMMS_FSDP_OPTIM_GRADS_PARAMS, TCOMMS_FSDP_OUTER_NONE, TCOMMS_FLOAT32, 3, 1,
         1, 0, TCOMMS_BFLOAT16},
    };
    static const scen_t both[] = {
        {"expert+HSDP OPTIM_GRADS_PARAMS", TCOMMS_FSDP_OPTIM_GRADS_PARAMS, TCOMMS_FSDP_OUTER_REPLICATE,
         TCOMMS_BFLOAT16, 3, 1, 1, 0, 0},
        {"expert+hybrid OPTIM_GRADS", TCOMMS_FSDP_OPTIM_GRADS, TCOMMS_FSDP_OUTER_OPTIM, TCOMMS_FLOAT32, 3, 1, 0, 1, 0},
        {"expert+HSDP OPTIM_GRADS_PARAMS", TCOMMS_FSDP_OPTIM_GRADS_PARAMS, TCOMMS_FSDP_OUTER_REPLICATE,
         TCOMMS_BFLOAT16, 3, 1, 1, 1, TCOMMS_BFLOAT16},
    };
    static const struct { const scen_t *s; int n, ep, outer; } sets[] = {
        {hsdp, 6, 1, 2}, {expert, 5, 2, 1}, {both, 3, 2, 2}};
    env_t e;
    int fails = env_open(&e, mrank_backend(j->backend), rank, size, sets[0].ep, sets[0].outer);
    for (int k = 0; k < 3 && !fails; k++) {
        if (k > 0) {
            env_unlayout(&e);
            fails += env_layout(&e, sets[k].ep, sets[k].outer);
        }
        for (int i = 0; i < sets[k].n && !fails; i++)
            fails += run_case(&e, &sets[k].s[i]);
    }
    env_close(&e);
    return fails;
}

START_TEST(test_strategies)
{
    run_job(strategies_rank, 2 + _i / mrank_nbackends(), _i % mrank_nbackends());
}
END_TEST

START_TEST(test_hsdp_expert)
{
    run_job(hsdp_rank, 4, _i);
}
END_TEST

static void add_tests(Suite *s, int nbackends)
{
    TCase *tc = mrank_tcase(s, "fsdp_runtime", JOB_S + 30);
    tcase_add_loop_test(tc, test_strategies, 0, 2 * nbackends);
    tcase_add_loop_test(tc, test_hsdp_expert, 0, nbackends);
}

int main(void)
{
    return mrank_main("fsdp_runtime", MRANK_BACKEND, add_tests);
}
