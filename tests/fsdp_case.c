/* SPDX-License-Identifier: BSD-3-Clause */
/* The FSDP runtime tests' shared part (tests/fsdp_case.h): model, environment, the step a training loop makes, and
 * the checks of one scenario's weights, read-back values, reduced gradients, pieces and installed weights against
 * values computed here by a loop over ranks and microbatches in double. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsdp_case.h"
#include "fsdp_values.h"
#include "mrank_world.h"

/* The model: three units, odd shapes so padding is exercised, a frozen parameter and a float32 one next to the
 * compute-dtype ones (separate buckets), and two parameters that are expert parameters in expert cases. */

const pdef_t model[] = {
    {"u0.w", 2, {13, 17}, 0, 1, 0},
    {"u0.b", 1, {5}, 0, 1, 0},
    {"u1.w", 3, {3, 1, 7}, 1, 1, 0},
    {"u1.frozen", 1, {5}, 1, 1, TCOMMS_FSDP_PARAM_NO_GRAD},
    {"u1.norm", 1, {13}, 1, 0, 0},
    {"u2.w", 2, {13, 17}, 2, 1, 0},
    {"u2.expert", 3, {3, 1, 7}, 2, 1, TCOMMS_FSDP_PARAM_EXPERT},
    {"u2.expert_b", 1, {5}, 2, 0, TCOMMS_FSDP_PARAM_EXPERT},
};

size_t numel(int p)
{
    size_t n = 1;
    for (int d = 0; d < model[p].ndim; d++)
        n *= (size_t)model[p].shape[d];
    return n;
}

/* ---- one rank's environment: world, layout, communicators -------------------------------------------------- */

int env_layout(env_t *e, int ep, int outer)
{
    e->ep = ep;
    e->outer = outer;
    tcomms_fsdp_layout_params_t lp = {0};
    lp.dp = e->size;
    lp.ep = ep;
    lp.outer_dp = outer;
    if (tcomms_fsdp_layout_create(&lp, &e->layout) != TCOMMS_SUCCESS ||
        tcomms_fsdp_groups_create(e->world, e->layout, &e->groups) != TCOMMS_SUCCESS)
        return mrank_failf("FAIL rank %d: layout/groups (dp %d ep %d outer %d): %s", e->rank, e->size, ep, outer,
                           tcomms_last_error());
    return 0;
}

void env_unlayout(env_t *e)
{
    tcomms_fsdp_groups_destroy(&e->groups);
    tcomms_fsdp_layout_free(e->layout);
    e->layout = NULL;
}

/* The world communicator (one per job: a root needs its own port) and a first layout. */
int env_open(env_t *e, const char *backend, int rank, int size, int ep, int outer)
{
    memset(e, 0, sizeof(*e));
    e->backend = backend;
    e->rank = rank;
    e->size = size;
    if ((e->world = mrank_world(backend, OP_TIMEOUT_MS, rank)) == NULL)
        return 1;
    return env_layout(e, ep, outer);
}

void env_close(env_t *e)
{
    env_unlayout(e);
    tcomms_comm_destroy(e->world);
}

/* ---- one runtime case -------------------------------------------------------------------------------------- */

static int is_expert(const scen_t *s, int p)
{
    return s->expert && (model[p].flags & TCOMMS_FSDP_PARAM_EXPERT);
}

tcomms_dtype_t dtype_of(const scen_t *s, int p)
{
    return model[p].compute ? s->cd : TCOMMS_FLOAT32;
}

/* Ranks the main params of `p` are sharded over: the shard group, times inter under hybrid sharding. */
static int main_ranks(const env_t *e, const scen_t *s, int p)
{
    int group = is_expert(s, p) ? e->size / e->ep : e->size;
    if (s->strategy == TCOMMS_FSDP_NO_SHARD)
        return 1;
    return s->outer == TCOMMS_FSDP_OUTER_REPLICATE ? group / e->outer : group;
}

/* The reduced gradient of element i of p: the sum over the ranks of its data-parallel group (every rank for dense
 * parameters; the ranks of the same expert-parallel index for expert ones) and over microbatches, scaled; zero
 * when p's unit is `skip` (no backward this step). */
