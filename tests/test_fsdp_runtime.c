/* The FSDP runtime (lib/fsdp/runtime.c and the files lib/fsdp/rt.h lists) on every CPU backend, 2-4 ranks: odd
 * parameter shapes in float32 and bfloat16 under every strategy, HSDP, hybrid sharding and expert groups. Weights,
 * read-back values, reduced gradients and installed weights are compared with values computed here by a loop over
 * ranks and microbatches in double; then reference counts, call-order errors, a configuration mismatch between
 * ranks at finalize, check_issued and the issue log. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tcomms/fsdp.h>
#include <unistd.h>

#include "check_run.h"
#include "fsdp_values.h"
#include "mrank.h"

#define MAX_BACKENDS 8
#define OP_TIMEOUT_MS 20000u
#define JOB_S 60
#define SCALE 0.5

static char backends[MAX_BACKENDS][32];
static int nbackends;

/* The model: three units, odd shapes so padding is exercised, a frozen parameter and a float32 one next to the
 * compute-dtype ones (separate buckets), and two parameters that are expert parameters in expert cases. */
typedef struct pdef {
    const char *name;
    int ndim;
    int64_t shape[3];
    int unit;
    int compute; /* 1: the case's compute dtype, 0: float32 */
    unsigned flags;
} pdef_t;

static const pdef_t model[] = {
    {"u0.w", 2, {13, 17}, 0, 1, 0},
    {"u0.b", 1, {5}, 0, 1, 0},
    {"u1.w", 3, {3, 1, 7}, 1, 1, 0},
    {"u1.frozen", 1, {5}, 1, 1, TCOMMS_FSDP_PARAM_NO_GRAD},
    {"u1.norm", 1, {13}, 1, 0, 0},
    {"u2.w", 2, {13, 17}, 2, 1, 0},
    {"u2.expert", 3, {3, 1, 7}, 2, 1, TCOMMS_FSDP_PARAM_EXPERT},
    {"u2.expert_b", 1, {5}, 2, 0, TCOMMS_FSDP_PARAM_EXPERT},
};
#define NPARAMS ((int)(sizeof(model) / sizeof(model[0])))
#define NUNITS 3

static size_t numel(int p)
{
    size_t n = 1;
    for (int d = 0; d < model[p].ndim; d++)
        n *= (size_t)model[p].shape[d];
    return n;
}

/* ---- one rank's environment: world, layout, communicators -------------------------------------------------- */

typedef struct env {
    const char *backend;
    tcomms_comm_t *world;
    tcomms_fsdp_layout_t *layout;
    tcomms_fsdp_groups_t groups;
    int rank, size, ep, outer;
} env_t;

static int env_layout(env_t *e, int ep, int outer)
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

static void env_unlayout(env_t *e)
{
    tcomms_fsdp_groups_destroy(&e->groups);
    tcomms_fsdp_layout_free(e->layout);
    e->layout = NULL;
}

/* The world communicator (one per job: a root needs its own port) and a first layout. */
static int env_open(env_t *e, const char *backend, int rank, int size, int ep, int outer)
{
    memset(e, 0, sizeof(*e));
    e->backend = backend;
    e->rank = rank;
    e->size = size;
    tcomms_comm_params_t p = {0};
    p.field_mask = TCOMMS_COMM_PARAM_BACKEND | TCOMMS_COMM_PARAM_TIMEOUT;
    p.backend = backend;
    p.timeout_ms = OP_TIMEOUT_MS;
    if (tcomms_comm_create(&p, &e->world) != TCOMMS_SUCCESS)
        return mrank_failf("FAIL rank %d: tcomms_comm_create(%s): %s", rank, backend, tcomms_last_error());
    return env_layout(e, ep, outer);
}

static void env_close(env_t *e)
{
    env_unlayout(e);
    tcomms_comm_destroy(e->world);
}

/* ---- one runtime case -------------------------------------------------------------------------------------- */

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

static int is_expert(const scen_t *s, int p)
{
    return s->expert && (model[p].flags & TCOMMS_FSDP_PARAM_EXPERT);
}

static tcomms_dtype_t dtype_of(const scen_t *s, int p)
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

