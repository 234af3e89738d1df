/* SPDX-License-Identifier: BSD-3-Clause */
/* The UCX backend's pair exchange (backends/ucx/pair.c): blocking all_reduce, all_gather, reduce_scatter and
 * all_to_all on 2 ranks up to 16 KiB a message. Against the independent reference of coll_ref.h (plain loops in
 * double), on every dtype and op, in and out of place, at counts of 1, 7, the largest that takes the pair path and
 * one more (the generic path), with guards around every buffer; each case five times: both ranks blocking, each
 * rank blocking while the other posts a work handle (the generic algorithm), whose messages must match, and both
 * blocking with either rank late to every call (the other's call then waits as an ordinary task). The
 * core's trace line says which path a call took. Ranks that disagree (the dtype behind equal lengths, the count)
 * fail on both sides, also when the shorter message is already waiting as the receive is posted, and a peer that
 * never calls times the pair call out, and the communicator stays broken. A
 * child communicator's pair calls, then its destruction, leave the parent's calls on the shared worker intact. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tcomms/tcomms.h>
#include <unistd.h>

#include "coll_ref.h"
#include "mrank.h"
#include "mrank_world.h"

#define OP_TIMEOUT_MS 20000u
#define SHORT_TIMEOUT_MS 1500u
#define SLACK_S 3.0
#define JOB_S 120
#define PAIR_BYTES (16u << 10) /* pair.c: PAIR_MAX_BYTES */

enum { ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL, NTYPES };
static const char *const type_names[NTYPES] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"};

/* Which rank posts a work handle instead of blocking: none, rank 0 or rank 1; or both block and rank 0 or rank 1
 * comes LATE_MS late to every call, so that its peer's call outlasts the polls pair.c makes on its own and waits as
 * an ordinary task of the engine (tcu_pair_run). */
enum { BOTH_BLOCK, ZERO_WAITS, ONE_WAITS, ZERO_LATE, ONE_LATE, NMODES };
#define LATE_MS 1

typedef struct ctx {
    tcomms_comm_t *comm;
    int rank, mode;
} ctx_t;

static tcomms_status_t call(ctx_t *x, int type, const void *s, void *r, size_t n, tcomms_dtype_t dt, tcomms_op_t op)
{
    tcomms_work_t *w = NULL, **wp = (x->mode == ZERO_WAITS && x->rank == 0) || (x->mode == ONE_WAITS && x->rank == 1)
                                        ? &w
                                        : NULL;
    tcomms_status_t st;
    if ((x->mode == ZERO_LATE && x->rank == 0) || (x->mode == ONE_LATE && x->rank == 1))
        mrank_sleep_ms(LATE_MS);
    switch (type) {
    case ALL_REDUCE: st = tcomms_all_reduce(x->comm, s, r, n, dt, op, NULL, wp); break;
    case ALL_GATHER: st = tcomms_all_gather(x->comm, s, r, n, dt, NULL, wp); break;
    case REDUCE_SCATTER: st = tcomms_reduce_scatter(x->comm, s, r, n, dt, op, NULL, wp); break;
    default: st = tcomms_all_to_all(x->comm, s, r, n, dt, NULL, wp); break;
    }
    if (st == TCOMMS_SUCCESS && w != NULL) {
        st = tcomms_work_wait(w, 0);
        tcomms_work_free(w);
    }
    return st;
}

