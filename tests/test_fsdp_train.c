/* SPDX-License-Identifier: BSD-3-Clause */
/* Training with the FSDP runtime against the unsharded reference (examples/fsdp_mlp): each case trains on N forked
 * ranks, which write their losses and final parameters into shared memory, and the test process compares them with
 * the reference it computes itself: bit for bit in deterministic mode, to 1e-6 relative with random floats. Also a
 * finite-difference check of the model's backward, and ranks given different orders failing instead of hanging.
 * make check runs a subset of the matrix (hand-picked cases and a regular sample of the rest); TCOMMS_FSDP_FULL=1
 * (make check-full) the whole; TCOMMS_FSDP_ONLY=text keeps the cases whose name contains text. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../examples/fsdp_mlp/train.h"
#include "mrank.h"
#include "mrank_world.h"

#define STEPS 3
#define BATCH 8
#define MAX_TOTAL 4096     /* >= mlp_total(4) */
#define CHUNK 48           /* cases per job */
#define SAMPLE_STRIDE 41   /* make check adds every 41st case of the full matrix to the hand-picked ones */
#define OP_TIMEOUT_MS 20000u
#define RTOL_RANDOM 1e-6
#define RTOL_BF16 2e-2

static const char *const ORDER_ALT = "tp-cp-ep-pp-dp";
static const char *const ORDER_TP = "tp-dp-cp-pp";

typedef struct tcase {
    int strategy, dp, mb, prefetch, outer, hybrid, ep, tp, offset;
    int check; /* run under TCOMMS_CHECK_CALLS=1: every collective compared across ranks first */
    mlp_schedule_t schedule;
    mlp_mode_t mode;
    tcomms_dtype_t dtype;
    const char *order;
} tcase_t;

/* What one rank reports for one case. */
typedef struct slot {
    int done, rc, in_layout;
    char err[512];
    double losses[STEPS];
    double params[MAX_TOTAL];
} slot_t;

/* A job: `n` cases on `nranks` ranks; slots[case * nranks + rank]. */
typedef struct job {
    int backend, nranks, n;
    const tcase_t *cases;
    slot_t *slots;
} job_t;

static int world_size(const tcase_t *c) { return c->offset + c->tp * c->dp; }

static void case_name(const tcase_t *c, char *buf, size_t len)
{
    snprintf(buf, len, "s%d dp%d mb%d pf%d%s%s ep%d tp%d order=%s off%d %s %s%s", c->strategy, c->dp, c->mb,
             c->prefetch, c->outer > 1 ? (c->hybrid ? " hybrid" : " hsdp") : "", c->outer > 1 ? "2" : "", c->ep,
             c->tp, c->order ? c->order : "default", c->offset, c->schedule == MLP_1F1B ? "1f1b" : "standard",
             c->dtype == TCOMMS_BFLOAT16 ? "bf16" : (c->mode == MLP_RANDOM ? "random" : "deterministic"),
             c->check ? " checked" : "");
}

static mlp_opts_t case_opts(const tcase_t *c)
{
    mlp_opts_t o = mlp_opts_default();
    o.steps = STEPS;
    o.batch = BATCH;
    o.microbatches = c->mb;
    o.strategy = c->strategy;
    o.prefetch = c->prefetch;
    o.outer = c->outer;
    o.hybrid = c->hybrid;
    o.ep = c->ep;
    o.tp = c->tp;
    o.dp = c->dp;
    o.offset = c->offset;
    o.order = c->order;
    o.schedule = c->schedule;
    o.mode = c->mode;
    o.dtype = c->dtype;
    o.timeout_ms = OP_TIMEOUT_MS;
    return o;
}