#define CALL(x)                                                                                                       \
    do {                                                                                                              \
        tcomms_status_t st_ = (x);                                                                                    \
        if (st_ != TCOMMS_SUCCESS) {                                                                                  \
            fails += mrank_failf("FAIL %s: %s returned %d: %s", what, #x, st_, tcomms_last_error());                \
            goto out;                                                                                                 \
        }                                                                                                             \
    } while (0)

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
static int step(tcomms_fsdp_t *f, const env_t *e, const scen_t *s, int skip, const char *what)
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

static tcomms_fsdp_t *make(const env_t *e, const scen_t *s, const tcomms_fsdp_config_t *base, const char *what,
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
    return f;
out:
    *fails += 1;
    tcomms_fsdp_destroy(f);
    return NULL;
}

static int load_all(tcomms_fsdp_t *f, const char *what)
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

static int run_case(const env_t *e, const scen_t *s)
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
    fails += step(f, e, s, -1, what);
    fails += check_grads(f, e, s, -1, what);
    fails += check_pieces(f, e, s, what);
    fails += install(f, s, what);
    fails += check_weights(f, s, new_value, what);
    fails += check_read(f, new_value, what);
    /* A second step on the installed weights: gradients start again from zero. In a third, unit 1 has no backward:
     * its gradients are zero, not the second step's (zero_grad may leave a shard to be overwritten). */
    fails += step(f, e, s, -1, what);
    fails += check_grads(f, e, s, -1, what);
    fails += step(f, e, s, 1, what);
    fails += check_grads(f, e, s, 1, what);
    CALL(tcomms_fsdp_check_issued(f));
out:
    tcomms_fsdp_destroy(f);
    return fails;
}

/* ---- jobs -------------------------------------------------------------------------------------------------- */

typedef struct job {
    int backend;
    char log_base[128];
    volatile int *counter; /* shared, for mrank_host_barrier */
} job_t;

static const char *const strategy_names[] = {"NO_SHARD", "OPTIM", "OPTIM_GRADS", "OPTIM_GRADS_PARAMS"};

/* Every strategy, float32 and bfloat16, 1 and 3 microbatches, on a plain data-parallel layout; ZeRO-2/3 also
 * reducing in bfloat16. */
static int strategies_rank(int rank, int size, void *arg)
{
    const job_t *j = arg;
    env_t e;
    int fails = env_open(&e, backends[j->backend], rank, size, 1, 1);
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
    int fails = env_open(&e, backends[j->backend], rank, size, sets[0].ep, sets[0].outer);
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
    fails += step(f, e, &s, -1, what);
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
    snprintf(what, sizeof(what), "%s rank %d/%d", backends[j->backend], rank, size);
    env_t e;
    int fails = env_open(&e, backends[j->backend], rank, size, 1, 1);
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

static void run_job(mrank_fn_t fn, int nranks, int backend)
{
    job_t j = {backend, "", mrank_shared_alloc(sizeof(int))};
    ck_assert_ptr_nonnull((void *)j.counter);
    snprintf(j.log_base, sizeof(j.log_base), "/tmp/tcomms_fsdp_rt_log.%d", (int)getpid());
    int failing = mrank_run(nranks, fn, &j, JOB_S);
    mrank_shared_free((void *)j.counter, sizeof(int));
    ck_assert_msg(failing == 0, "%d of %d ranks failed on %s", failing, nranks, backends[backend]);
}

START_TEST(test_strategies)
{
    run_job(strategies_rank, 2 + _i / nbackends, _i % nbackends);
}
END_TEST

START_TEST(test_hsdp_expert)
{
    run_job(hsdp_rank, 4, _i);
}
END_TEST

START_TEST(test_misc)
{
    run_job(misc_rank, 2, _i);
}
END_TEST

int main(void)
{
    nbackends = mrank_backends(backends, MAX_BACKENDS);
    if (nbackends == 0) {
        printf("test_fsdp_runtime: TCOMMS_TEST_BACKENDS is empty: no CPU backend to test, skipping\n");
        return 77;
    }
    Suite *s = suite_create("fsdp_runtime");
    TCase *tc = tcase_create("fsdp_runtime");
    tcase_set_timeout(tc, JOB_S + 30);
    tcase_add_loop_test(tc, test_strategies, 0, 2 * nbackends);
    tcase_add_loop_test(tc, test_hsdp_expert, 0, nbackends);
    tcase_add_loop_test(tc, test_misc, 0, nbackends);
    suite_add_tcase(s, tc);
    return check_run(s);
}