/* One case; 0 when the results match the reference. */
static int run_case(ctx_t *x, int type, tcomms_dtype_t dt, tcomms_op_t op, size_t n, int inplace)
{
    static char variant[64];
    snprintf(variant, sizeof variant, "mode %d", x->mode);
    int reducing = type == ALL_REDUCE || type == REDUCE_SCATTER;
    mrank_case_t c = {type_names[type], ref_dtype_name(dt), reducing ? ref_op_name(op) : NULL, variant,
                      (long long)n, inplace, -1, x->rank, 0};
    size_t sn = type == ALL_REDUCE || type == ALL_GATHER ? n : 2 * n;
    size_t rn = type == ALL_GATHER || type == ALL_TO_ALL ? 2 * n : n;
    /* in place: all_gather's input is its block of recvbuf, the others' output lies in sendbuf */
    size_t scount = inplace && type == ALL_GATHER ? 0 : sn, rcount = inplace && type != ALL_GATHER ? 0 : rn;
    ref_buf_t s, r;
    if (ref_buf_init(&s, dt, scount) != 0 || ref_buf_init(&r, dt, rcount) != 0)
        return mrank_failf("FAIL rank %d: out of memory", x->rank);
    ref_buf_t *in = type == ALL_GATHER && inplace ? &r : &s;
    size_t at = type == ALL_GATHER && inplace ? (size_t)x->rank * n : 0;
    for (size_t i = 0; i < sn; i++)
        ref_set(in, at + i, reducing ? ref_red_value(dt, x->rank, i) : ref_mov_value(x->rank, i));
    const void *sb = ref_at(in, at);
    void *rb = !inplace || type == ALL_GATHER ? r.data : type == REDUCE_SCATTER ? ref_at(&s, (size_t)x->rank * n)
                                                                                 : s.data;
    tcomms_status_t st = call(x, type, sb, rb, n, dt, op);
    int bad = 0;
    if (st != TCOMMS_SUCCESS) {
        mrank_case_status(&c, type_names[type], st, tcomms_last_error());
        bad = 1;
    } else {
        ref_buf_t *out = inplace && type != ALL_GATHER ? &s : &r;
        switch (type) {
        case ALL_REDUCE:
            for (size_t i = 0; i < n; i++)
                out->expect[i] = ref_reduce(dt, op, 2, i);
            break;
        case REDUCE_SCATTER:
            if (inplace) /* the other block of an in-place buffer may serve as scratch */
                for (size_t j = 0; j < 2 * n; j++)
                    s.expect[j] = REF_ANY;
            for (size_t i = 0; i < n; i++)
                out->expect[(inplace ? (size_t)x->rank * n : 0) + i] =
                    ref_reduce(dt, op, 2, (size_t)x->rank * n + i);
            break;
        case ALL_GATHER:
            for (int q = 0; q < 2; q++)
                for (size_t i = 0; i < n; i++)
                    r.expect[(size_t)q * n + i] = ref_mov_value(q, i);
            break;
        default:
            for (int q = 0; q < 2; q++)
                for (size_t i = 0; i < n; i++)
                    out->expect[(size_t)q * n + i] = ref_mov_value(q, (size_t)x->rank * n + i);
            break;
        }
        bad |= ref_check(&c, "sendbuf", &s);
        bad |= ref_check(&c, "recvbuf", &r);
    }
    ref_buf_free(&s);
    ref_buf_free(&r);
    return bad;
}

static int table_rank(int rank, int size, void *arg)
{
    (void)size;
    ctx_t x = {mrank_world("ucx", OP_TIMEOUT_MS, rank), rank, *(int *)arg};
    if (x.comm == NULL)
        return 1;
    int fails = 0;
    for (int type = 0; type < NTYPES && !fails; type++) {
        int reducing = type == ALL_REDUCE || type == REDUCE_SCATTER;
        for (int dt = 0; dt < (int)TCOMMS_DTYPE_COUNT && !fails; dt++) {
            size_t es = ref_esize((tcomms_dtype_t)dt);
            /* all_reduce leaves the pair path where select.c leaves recursive doubling, at 8 KiB */
            size_t most = (type == ALL_REDUCE ? (8u << 10) - 1 : PAIR_BYTES) / es;
            size_t counts[] = {1, 7, most, most + 1};
            for (int op = 0; op < (reducing ? (int)TCOMMS_OP_COUNT : 1) && !fails; op++)
                for (int k = 0; k < 4 && !fails; k++)
                    for (int inplace = 0; inplace < 2 && !fails; inplace++)
                        fails += run_case(&x, type, (tcomms_dtype_t)dt, (tcomms_op_t)op, counts[k], inplace);
        }
    }
    if (tcomms_comm_destroy(x.comm) != TCOMMS_SUCCESS)
        fails += mrank_failf("FAIL rank %d: destroy: %s", rank, tcomms_last_error());
    return fails;
}

START_TEST(matches_the_reference)
{
    int *mode = mrank_shared_alloc(sizeof *mode);
    ck_assert_ptr_nonnull(mode);
    *mode = _i;
    int failing = mrank_run(2, table_rank, mode, JOB_S);
    mrank_shared_free(mode, sizeof *mode);
    ck_assert_msg(failing == 0, "mode %d: %d rank(s) failed (see stderr)", _i, failing);
}
END_TEST

/* ---- which path: the core's trace line names the algorithm ------------------------------------------------------ */