/* In each rank: every case of the job in turn on one world communicator. Comparison is the parent's job. */
static int job_rank(int rank, int size, void *arg)
{
    job_t *j = arg;
    if (j->cases[0].check) /* a job's cases all have the same check (test_matrix) */
        setenv("TCOMMS_CHECK_CALLS", "1", 1);
    tcomms_comm_t *world = mrank_world(mrank_backend(j->backend), OP_TIMEOUT_MS, rank);
    if (!world)
        return 1;
    for (int k = 0; k < j->n; k++) {
        slot_t *s = &j->slots[(size_t)k * (size_t)size + (size_t)rank];
        mlp_opts_t o = case_opts(&j->cases[k]);
        mlp_result_t res = {.losses = s->losses, .params = s->params};
        s->rc = mlp_train_fsdp(world, &o, &res);
        s->in_layout = res.in_layout;
        memcpy(s->err, res.err, sizeof s->err);
        s->done = 1;
    }
    tcomms_comm_destroy(world);
    return 0;
}

/* Relative closeness for the tolerance modes; values are O(0.1) or more, so tiny ones are compared against 0.1. */
static int close_enough(double got, double want, double rtol)
{
    return fabs(got - want) <= rtol * fmax(fabs(want), 0.1);
}

/* Compare one rank's results with the reference; returns the number of failures, printing the first few. */
static int compare_rank(const tcase_t *c, const char *name, int rank, const slot_t *s, const mlp_result_t *ref,
                        int *expert_seen)
{
    if (!s->done)
        return mrank_failf("FAIL %s rank %d: did not finish", name, rank);
    if (s->rc != 0)
        return mrank_failf("FAIL %s rank %d: %s", name, rank, s->err);
    if (s->in_layout != (rank >= c->offset))
        return mrank_failf("FAIL %s rank %d: in_layout %d", name, rank, s->in_layout);
    if (!s->in_layout)
        return 0;
    int exact = c->mode == MLP_DETERMINISTIC;
    double rtol = c->dtype == TCOMMS_BFLOAT16 ? RTOL_BF16 : RTOL_RANDOM;
    int fails = 0;
    for (int i = 0; i < STEPS; i++) {
        int ok = exact ? memcmp(&s->losses[i], &ref->losses[i], sizeof(double)) == 0
                       : close_enough(s->losses[i], ref->losses[i], rtol);
        if (!ok && fails++ < 3)
            mrank_logf("FAIL %s rank %d: step %d loss %.17g, reference %.17g", name, rank, i, s->losses[i],
                       ref->losses[i]);
    }
    int E = 2 * c->ep;
    for (int g = 0; g < mlp_nparams(E); g++) {
        mlp_param_t p;
        mlp_param(E, g, &p);
        const double *got = s->params + p.offset, *want = ref->params + p.offset;
        if (p.expert >= 0 && isnan(got[0]))
            continue; /* another ep rank's expert */
        if (p.expert >= 0)
            expert_seen[p.expert] = 1;
        for (size_t k = 0; k < p.numel; k++) {
            int ok = exact ? memcmp(&got[k], &want[k], sizeof(double)) == 0 : close_enough(got[k], want[k], rtol);
            if (!ok && fails++ < 3)
                mrank_logf("FAIL %s rank %d: unit %d expert %d %s[%zu] = %.17g, reference %.17g", name, rank,
                           p.unit, p.expert, p.bias ? "b" : "W", k, got[k], want[k]);
        }
    }
    return fails;
}

static int compare_case(const tcase_t *c, int nranks, const slot_t *slots)
{
    char name[200];
    case_name(c, name, sizeof name);
    static double losses[STEPS], params[MAX_TOTAL];
    mlp_opts_t o = case_opts(c);
    mlp_result_t ref = {.losses = losses, .params = params};
    if (mlp_train_reference(&o, &ref) != 0)
        return mrank_failf("FAIL %s: reference: %s", name, ref.err);
    int expert_seen[MLP_MAX_DIM] = {0}, fails = 0;
    for (int r = 0; r < nranks; r++)
        fails += compare_rank(c, name, r, &slots[r], &ref, expert_seen) != 0;
    for (int e = 0; e < 2 * c->ep && !fails; e++)
        if (!expert_seen[e])
            fails += mrank_failf("FAIL %s: no rank read expert %d", name, e);
    return fails;
}