static double want_grad(const env_t *e, const scen_t *s, int p, size_t i, int skip)
{
    double sum = 0;
    if (model[p].unit == skip)
        return 0;
    for (int r = 0; r < e->size; r++) {
        if (is_expert(s, p) && r % e->ep != e->rank % e->ep)
            continue;
        for (int m = 0; m < s->mb; m++)
            sum += grad_value(r, m, p, i);
    }
    return sum * SCALE;
}

/* Inside pre_forward of every unit, param_data equals value() cast to the parameter's dtype. */
static int check_weights(tcomms_fsdp_t *f, const scen_t *s, double (*value)(int, size_t), const char *what)
{
    int fails = 0;
    for (int u = 0; u < NUNITS; u++) {
        CALL(tcomms_fsdp_pre_forward(f, u));
        for (int p = 0; p < NPARAMS; p++) {
            void *d = NULL;
            if (model[p].unit != u)
                continue;
            CALL(tcomms_fsdp_param_data(f, p, &d));
            for (size_t i = 0; i < numel(p) && fails < 5; i++) {
                double got = get(d, dtype_of(s, p), i), want = as_dtype(value(p, i), dtype_of(s, p));
                if (got != want)
                    fails += mrank_failf("FAIL %s: weights of %s[%zu] = %g, expected %g", what, model[p].name, i,
                                         got, want);
            }
        }
        CALL(tcomms_fsdp_post_forward(f, u));
    }
out:
    return fails;
}

static int check_read(tcomms_fsdp_t *f, double (*value)(int, size_t), const char *what)
{
    int fails = 0;
    float buf[13 * 17];
    for (int p = 0; p < NPARAMS; p++) {
        CALL(tcomms_fsdp_read_param(f, p, buf));
        for (size_t i = 0; i < numel(p) && fails < 5; i++)
            if ((double)buf[i] != (double)(float)value(p, i))
                fails += mrank_failf("FAIL %s: read_param %s[%zu] = %g, expected %g", what, model[p].name, i,
                                     (double)buf[i], value(p, i));
    }
out:
    return fails;
}

/* Pieces: each parameter's ranges, summed over all ranks, cover it world/S times; elements of a piece that no
 * parameter covers (padding) are zero in main params and gradients. */
static int check_pieces(tcomms_fsdp_t *f, const env_t *e, const scen_t *s, const char *what)
{
    int fails = 0, n = 0;
    int64_t cover[NPARAMS] = {0};
    CALL(tcomms_fsdp_shard_count(f, &n));
    for (int i = 0; i < n; i++) {
        tcomms_fsdp_shard_t sh;
        CALL(tcomms_fsdp_shard(f, i, &sh));
        char *mark = calloc(sh.count + 1, 1);
        for (int p = 0; p < NPARAMS; p++) {
            int si;
            size_t so, po, cnt;
            CALL(tcomms_fsdp_param_range(f, p, &si, &so, &po, &cnt));
            cover[p] = (int64_t)cnt;
            if (si == i && cnt)
                memset(mark + so, 1, cnt);
        }
        for (size_t j = 0; j < sh.count && fails < 5; j++)
            if (!mark[j] && (get(sh.main, sh.dtype, j) != 0 || (sh.grad && get(sh.grad, sh.dtype, j) != 0)))
                fails += mrank_failf("FAIL %s: padding element %zu of piece %d is not zero", what, j, i);
        free(mark);
    }
    CALL(tcomms_all_reduce(e->world, cover, cover, NPARAMS, TCOMMS_INT64, TCOMMS_SUM, NULL, NULL));
    for (int p = 0; p < NPARAMS; p++)
        if (cover[p] != (int64_t)numel(p) * (e->size / main_ranks(e, s, p)))
            fails += mrank_failf("FAIL %s: ranges of %s cover %lld elements over all ranks, expected %zu x %d", what,
                                 model[p].name, (long long)cover[p], numel(p), e->size / main_ranks(e, s, p));
out:
    return fails;
}

/* One step: mb microbatches, each rank adding rank- and microbatch-dependent gradients. With `skip` >= 0, that unit
 * has no backward at all, and the pieces are synced one by one, last first (sync_shard), not by finish_grad_sync. */
