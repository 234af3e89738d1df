/* SPDX-License-Identifier: BSD-3-Clause */
/* The call check (TCOMMS_CHECK_CALLS=1) on every CPU backend, 3 ranks. Agreeing calls of every collective pass
 * with correct results (against sums computed here by loops) and leave no store keys behind, and point-to-point
 * calls are left alone (a ring of receives posted before the sends still completes). A disagreement (count,
 * dtype, op, root, which collective, v-counts, all_to_all_v's send/receive pairs) is TCOMMS_ERR_MISMATCH on every
 * rank, with a message naming what differs, and posts nothing: the next call works. A rank that never comes makes
 * the others return TCOMMS_ERR_TIMEOUT naming it. Links the core's internals to count the store's keys. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tcomms/tcomms.h>

#include "comm.h"
#include "mrank.h"

#define NRANKS 3
#define N 1000
#define TIMEOUT_MS 20000u
#define MISSING_TIMEOUT_MS 1500u /* the call a rank never makes */
#define SLACK_S 4.0              /* verdict margin (2 s) and scheduling */
#define JOB_S 60

typedef struct shared {
    int backend;
    volatile int barrier;
} shared_t;

/* A mismatch: rank `odd` calls differently from the others; every rank must fail with a message holding both
 * `says` strings. */
typedef enum { COUNT, DTYPE, OP, ROOT, WHICH, AGV_COUNTS, A2AV_PAIRS } twist_t;
static const struct mismatch {
    const char *what;
    twist_t twist;
    int odd;
    const char *says[2];
} mismatches[] = {
    {"all_reduce count", COUNT, 2, {"count 1000", "rank 2 tcomms_all_reduce on cpu (count 2000"}},
    {"all_reduce dtype", DTYPE, 1, {"float32", "rank 1 tcomms_all_reduce on cpu (count 1000, float64"}},
    {"all_reduce op", OP, 2, {"sum", "rank 2 tcomms_all_reduce on cpu (count 1000, float32, max"}},
    {"broadcast root", ROOT, 1, {"root 0", "root 1"}},
    {"another collective", WHICH, 2, {"rank 0 called tcomms_all_reduce", "rank 2 tcomms_all_gather"}},
    {"all_gather_v recvcounts", AGV_COUNTS, 1, {"recvcounts[2] is 3 on rank 0", "4 on rank 1"}},
    {"all_to_all_v pairs", A2AV_PAIRS, 1, {"rank 1 sends 5 elements to rank 2", "which expects 2 from it"}},
};
#define NMISMATCHES ((int)(sizeof(mismatches) / sizeof(mismatches[0])))

static float *in, *out;

/* rank r contributes (r + 1) * (i + 1): the sum over ranks, computed by a loop. */
static int check_sum(const float *got, size_t n, int size, const char *what, int rank)
{
    for (size_t i = 0; i < n; i++) {
        double want = 0;
        for (int r = 0; r < size; r++)
            want += (double)(r + 1) * (double)(i + 1);
        if ((double)got[i] != want)
            return mrank_failf("FAIL rank %d, %s: element %zu is %g, expected %g", rank, what, i, got[i], want);
    }
    return 0;
}

static int all_reduce_ok(tcomms_comm_t *comm, int rank, int size, const char *after)
{
    for (size_t i = 0; i < N; i++)
        in[i] = (float)((rank + 1) * (i + 1));
    tcomms_status_t st = tcomms_all_reduce(comm, in, out, N, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL);
    if (st != TCOMMS_SUCCESS)
        return mrank_failf("FAIL rank %d: all_reduce after %s: %s", rank, after, tcomms_last_error());
    return check_sum(out, N, size, after, rank);
}

static int expect(tcomms_status_t st, tcomms_status_t want, int rank, const char *what)
{
    if (st == want)
        return 0;
    return mrank_failf("FAIL rank %d, %s: status %d (%s), expected %d", rank, what, st, tcomms_last_error(), want);
}

/* Every collective, agreeing; the v-variants and all_reduce checked against loops; then a ring of p2p messages
 * with every receive posted before any send. */