/* Run cases[0..n) (all of one world size) in one job; returns failing cases. */
static int run_job(int backend, const tcase_t *cases, int n)
{
    int nranks = world_size(&cases[0]);
    size_t len = sizeof(slot_t) * (size_t)n * (size_t)nranks;
    job_t *j = mrank_shared_alloc(sizeof *j);
    slot_t *slots = mrank_shared_alloc(len);
    ck_assert_ptr_nonnull(j);
    ck_assert_ptr_nonnull(slots);
    *j = (job_t){.backend = backend, .nranks = nranks, .n = n, .cases = cases, .slots = slots};
    int failing = mrank_run(nranks, job_rank, j, 60 + 10 * n);
    int fails = failing ? mrank_failf("FAIL %s: %d rank(s) of a %d-rank job failed", mrank_backend(backend), failing,
                                      nranks)
                        : 0;
    for (int k = 0; k < n; k++)
        fails += compare_case(&cases[k], nranks, slots + (size_t)k * (size_t)nranks) != 0;
    mrank_shared_free(slots, len);
    mrank_shared_free(j, sizeof *j);
    return fails;
}

/* ---- the matrix ----------------------------------------------------------------------------------------------- */

static tcase_t base(int strategy, int dp, int mb, int prefetch, mlp_schedule_t schedule)
{
    return (tcase_t){.strategy = strategy, .dp = dp, .mb = mb, .prefetch = prefetch, .outer = 1, .ep = 1, .tp = 1,
                     .schedule = schedule, .mode = MLP_DETERMINISTIC};
}

/* The representative subset make check runs. */
static int subset(tcase_t *out)
{
    int n = 0;
    for (int s = 0; s < 4; s++)
        for (int dp = 1; dp <= 4; dp++)
            out[n++] = base(s, dp, (s + dp) % 2 ? 3 : 1, (s + dp) % 3, dp % 2 ? MLP_STANDARD : MLP_1F1B);
    tcase_t c = base(1, 4, 3, 0, MLP_STANDARD); /* HSDP 2x2, and hybrid sharding */
    c.outer = 2;
    out[n++] = c;
    c.strategy = 3, c.schedule = MLP_1F1B, c.prefetch = 1;
    out[n++] = c;
    c.hybrid = 1;
    out[n++] = c;
    c.strategy = 2, c.schedule = MLP_STANDARD, c.mb = 1;
    out[n++] = c;
    c = base(3, 2, 3, 1, MLP_1F1B); /* experts */
    c.ep = 2;
    out[n++] = c;
    c = base(2, 4, 1, 2, MLP_STANDARD);
    c.ep = 2;
    out[n++] = c;
    c.order = ORDER_ALT, c.strategy = 3, c.mb = 3; /* a non-default order, with experts */
    out[n++] = c;
    c = base(3, 2, 3, 1, MLP_1F1B);
    c.order = ORDER_TP, c.tp = 2;
    out[n++] = c;
    c = base(3, 3, 3, 2, MLP_STANDARD); /* an offset */
    c.offset = 1;
    out[n++] = c;
    c = base(1, 2, 1, 0, MLP_1F1B);
    c.offset = 1, c.order = ORDER_ALT, c.ep = 2;
    out[n++] = c;
    c = base(3, 3, 3, 1, MLP_1F1B); /* random floats, bf16 */
    c.mode = MLP_RANDOM;
    out[n++] = c;
    c = base(0, 2, 3, 0, MLP_STANDARD);
    c.mode = MLP_RANDOM;
    out[n++] = c;
    c = base(3, 2, 3, 1, MLP_STANDARD);
    c.mode = MLP_RANDOM, c.dtype = TCOMMS_BFLOAT16;
    out[n++] = c;
    c = base(3, 4, 3, 2, MLP_1F1B); /* under the call check: HSDP hybrid, then experts with an offset */
    c.outer = 2, c.hybrid = 1, c.check = 1;
    out[n++] = c;
    c = base(2, 2, 3, 2, MLP_1F1B);
    c.ep = 2, c.offset = 1, c.order = ORDER_ALT, c.check = 1;
    out[n++] = c;
    return n;
}