static char *captured(FILE *f)
{
    char *text = NULL;
    long len = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (len >= 0 && (text = malloc((size_t)len + 1)) != NULL) {
        rewind(f);
        text[fread(text, 1, (size_t)len, f)] = '\0';
    }
    return text;
}

static int path_rank(int rank, int size, void *arg)
{
    (void)size;
    (void)arg;
    fflush(stderr);
    FILE *f = tmpfile();
    int saved = dup(STDERR_FILENO);
    if (f == NULL || saved < 0 || dup2(fileno(f), STDERR_FILENO) < 0)
        return mrank_failf("FAIL rank %d: cannot capture stderr", rank);
    unsetenv("TCOMMS_LOG_FILE");
    setenv("TCOMMS_CORE_LOG_LEVEL", "trace", 1);
    tcomms_comm_t *comm = mrank_world("ucx", OP_TIMEOUT_MS, rank);
    float a[4] = {1, 2, 3, 4}, b[4 * 8192];
    tcomms_work_t *w = NULL;
    int ok = comm != NULL && tcomms_all_reduce(comm, a, b, 4, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL) == 0 &&
             tcomms_all_reduce(comm, a, b, 4, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, &w) == 0 &&
             tcomms_work_wait(w, 0) == 0 && tcomms_work_free(w) == 0 &&
             tcomms_all_gather(comm, b, b + 8192, 8192, TCOMMS_FLOAT32, NULL, NULL) == 0 &&
             tcomms_all_to_all(comm, a, b, 2, TCOMMS_FLOAT32, NULL, NULL) == 0;
    if (comm != NULL)
        tcomms_comm_destroy(comm);
    unsetenv("TCOMMS_CORE_LOG_LEVEL");
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    char *text = captured(f);
    fclose(f);
    int fails = 0;
    /* the blocking 16-byte all_reduce and all_to_all by the pair path, the work handle's and the 32 KiB
     * all_gather's not */
    const char *want[] = {"all_reduce count 4 float32 op sum on cpu by ucx algorithm pair blocking",
                          "all_reduce count 4 float32 op sum on cpu by ucx algorithm recursive_doubling,",
                          "all_gather count 8192 float32 on cpu by ucx algorithm ring blocking",
                          "all_to_all count 2 float32 on cpu by ucx algorithm pair blocking"};
    if (!ok)
        fails += mrank_failf("FAIL rank %d: a call failed: %s", rank, tcomms_last_error());
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
        if (text == NULL || strstr(text, want[k]) == NULL)
            fails += mrank_failf("FAIL rank %d: no trace line with \"%s\"; stderr was:\n%s", rank, want[k],
                                 text ? text : "(none)");
    free(text);
    return fails;
}

START_TEST(takes_the_pair_path)
{
    ck_assert_int_eq(mrank_run(2, path_rank, NULL, JOB_S), 0);
}
END_TEST

/* ---- a child's pair task, left on the worker's list of running tasks between its calls, goes with the child ---- */

/* x[i] = rank + i + k on each rank; the sum is 1 + 2 (i + k). */
static int sum_of_two(tcomms_comm_t *comm, int rank, int k, int by_handle)
{
    float x[4], y[4] = {0};
    for (int i = 0; i < 4; i++)
        x[i] = (float)(rank + i + k);
    tcomms_work_t *w = NULL;
    tcomms_status_t st = tcomms_all_reduce(comm, x, y, 4, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, by_handle ? &w : NULL);
    if (st == TCOMMS_SUCCESS && w != NULL) {
        st = tcomms_work_wait(w, 0);
        tcomms_work_free(w);
    }
    for (int i = 0; st == TCOMMS_SUCCESS && i < 4; i++)
        if (y[i] != (float)(1 + 2 * (i + k)))
            return mrank_failf("FAIL rank %d: all_reduce %d: y[%d] = %g, expected %d", rank, k, i, (double)y[i],
                               1 + 2 * (i + k));
    return st == TCOMMS_SUCCESS ? 0 : mrank_failf("FAIL rank %d: all_reduce %d: %s", rank, k, tcomms_last_error());
}