static int agree(tcomms_comm_t *comm, int rank, int size)
{
    int fails = all_reduce_ok(comm, rank, size, "all_reduce, agreeing");
    size_t counts[NRANKS], a2a_s[NRANKS], a2a_r[NRANKS], total = 0;
    for (int r = 0; r < size; r++) {
        counts[r] = (size_t)r + 1;
        a2a_s[r] = (size_t)(rank + r + 1); /* rank i sends i + j + 1 to rank j: symmetric */
        a2a_r[r] = (size_t)(r + rank + 1);
        total += counts[r];
    }
    for (size_t i = 0; i < counts[rank]; i++)
        in[i] = (float)(100 * rank + (int)i);
    fails += expect(tcomms_all_gather_v(comm, in, out, counts, NULL, TCOMMS_FLOAT32, NULL, NULL), TCOMMS_SUCCESS,
                    rank, "all_gather_v");
    for (int r = 0, at = 0; r < size; r++)
        for (size_t i = 0; i < counts[r]; i++, at++)
            if (out[at] != (float)(100 * r + (int)i))
                fails += mrank_failf("FAIL rank %d, all_gather_v: element %d is %g", rank, at, out[at]);
    size_t soff = 0;
    for (int j = 0; j < size; j++)
        for (size_t i = 0; i < a2a_s[j]; i++)
            in[soff++] = (float)(1000 * rank + 10 * j + (int)i);
    fails += expect(tcomms_all_to_all_v(comm, in, a2a_s, NULL, out, a2a_r, NULL, TCOMMS_FLOAT32, NULL, NULL),
                    TCOMMS_SUCCESS, rank, "all_to_all_v");
    size_t roff = 0;
    for (int j = 0; j < size; j++)
        for (size_t i = 0; i < a2a_r[j]; i++, roff++)
            if (out[roff] != (float)(1000 * j + 10 * rank + (int)i))
                fails += mrank_failf("FAIL rank %d, all_to_all_v: element %zu is %g", rank, roff, out[roff]);
    fails += expect(tcomms_broadcast(comm, out, N, TCOMMS_FLOAT32, 1, NULL, NULL), TCOMMS_SUCCESS, rank, "bcast");
    fails += expect(tcomms_reduce(comm, in, out, N, TCOMMS_FLOAT32, TCOMMS_MAX, 2, NULL, NULL), TCOMMS_SUCCESS, rank,
                    "reduce");
    fails += expect(tcomms_all_gather(comm, in, out, N, TCOMMS_FLOAT32, NULL, NULL), TCOMMS_SUCCESS, rank,
                    "all_gather");
    fails += expect(tcomms_reduce_scatter(comm, in, out, N, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL),
                    TCOMMS_SUCCESS, rank, "reduce_scatter");
    fails += expect(tcomms_reduce_scatter_v(comm, in, out, counts, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL),
                    TCOMMS_SUCCESS, rank, "reduce_scatter_v");
    fails += expect(tcomms_all_to_all(comm, in, out, N, TCOMMS_FLOAT32, NULL, NULL), TCOMMS_SUCCESS, rank,
                    "all_to_all");
    fails += expect(tcomms_gather(comm, in, out, N, TCOMMS_FLOAT32, 0, NULL, NULL), TCOMMS_SUCCESS, rank, "gather");
    fails += expect(tcomms_scatter(comm, in, out, N, TCOMMS_FLOAT32, 1, NULL, NULL), TCOMMS_SUCCESS, rank, "scatter");
    fails += expect(tcomms_barrier(comm, NULL, NULL), TCOMMS_SUCCESS, rank, "barrier");
    /* receives first: a check that made a receive wait for its sender would deadlock here */
    tcomms_work_t *rw = NULL, *sw = NULL;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    in[0] = (float)rank;
    out[0] = -1;
    fails += expect(tcomms_recv(comm, out, 1, TCOMMS_FLOAT32, prev, NULL, &rw), TCOMMS_SUCCESS, rank, "irecv");
    fails += expect(tcomms_send(comm, in, 1, TCOMMS_FLOAT32, next, NULL, &sw), TCOMMS_SUCCESS, rank, "isend");
    fails += expect(rw ? tcomms_work_wait(rw, 0) : TCOMMS_ERR_INVALID_ARG, TCOMMS_SUCCESS, rank, "irecv wait");
    fails += expect(sw ? tcomms_work_wait(sw, 0) : TCOMMS_ERR_INVALID_ARG, TCOMMS_SUCCESS, rank, "isend wait");
    tcomms_work_free(rw);
    tcomms_work_free(sw);
    if (out[0] != (float)prev)
        fails += mrank_failf("FAIL rank %d, ring: got %g from rank %d", rank, out[0], prev);
    /* one pair, the third rank elsewhere: no collective-style agreement over p2p calls */
    if (rank == 0)
        fails += expect(tcomms_send(comm, in, 1, TCOMMS_FLOAT32, 1, NULL, NULL), TCOMMS_SUCCESS, rank, "send");
    else if (rank == 1)
        fails += expect(tcomms_recv(comm, out, 1, TCOMMS_FLOAT32, 0, NULL, NULL), TCOMMS_SUCCESS, rank, "recv");
    return fails;
}