/* The whole matrix: order x offset x strategy x dp x {plain, ep 2, HSDP, hybrid} x microbatches x prefetch x
 * schedule, deterministic; then random and bf16 over strategy x dp. `out` may be NULL to count. */
static int full(tcase_t *out)
{
    const char *orders[3] = {NULL, ORDER_ALT, ORDER_TP};
    int n = 0;
    for (int oi = 0; oi < 3; oi++)
        for (int off = 0; off < 2; off++)
            for (int s = 0; s < 4; s++)
                for (int dp = 1; dp <= 4; dp++)
                    for (int topo = 0; topo < 4; topo++) {
                        if ((topo == 1 && (dp % 2 || oi == 2)) || (topo >= 2 && dp != 4) || (topo == 3 && s < 2))
                            continue;
                        for (int mb = 1; mb <= 3; mb += 2)
                            for (int pf = 0; pf < 3; pf++)
                                for (int sch = 0; sch < 2; sch++) {
                                    tcase_t c = base(s, dp, mb, pf, (mlp_schedule_t)sch);
                                    c.order = orders[oi], c.offset = off, c.tp = oi == 2 ? 2 : 1;
                                    c.ep = topo == 1 ? 2 : 1;
                                    c.outer = topo >= 2 ? 2 : 1;
                                    c.hybrid = topo == 3;
                                    if (out)
                                        out[n] = c;
                                    n++;
                                }
                    }
    for (int s = 0; s < 4; s++)
        for (int dp = 1; dp <= 4; dp++)
            for (int bf = 0; bf < 2; bf++) {
                tcase_t c = base(s, dp, 3, 1, dp % 2 ? MLP_STANDARD : MLP_1F1B);
                c.mode = MLP_RANDOM;
                c.dtype = bf ? TCOMMS_BFLOAT16 : TCOMMS_INT8;
                if (out)
                    out[n] = c;
                n++;
            }
    return n;
}

static int by_world_size(const void *a, const void *b)
{
    const tcase_t *x = a, *y = b;
    return world_size(x) != world_size(y) ? world_size(x) - world_size(y) : x->check - y->check;
}

START_TEST(test_matrix)
{
    const char *env = getenv("TCOMMS_FSDP_FULL"), *only = getenv("TCOMMS_FSDP_ONLY");
    int is_full = env && *env && strcmp(env, "0") != 0;
    int nfull = full(NULL), total;
    tcase_t *cases = calloc((size_t)nfull + 64, sizeof *cases);
    ck_assert_ptr_nonnull(cases);
    if (is_full) {
        total = full(cases);
    } else { /* the hand-picked cases, and every SAMPLE_STRIDE-th case of the full matrix */
        total = subset(cases);
        tcase_t *all = calloc((size_t)nfull, sizeof *all);
        ck_assert_ptr_nonnull(all);
        full(all);
        for (int k = SAMPLE_STRIDE / 2; k < nfull; k += SAMPLE_STRIDE)
            cases[total++] = all[k];
        free(all);
    }
    int n = 0;
    for (int k = 0; k < total; k++) { /* the filter, stably */
        char name[200];
        case_name(&cases[k], name, sizeof name);
        if (!only || strstr(name, only))
            cases[n++] = cases[k];
    }
    qsort(cases, (size_t)n, sizeof *cases, by_world_size); /* one job per world size, check and chunk */
    double t0 = mrank_now();
    int fails = 0;
    for (int k = 0; k < n;) {
        int e = k;
        while (e < n && e - k < CHUNK && world_size(&cases[e]) == world_size(&cases[k]) &&
               cases[e].check == cases[k].check)
            e++;
        fails += run_job(_i, cases + k, e - k);
        k = e;
    }
    printf("test_fsdp_train: %s: %d %s cases in %.1f s, %d failed\n", mrank_backend(_i), n, is_full ? "full" : "subset",
           mrank_now() - t0, fails);
    fflush(stdout);
    free(cases);
    ck_assert_msg(fails == 0, "%s: %d of %d cases failed (see stderr)", mrank_backend(_i), fails, n);
}
END_TEST