int run_step(tcomms_fsdp_t *f, const env_t *e, const scen_t *s, int skip, const char *what)
{
    int fails = 0;
    CALL(tcomms_fsdp_zero_grad(f));
    for (int m = 0; m < s->mb; m++) {
        for (int u = 0; u < NUNITS; u++) {
            CALL(tcomms_fsdp_pre_forward(f, u));
            CALL(tcomms_fsdp_post_forward(f, u));
        }
        CALL(tcomms_fsdp_root_pre_backward(f, m == s->mb - 1));
        for (int u = NUNITS - 1; u >= 0; u--) {
            if (u == skip)
                continue;
            CALL(tcomms_fsdp_pre_backward(f, u));
            for (int p = 0; p < NPARAMS; p++) {
                void *g = NULL;
                tcomms_dtype_t gd = s->rd ? s->rd : TCOMMS_FLOAT32;
                if (model[p].unit != u || (model[p].flags & TCOMMS_FSDP_PARAM_NO_GRAD))
                    continue;
                CALL(tcomms_fsdp_grad_data(f, p, &g));
                for (size_t i = 0; i < numel(p); i++)
                    put_as(g, gd, i, get(g, gd, i) + grad_value(e->rank, m, p, i));
            }
            CALL(tcomms_fsdp_post_backward(f, u));
        }
        CALL(tcomms_fsdp_root_post_backward(f));
    }
    if (skip < 0)
        CALL(tcomms_fsdp_finish_grad_sync(f));
    int n = 0;
    CALL(tcomms_fsdp_shard_count(f, &n));
    for (int i = n - 1; skip >= 0 && i >= 0; i--)
        CALL(tcomms_fsdp_sync_shard(f, i));
out:
    return fails;
}

static int check_grads(tcomms_fsdp_t *f, const env_t *e, const scen_t *s, int skip, const char *what)
{
    int fails = 0;
    for (int p = 0; p < NPARAMS; p++) {
        int si;
        size_t so, po, cnt;
        tcomms_fsdp_shard_t sh;
        CALL(tcomms_fsdp_param_range(f, p, &si, &so, &po, &cnt));
        CALL(tcomms_fsdp_shard(f, si, &sh));
        if (model[p].flags & TCOMMS_FSDP_PARAM_NO_GRAD) {
            if (sh.grad != NULL)
                fails += mrank_failf("FAIL %s: the piece of frozen %s has a gradient", what, model[p].name);
            continue;
        }
        for (size_t j = 0; j < cnt && fails < 5; j++) {
            double got = get(sh.grad, sh.dtype, so + j), want = want_grad(e, s, p, po + j, skip);
            if (got != want)
                fails += mrank_failf("FAIL %s: gradient of %s[%zu] = %g, expected %g", what, model[p].name, po + j,
                                     got, want);
        }
    }
out:
    return fails;
}

/* The optimizer's part: set this rank's pieces of main params to new_value (and under optimizer_casts their
 * weights to its cast), then install them. */
static int install(tcomms_fsdp_t *f, const scen_t *s, const char *what)
{
    int fails = 0;
    for (int p = 0; p < NPARAMS; p++) {
        int si;
        size_t so, po, cnt;
        tcomms_fsdp_shard_t sh;
        CALL(tcomms_fsdp_param_range(f, p, &si, &so, &po, &cnt));
        CALL(tcomms_fsdp_shard(f, si, &sh));
        for (size_t j = 0; j < cnt; j++)
            ((float *)sh.main)[so + j] = (float)new_value(p, po + j);
        if (sh.weights_dtype != dtype_of(s, p))
            fails += mrank_failf("FAIL %s: the piece of %s has weights in %s, not %s", what, model[p].name,
                                 tcomms_dtype_name(sh.weights_dtype), tcomms_dtype_name(dtype_of(s, p)));
        for (size_t j = 0; s->casts && j < cnt; j++)
            put_as(sh.weights, sh.weights_dtype, so + j, new_value(p, po + j));
    }
    CALL(tcomms_fsdp_install_weights(f));
out:
    return fails;
}