static tcomms_status_t twisted(tcomms_comm_t *comm, const struct mismatch *m, int rank, int size)
{
    int odd = rank == m->odd;
    size_t counts[NRANKS], s[NRANKS], r[NRANKS];
    for (int i = 0; i < size; i++) {
        counts[i] = odd && i == 2 ? 4 : (size_t)i + 1;
        s[i] = r[i] = 2;
    }
    if (odd)
        s[2] = 5; /* rank 1 sends 5 to rank 2, which expects 2 */
    switch (m->twist) {
    case COUNT: return tcomms_all_reduce(comm, in, out, odd ? 2 * N : N, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL);
    case DTYPE:
        return tcomms_all_reduce(comm, in, out, N, odd ? TCOMMS_FLOAT64 : TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL);
    case OP: return tcomms_all_reduce(comm, in, out, N, TCOMMS_FLOAT32, odd ? TCOMMS_MAX : TCOMMS_SUM, NULL, NULL);
    case ROOT: return tcomms_broadcast(comm, out, N, TCOMMS_FLOAT32, odd ? 1 : 0, NULL, NULL);
    case WHICH:
        return odd ? tcomms_all_gather(comm, in, out, N, TCOMMS_FLOAT32, NULL, NULL)
                   : tcomms_all_reduce(comm, in, out, N, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL);
    case AGV_COUNTS: return tcomms_all_gather_v(comm, in, out, counts, NULL, TCOMMS_FLOAT32, NULL, NULL);
    default: return tcomms_all_to_all_v(comm, in, s, NULL, out, r, NULL, TCOMMS_FLOAT32, NULL, NULL);
    }
}