/* ---- a rank with another order -------------------------------------------------------------------------------- */

/* Rank 1 moves pp in the order: the groups are the same (pp == 1) but the layout hash differs. Through the trainer
 * (mode 0) the layout reaches tcomms_fsdp_groups_create and tcomms_fsdp_finalize; in mode 1 every rank builds its
 * groups from the default layout and only tcomms_fsdp_finalize sees rank 1's. */
typedef struct mismatch {
    int backend, mode;
    slot_t slots[2];
} mismatch_t;

static int finalize_only(tcomms_comm_t *world, int rank, slot_t *s)
{
    tcomms_fsdp_layout_params_t same = {.dp = 2}, other = {.dp = 2, .order = ORDER_ALT};
    tcomms_fsdp_layout_t *la = NULL, *lb = NULL;
    tcomms_fsdp_groups_t g = {0};
    tcomms_fsdp_t *rt = NULL;
    tcomms_fsdp_config_t c = {0};
    int64_t shape[1] = {37};
    int id = -1;
    const char *call = "tcomms_fsdp_layout_create";
    tcomms_status_t st = tcomms_fsdp_layout_create(&same, &la);
    if (st == TCOMMS_SUCCESS)
        st = tcomms_fsdp_layout_create(&other, &lb);
    if (st == TCOMMS_SUCCESS && (call = "tcomms_fsdp_groups_create"))
        st = tcomms_fsdp_groups_create(world, la, &g);
    c.strategy = TCOMMS_FSDP_OPTIM_GRADS_PARAMS;
    c.timeout_ms = OP_TIMEOUT_MS;
    if (st == TCOMMS_SUCCESS && (call = "tcomms_fsdp_create"))
        st = tcomms_fsdp_create(&g, &c, &rt);
    if (st == TCOMMS_SUCCESS && (call = "tcomms_fsdp_register_param"))
        st = tcomms_fsdp_register_param(rt, "w", shape, 1, TCOMMS_FLOAT32, 0, 0, &id);
    if (st == TCOMMS_SUCCESS && (call = "tcomms_fsdp_finalize"))
        st = tcomms_fsdp_finalize(rt, rank == 1 ? lb : la);
    snprintf(s->err, sizeof s->err, "%s: %s: %s", call, tcomms_strerror(st), tcomms_last_error());
    s->rc = st;
    tcomms_fsdp_destroy(rt);
    tcomms_fsdp_groups_destroy(&g);
    tcomms_fsdp_layout_free(la);
    tcomms_fsdp_layout_free(lb);
    return 0;
}

static int mismatch_rank(int rank, int size, void *arg)
{
    mismatch_t *m = arg;
    (void)size;
    tcomms_comm_t *world = mrank_world(mrank_backend(m->backend), OP_TIMEOUT_MS, rank);
    if (!world)
        return 1;
    slot_t *s = &m->slots[rank];
    if (m->mode == 0) {
        tcase_t c = base(3, 2, 1, 0, MLP_STANDARD);
        c.order = rank == 1 ? ORDER_ALT : NULL;
        mlp_opts_t o = case_opts(&c);
        mlp_result_t res = {.losses = s->losses, .params = s->params};
        s->rc = mlp_train_fsdp(world, &o, &res);
        memcpy(s->err, res.err, sizeof s->err);
    } else {
        finalize_only(world, rank, s);
    }
    s->done = 1;
    tcomms_comm_destroy(world);
    return 0;
}