static int child_rank(int rank, int size, void *arg)
{
    (void)size;
    (void)arg;
    static const int both[2] = {0, 1};
    tcomms_comm_t *world = mrank_world("ucx", SHORT_TIMEOUT_MS, rank);
    if (world == NULL)
        return 1;
    int fails = 0;
    for (int round = 0; round < 3 && fails == 0; round++) {
        tcomms_comm_t *child = NULL;
        if (tcomms_comm_split(world, both, 2, "child", NULL, &child) != TCOMMS_SUCCESS) {
            fails += mrank_failf("FAIL rank %d: split: %s", rank, tcomms_last_error());
            break;
        }
        for (int k = 0; k < 50 && fails == 0; k++)
            fails += sum_of_two(child, rank, k, 0);
        tcomms_comm_destroy(child);
        /* the parent on the same worker: its own pair task, and the generic path by handles, whose tasks go on
         * the list the child's pair task was on; deadline checks walk that list meanwhile (1.5 s timeout) */
        for (int k = 0; k < 100 && fails == 0; k++)
            fails += sum_of_two(world, rank, k, k % 2);
    }
    tcomms_comm_destroy(world);
    return fails;
}

START_TEST(a_child_takes_its_pair_task_along)
{
    ck_assert_int_eq(mrank_run(2, child_rank, NULL, JOB_S), 0);
}
END_TEST

/* ---- a shorter message already waiting ----------------------------------------------------------------------------- */

/* Rank 1 posts an all_reduce of N floats on the world by a handle (its message leaves at once), then a blocking one
 * on a child. Rank 0's blocking call on the child progresses the shared worker, which takes rank 1's world message
 * first (one FIFO, in order) and keeps it as unexpected; rank 0's all_reduce of 2N floats on the world then finds it
 * waiting when it posts its receive. UCX completes such a receive inside the posting call, and its length must
 * still be checked (message.c, tcu_recv): rank 0 fails with INVALID_ARG, never SUCCESS with half a buffer, and rank
 * 1, which gets the longer message, fails too. */
#define WAITING_N 64

static int waiting_rank(int rank, int size, void *arg)
{
    (void)size;
    (void)arg;
    static const int both[2] = {0, 1};
    tcomms_comm_t *world = mrank_world("ucx", SHORT_TIMEOUT_MS, rank), *child = NULL;
    if (world == NULL)
        return 1;
    if (tcomms_comm_split(world, both, 2, "child", NULL, &child) != TCOMMS_SUCCESS) {
        tcomms_comm_destroy(world);
        return mrank_failf("FAIL rank %d: split: %s", rank, tcomms_last_error());
    }
    float in[2 * WAITING_N], out[2 * WAITING_N], one = 1, sum = 0;
    for (int i = 0; i < 2 * WAITING_N; i++)
        in[i] = (float)i;
    int fails = 0;
    tcomms_work_t *w = NULL;
    tcomms_status_t st;
    if (rank == 1) {
        st = tcomms_all_reduce(world, in, out, WAITING_N, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, &w);
        fails += st != TCOMMS_SUCCESS ? mrank_failf("FAIL rank 1: posting: %s", tcomms_last_error()) : 0;
    }
    st = tcomms_all_reduce(child, &one, &sum, 1, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL);
    if (st != TCOMMS_SUCCESS || sum != 2)
        fails += mrank_failf("FAIL rank %d: the child's all_reduce: status %d, sum %g: %s", rank, st, (double)sum,
                             tcomms_last_error());
    if (rank == 0)
        st = tcomms_all_reduce(world, in, out, 2 * WAITING_N, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL);
    else if (w != NULL) {
        st = tcomms_work_wait(w, 0);
        tcomms_work_free(w);
    }
    if (st != TCOMMS_ERR_INVALID_ARG)
        fails += mrank_failf("FAIL rank %d: all_reduce of %d floats against %d: status %d, expected "
                             "TCOMMS_ERR_INVALID_ARG: %s", rank, rank == 0 ? 2 * WAITING_N : WAITING_N,
                             rank == 0 ? WAITING_N : 2 * WAITING_N, st, tcomms_last_error());
    else
        mrank_logf("test_ucx_pair: rank %d: %s", rank, tcomms_last_error());
    tcomms_comm_destroy(child);
    tcomms_comm_destroy(world);
    return fails;
}

START_TEST(a_shorter_message_already_waiting_fails)
{
    ck_assert_int_eq(mrank_run(2, waiting_rank, NULL, 30), 0);
}
END_TEST

/* ---- ranks that disagree, a peer that never calls ---------------------------------------------------------------- */

typedef struct bad_case {
    const char *what;
    int type;
    tcomms_dtype_t dt[2]; /* rank 0's, rank 1's */
    size_t n[2];
    int mode;
    int skip; /* rank 1 does not call at all */
} bad_case_t;