static int check_rank(int rank, int size, void *arg)
{
    shared_t *sh = arg;
    setenv("TCOMMS_CHECK_CALLS", "1", 1);
    tcomms_comm_params_t p = {0};
    p.field_mask = TCOMMS_COMM_PARAM_BACKEND | TCOMMS_COMM_PARAM_TIMEOUT;
    p.backend = mrank_backend(sh->backend);
    p.timeout_ms = TIMEOUT_MS;
    tcomms_comm_t *comm = NULL;
    if (tcomms_comm_create(&p, &comm) != TCOMMS_SUCCESS)
        return mrank_failf("FAIL rank %d, %s: tcomms_comm_create: %s", rank, p.backend, tcomms_last_error());
    int fails = 0, round = 0;
    /* The last rank out of a call deletes its keys: after the first round, the count must not grow. */
    int64_t keys[2] = {0, 0};
    for (int rep = 0; rep < 4; rep++) {
        fails += agree(comm, rank, size);
        if (rep % 3 != 0)
            continue;
        if (mrank_host_barrier(&sh->barrier, size, ++round, 30) != 0)
            fails += mrank_failf("FAIL rank %d: host barrier", rank);
        if (rank == 0 && tc_store_num_keys(comm->store->store, &keys[rep / 3]) != TCOMMS_SUCCESS)
            fails += mrank_failf("FAIL rank 0: counting the store's keys: %s", tcomms_last_error());
        if (mrank_host_barrier(&sh->barrier, size, ++round, 30) != 0) /* no rank starts the next call before */
            fails += mrank_failf("FAIL rank %d: host barrier", rank);
    }
    if (keys[1] != keys[0])
        fails += mrank_failf("FAIL rank 0, %s: the store holds %lld keys after four rounds of checked calls, %lld "
                             "after the first", p.backend, (long long)keys[1], (long long)keys[0]);
    for (int i = 0; i < NMISMATCHES; i++) {
        const struct mismatch *m = &mismatches[i];
        tcomms_status_t st = twisted(comm, m, rank, size);
        const char *msg = tcomms_last_error();
        if (st != TCOMMS_ERR_MISMATCH || !strstr(msg, m->says[0]) || !strstr(msg, m->says[1]))
            fails += mrank_failf("FAIL rank %d, %s, %s: status %d (\"%s\"), expected TCOMMS_ERR_MISMATCH saying "
                                 "\"%s\" and \"%s\"", rank, p.backend, m->what, st, msg, m->says[0], m->says[1]);
        fails += all_reduce_ok(comm, rank, size, m->what);
    }
    /* rank 2 never makes this call */
    if (rank != 2) {
        tcomms_op_opts_t o = {.field_mask = TCOMMS_OP_OPT_TIMEOUT, .timeout_ms = MISSING_TIMEOUT_MS};
        double t0 = mrank_now();
        tcomms_status_t st = tcomms_all_reduce(comm, in, out, N, TCOMMS_FLOAT32, TCOMMS_SUM, &o, NULL);
        double took = mrank_now() - t0;
        if (st != TCOMMS_ERR_TIMEOUT || !strstr(tcomms_last_error(), "rank 2 did not reach"))
            fails += mrank_failf("FAIL rank %d, %s, a missing rank: status %d (\"%s\"), expected TCOMMS_ERR_TIMEOUT "
                                 "naming rank 2", rank, p.backend, st, tcomms_last_error());
        if (took > MISSING_TIMEOUT_MS / 1000.0 + SLACK_S)
            fails += mrank_failf("FAIL rank %d, %s, a missing rank: took %.1f s", rank, p.backend, took);
    }
    if (mrank_host_barrier(&sh->barrier, size, ++round, 30) != 0)
        fails += mrank_failf("FAIL rank %d: host barrier", rank);
    tcomms_comm_destroy(comm);
    return fails;
}

START_TEST(check_calls)
{
    shared_t *sh = mrank_shared_alloc(sizeof *sh);
    ck_assert_ptr_nonnull(sh);
    sh->backend = _i;
    int failing = mrank_run(NRANKS, check_rank, sh, JOB_S);
    mrank_shared_free(sh, sizeof *sh);
    ck_assert_msg(failing == 0, "%s: %d rank(s) failed or died (see stderr)", mrank_backend(_i), failing);
}
END_TEST

/* A malformed TCOMMS_CHECK_CALLS fails creation with its name, before any rendezvous. */
START_TEST(bad_env)
{
    setenv("TCOMMS_CHECK_CALLS", "yes please", 1);
    tcomms_comm_t *comm = NULL;
    tcomms_status_t st = tcomms_comm_create(NULL, &comm);
    unsetenv("TCOMMS_CHECK_CALLS");
    ck_assert_int_eq(st, TCOMMS_ERR_BAD_ENV);
    ck_assert_ptr_nonnull(strstr(tcomms_last_error(), "TCOMMS_CHECK_CALLS"));
    ck_assert_ptr_null(comm);
}
END_TEST

static void add_tests(Suite *s, int nbackends)
{
    TCase *tc = mrank_tcase(s, "check", JOB_S + 10);
    tcase_add_test(tc, bad_env);
    if (nbackends > 0)
        tcase_add_loop_test(tc, check_calls, 0, nbackends);
    else
        printf("test_call_check: TCOMMS_TEST_BACKENDS is empty: the multi-rank cases are skipped\n");
}

int main(void)
{
    in = calloc((size_t)NRANKS * 2 * N, sizeof(double));
    out = calloc((size_t)NRANKS * 2 * N, sizeof(double));
    if (in == NULL || out == NULL) {
        printf("test_call_check: out of memory\n");
        return 1;
    }
    int rc = mrank_main("call_check", MRANK_ANY, add_tests);
    free(in);
    free(out);
    return rc;
}