void (*case_made)(tcomms_fsdp_t *f, const scen_t *s);

tcomms_fsdp_t *make(const env_t *e, const scen_t *s, const tcomms_fsdp_config_t *base, const char *what,
                           int *fails)
{
    tcomms_fsdp_config_t c = base ? *base : (tcomms_fsdp_config_t){0};
    c.strategy = s->strategy;
    c.outer = s->outer;
    c.prefetch_forward = c.prefetch_backward = s->prefetch;
    c.optimizer_casts = s->casts;
    c.reduce_dtype = s->rd;
    c.grad_scale = SCALE;
    if (c.timeout_ms == 0)
        c.timeout_ms = OP_TIMEOUT_MS;
    tcomms_fsdp_t *f = NULL;
    CALL(tcomms_fsdp_create(&e->groups, &c, &f));
    for (int p = 0; p < NPARAMS; p++) {
        int id = -1;
        unsigned flags = model[p].flags & (s->expert ? ~0u : ~(unsigned)TCOMMS_FSDP_PARAM_EXPERT);
        CALL(tcomms_fsdp_register_param(f, model[p].name, model[p].shape, model[p].ndim, dtype_of(s, p),
                                        model[p].unit, flags, &id));
        if (id != p)
            *fails += mrank_failf("FAIL %s: parameter %d got id %d", what, p, id);
    }
    CALL(tcomms_fsdp_finalize(f, e->layout));
    if (case_made != NULL)
        case_made(f, s);
    return f;
out:
    *fails += 1;
    tcomms_fsdp_destroy(f);
    return NULL;
}

int load_all(tcomms_fsdp_t *f, const char *what)
{
    int fails = 0;
    for (int p = 0; p < NPARAMS; p++) {
        float v[13 * 17];
        for (size_t i = 0; i < numel(p); i++)
            v[i] = (float)init_value(p, i);
        CALL(tcomms_fsdp_load_param(f, p, v));
    }
out:
    return fails;
}

int run_case(const env_t *e, const scen_t *s)
{
    char what[200];
    snprintf(what, sizeof(what), "%s rank %d/%d, %s %s mb %d%s%s%s", e->backend, e->rank, e->size, s->label,
             tcomms_dtype_name(s->cd), s->mb, s->casts ? " optimizer_casts" : "", s->rd ? " reduce " : "",
             s->rd ? tcomms_dtype_name(s->rd) : "");
    int fails = 0;
    tcomms_fsdp_t *f = make(e, s, NULL, what, &fails);
    if (f == NULL)
        return fails;
    fails += load_all(f, what);
    fails += check_weights(f, s, init_value, what);
    fails += check_read(f, init_value, what);
    fails += run_step(f, e, s, -1, what);
    fails += check_grads(f, e, s, -1, what);
    fails += check_pieces(f, e, s, what);
    fails += install(f, s, what);
    fails += check_weights(f, s, new_value, what);
    fails += check_read(f, new_value, what);
    /* A second step on the installed weights: gradients start again from zero. In a third, unit 1 has no backward:
     * its gradients are zero, not the second step's (zero_grad may leave a shard to be overwritten). */
    fails += run_step(f, e, s, -1, what);
    fails += check_grads(f, e, s, -1, what);
    fails += run_step(f, e, s, 1, what);
    fails += check_grads(f, e, s, 1, what);
    CALL(tcomms_fsdp_check_issued(f));
out:
    tcomms_fsdp_destroy(f);
    return fails;
}

void run_job(mrank_fn_t fn, int nranks, int backend)
{
    job_t j = {backend, "", mrank_shared_alloc(sizeof(int))};
    ck_assert_ptr_nonnull((void *)j.counter);
    snprintf(j.log_base, sizeof(j.log_base), "/tmp/tcomms_fsdp_rt_log.%d", (int)getpid());
    int failing = mrank_run(nranks, fn, &j, JOB_S);
    mrank_shared_free((void *)j.counter, sizeof(int));
    ck_assert_msg(failing == 0, "%d of %d ranks failed on %s", failing, nranks, mrank_backend(backend));
}