static const bad_case_t bad_cases[] = {
    {"all_reduce float32 against int32, rank 1 by a handle", ALL_REDUCE, {TCOMMS_FLOAT32, TCOMMS_INT32}, {64, 64},
     ONE_WAITS, 0},
    {"all_reduce float32 against int32, both blocking", ALL_REDUCE, {TCOMMS_FLOAT32, TCOMMS_INT32}, {64, 64},
     BOTH_BLOCK, 0},
    {"reduce_scatter 64 against 32 float32, rank 0 by a handle", REDUCE_SCATTER, {TCOMMS_FLOAT32, TCOMMS_FLOAT32},
     {64, 32}, ZERO_WAITS, 0},
    {"all_gather 16 against 64, both blocking", ALL_GATHER, {TCOMMS_FLOAT32, TCOMMS_FLOAT32}, {16, 64}, BOTH_BLOCK, 0},
    {"all_to_all 8 against 4 int64, both blocking", ALL_TO_ALL, {TCOMMS_INT64, TCOMMS_INT64}, {8, 4}, BOTH_BLOCK, 0},
    {"all_reduce, rank 1 never calls", ALL_REDUCE, {TCOMMS_FLOAT32, TCOMMS_FLOAT32}, {16, 16}, BOTH_BLOCK, 1},
};
#define NBAD ((int)(sizeof bad_cases / sizeof bad_cases[0]))

static int bad_rank(int rank, int size, void *arg)
{
    (void)size;
    const bad_case_t *b = &bad_cases[*(int *)arg];
    ctx_t x = {mrank_world("ucx", SHORT_TIMEOUT_MS, rank), rank, b->mode};
    if (x.comm == NULL)
        return 1;
    double in[256] = {0}, out[256];
    int fails = 0;
    if (rank == 1 && b->skip) {
        mrank_sleep_ms((int)SHORT_TIMEOUT_MS + 2500); /* past rank 0's timeout; then leave */
    } else {
        double t0 = mrank_now();
        tcomms_status_t st = call(&x, b->type, in, out, b->n[rank], b->dt[rank], TCOMMS_SUM);
        double took = mrank_now() - t0;
        tcomms_status_t want = b->skip ? TCOMMS_ERR_TIMEOUT : st;
        if (st == TCOMMS_SUCCESS || st != want)
            fails += mrank_failf("FAIL rank %d, %s: status %d (%s), expected %s", rank, b->what, st,
                                 tcomms_last_error(), b->skip ? "a timeout" : "an error");
        if (took > SHORT_TIMEOUT_MS / 1000.0 + SLACK_S)
            fails += mrank_failf("FAIL rank %d, %s: took %.1f s", rank, b->what, took);
        /* a failed collective breaks the communicator: the next call is refused, on the pair path too */
        float v = 1, y;
        st = tcomms_all_reduce(x.comm, &v, &y, 1, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL);
        if (st == TCOMMS_SUCCESS)
            fails += mrank_failf("FAIL rank %d, %s: the next all_reduce succeeded", rank, b->what);
        mrank_logf("test_ucx_pair: %s, rank %d: status %d after %.1f s, then %d: %s", b->what, rank, want, took, st,
                   tcomms_last_error());
    }
    tcomms_comm_destroy(x.comm);
    return fails;
}

START_TEST(disagreements_fail_both_ranks)
{
    int *which = mrank_shared_alloc(sizeof *which);
    ck_assert_ptr_nonnull(which);
    *which = _i;
    int failing = mrank_run(2, bad_rank, which, 30);
    mrank_shared_free(which, sizeof *which);
    ck_assert_msg(failing == 0, "%s: %d rank(s) failed (see stderr)", bad_cases[_i].what, failing);
}
END_TEST

static void add_tests(Suite *s, int nbackends)
{
    (void)nbackends;
    TCase *tc = mrank_tcase(s, "pair", JOB_S + 30);
    tcase_add_loop_test(tc, matches_the_reference, 0, NMODES);
    tcase_add_test(tc, takes_the_pair_path);
    tcase_add_test(tc, a_child_takes_its_pair_task_along);
    tcase_add_test(tc, a_shorter_message_already_waiting_fails);
    tcase_add_loop_test(tc, disagreements_fail_both_ranks, 0, NBAD);
}

int main(void)
{
    return mrank_main("ucx_pair", MRANK_UCX, add_tests);
}