START_TEST(test_order_mismatch)
{
    mismatch_t *m = mrank_shared_alloc(sizeof *m);
    ck_assert_ptr_nonnull(m);
    m->backend = _i / 2;
    m->mode = _i % 2;
    const char *where = m->mode ? "tcomms_fsdp_finalize" : "tcomms_fsdp_groups_create";
    double t0 = mrank_now();
    int failing = mrank_run(2, mismatch_rank, m, 60);
    printf("test_fsdp_train: %s: mismatched orders (%s) detected in %.1f s\n", mrank_backend(m->backend), where,
           mrank_now() - t0);
    for (int r = 0; r < 2; r++) {
        const slot_t *s = &m->slots[r];
        ck_assert_msg(s->done, "%s: rank %d did not return (hang?)", mrank_backend(m->backend), r);
        ck_assert_msg(s->rc != 0, "%s: rank %d accepted mismatched orders", mrank_backend(m->backend), r);
        /* the trainer's first check may be either call; the finalize-only run must fail in finalize */
        int right_call = strstr(s->err, where) || (!m->mode && strstr(s->err, "tcomms_fsdp_finalize"));
        ck_assert_msg(right_call && strstr(s->err, "INVALID_ARG"), "%s: rank %d: expected INVALID_ARG from %s, got: %s",
                      mrank_backend(m->backend), r, where, s->err);
    }
    ck_assert_int_eq(failing, 0);
    mrank_shared_free(m, sizeof *m);
}
END_TEST

/* ---- the model's backward against finite differences ---------------------------------------------------------- */

START_TEST(test_backward_fd)
{
    mlp_opts_t o = mlp_opts_default();
    o.mode = MLP_RANDOM;
    o.ep = 2; /* 4 experts: tokens 0..7 reach each of them twice */
    int E = 2 * o.ep;
    size_t total = mlp_total(E);
    double *theta = calloc(total, sizeof(double)), *grad = calloc(total, sizeof(double));
    double *scratch = calloc(total, sizeof(double));
    ck_assert(theta && grad && scratch);
    for (int g = 0; g < mlp_nparams(E); g++) {
        mlp_param_t p;
        mlp_param(E, g, &p);
        mlp_init_param(11, MLP_RANDOM, E, g, theta + p.offset);
    }
    const int n = 8;
    double loss = mlp_full_loss_grad(&o, theta, 1000, n, grad);
    ck_assert(isfinite(loss) && loss > 0);
    const double h = 1e-5;
    int bad = 0;
    double worst = 0.0;
    for (size_t i = 0; i < total; i++) {
        double keep = theta[i];
        theta[i] = keep + h;
        double lp = mlp_full_loss_grad(&o, theta, 1000, n, scratch);
        theta[i] = keep - h;
        double lm = mlp_full_loss_grad(&o, theta, 1000, n, scratch);
        theta[i] = keep;
        double fd = (lp - lm) / (2 * h), err = fabs(fd - grad[i]) / (1.0 + fabs(grad[i]));
        worst = fmax(worst, err);
        if (err > 1e-6 && bad++ < 5)
            fprintf(stderr, "FAIL d loss / d param[%zu]: backward %.12g, finite difference %.12g\n", i, grad[i], fd);
    }
    printf("test_fsdp_train: finite differences over %zu parameters, worst relative error %.2g\n", total, worst);
    free(theta);
    free(grad);
    free(scratch);
    ck_assert_int_eq(bad, 0);
}
END_TEST

static void add_tests(Suite *s, int nbackends)
{
    /* one process, but a finite difference per parameter: Check's 4 s default is too short under ASan on a busy
     * machine (it expired in CI once) */
    tcase_add_test(mrank_tcase(s, "model", 120), test_backward_fd);
    if (nbackends == 0) {
        printf("test_fsdp_train: TCOMMS_TEST_BACKENDS is empty: only the model's backward is checked\n");
        return;
    }
    const char *env = getenv("TCOMMS_FSDP_FULL");
    int is_full = env && *env && strcmp(env, "0") != 0;
    TCase *tc = mrank_tcase(s, "train", is_full ? 7200 : 600);
    tcase_add_loop_test(tc, test_matrix, 0, nbackends);
    tcase_add_loop_test(tc, test_order_mismatch, 0, 2 * nbackends);
}

int main(void)
{
    if (mlp_total(4) > MAX_TOTAL) {
        fprintf(stderr, "test_fsdp_train: MAX_TOTAL %d < %zu parameters\n", MAX_TOTAL, mlp_total(4));
        return EXIT_FAILURE;
    }
    return mrank_main("fsdp_train", MRANK_ANY, add_tests);
}
