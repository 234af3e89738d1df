/* SPDX-License-Identifier: BSD-3-Clause */
/* tcomms_comm_shrink on every CPU backend of TCOMMS_TEST_BACKENDS: (a) a rank SIGKILLs itself in the middle of a
 * stream of all_reduces, the survivors get their error, shrink without it and go on with collectives whose results
 * are checked against a loop over the survivors' values (twice over: a shrink of the shrunk communicator); (b) a
 * healthy parent leaves a rank out while that rank calls nothing; (c) survivors whose lists differ get
 * TCOMMS_ERR_MISMATCH, every one of them; (d) refused arguments, then a shrink that excludes nobody; (e) the store's
 * host (rank 0) dies: the survivors' shrink fails within a bound instead of hanging. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <tcomms/tcomms.h>

#include "mrank.h"
#include "mrank_world.h"

#define OP_TIMEOUT_MS 3000u
#define SLACK_S 10.0 /* a survivor's error or a dead store's answer may come this long after the timeout */
#define COUNT 1000   /* elements of the checked all_reduce: past the small-message algorithms */
#define STREAM 200   /* all_reduces a survivor posts at most while waiting for its error */

typedef struct shrink_case {
    char backend[32];
} shrink_case_t;

/* Sum over the survivors `members` (parent ranks, n of them) of element i of what parent rank r contributes. */
static double contribution(int r, int i)
{
    return (double)((r + 1) * 1000 + i % 97);
}

/* all_reduce, broadcast and all_gather on `comm`, whose ranks are the parent ranks `members` in order; this rank is
 * parent rank `me`. Returns the failures. */
static int check_colls(tcomms_comm_t *comm, const int *members, int n, int me, const char *what)
{
    int rank = -1, size = -1, fails = 0, expect = -1;
    for (int i = 0; i < n; i++)
        if (members[i] == me)
            expect = i;
    tcomms_comm_rank(comm, &rank);
    tcomms_comm_size(comm, &size);
    if (rank != expect || size != n)
        return mrank_failf("FAIL parent rank %d: %s: rank %d of %d, expected %d of %d", me, what, rank, size, expect,
                           n);
    static double buf[COUNT], want;
    for (int i = 0; i < COUNT; i++)
        buf[i] = contribution(me, i);
    tcomms_status_t st = tcomms_all_reduce(comm, buf, buf, COUNT, TCOMMS_FLOAT64, TCOMMS_SUM, NULL, NULL);
    if (st != TCOMMS_SUCCESS)
        return mrank_failf("FAIL parent rank %d: %s: all_reduce: %d (%s)", me, what, st, tcomms_last_error());
    for (int i = 0; i < COUNT && fails < 3; i++) {
        want = 0;
        for (int k = 0; k < n; k++)
            want += contribution(members[k], i);
        if (buf[i] != want)
            fails += mrank_failf("FAIL parent rank %d: %s: all_reduce[%d] = %g, expected %g", me, what, i, buf[i],
                                 want);
    }
    int32_t token = rank == n - 1 ? 7000 + members[n - 1] : -1;
    st = tcomms_broadcast(comm, &token, 1, TCOMMS_INT32, n - 1, NULL, NULL);
    if (st != TCOMMS_SUCCESS || token != 7000 + members[n - 1])
        fails += mrank_failf("FAIL parent rank %d: %s: broadcast from the last rank: %d, got %d (%s)", me, what, st,
                             (int)token, tcomms_last_error());
    int32_t mine = me, all[64];
    st = tcomms_all_gather(comm, &mine, all, 1, TCOMMS_INT32, NULL, NULL);
    for (int k = 0; k < n && st == TCOMMS_SUCCESS; k++)
        if (all[k] != members[k]) {
            fails += mrank_failf("FAIL parent rank %d: %s: all_gather[%d] = %d, expected parent rank %d", me, what, k,
                                 (int)all[k], members[k]);
            break;
        }
    if (st != TCOMMS_SUCCESS)
        fails += mrank_failf("FAIL parent rank %d: %s: all_gather: %d (%s)", me, what, st, tcomms_last_error());
    return fails;
}

/* Run `fn` on `nranks` ranks over backend _i of TCOMMS_TEST_BACKENDS; ranks in `killed` must die by SIGKILL. */
static void run_case(mrank_fn_t fn, int i, int nranks, int base_s, unsigned killed)
{
    shrink_case_t sc;
    snprintf(sc.backend, sizeof sc.backend, "%s", mrank_backend(i));
    int failing = mrank_run_ex(nranks, fn, &sc, mrank_job_timeout(base_s, nranks), killed);
    ck_assert_msg(failing == 0, "%s: %d rank(s) failed (see stderr)", sc.backend, failing);
}

/* ---- (a) a rank dies mid-stream ---------------------------------------------------------------------------------- */

#define DYING 2

static int death_rank(int rank, int size, void *arg)
{
    const shrink_case_t *sc = arg;
    tcomms_comm_t *world = mrank_world(sc->backend, OP_TIMEOUT_MS, rank);
    if (world == NULL)
        return 1;
    int fails = 0;
    int32_t one = 1, sum = 0;
    tcomms_status_t st = TCOMMS_SUCCESS;
    int done = 0;
    for (; done < STREAM && st == TCOMMS_SUCCESS; done++) {
        if (rank == DYING && done == 5)
            raise(SIGKILL);
        st = tcomms_all_reduce(world, &one, &sum, 1, TCOMMS_INT32, TCOMMS_SUM, NULL, NULL);
        if (st == TCOMMS_SUCCESS && sum != size)
            return mrank_failf("FAIL rank %d: all_reduce %d before the death: sum %d of %d", rank, done, (int)sum,
                               size);
    }
    if (st == TCOMMS_SUCCESS)
        return mrank_failf("FAIL rank %d: %d all_reduces succeeded after rank %d died", rank, STREAM, DYING);
    mrank_logf("rank %d: all_reduce %d after rank %d died: %d (%s)\n", rank, done, DYING, st, tcomms_last_error());

    int exclude[] = {DYING}, members[8], n = 0;
    for (int r = 0; r < size; r++)
        if (r != DYING)
            members[n++] = r;
    tcomms_comm_t *child = NULL;
    double t0 = mrank_now();
    st = tcomms_comm_shrink(world, exclude, 1, "survivors", NULL, &child);
    if (st != TCOMMS_SUCCESS || child == NULL) {
        tcomms_comm_destroy(world);
        return mrank_failf("FAIL rank %d: tcomms_comm_shrink without rank %d: %d (%s)", rank, DYING, st,
                           tcomms_last_error());
    }
    mrank_logf("rank %d: shrink took %.2f s\n", rank, mrank_now() - t0);
    fails += check_colls(child, members, n, rank, "after the shrink");
    /* The parent stays failed. */
    st = tcomms_all_reduce(world, &one, &sum, 1, TCOMMS_INT32, TCOMMS_SUM, NULL, NULL);
    if (st != TCOMMS_ERR_ABORTED)
        fails += mrank_failf("FAIL rank %d: the failed parent's all_reduce after the shrink: %d, expected %d", rank,
                             st, TCOMMS_ERR_ABORTED);
    const char *msg = tcomms_last_error(), *first = strstr(msg, "TCOMMS_ERR_");
    if (first == NULL || strstr(first + 1, "TCOMMS_ERR_") != NULL) /* the first error's status, named once */
        fails += mrank_failf("FAIL rank %d: the failed parent's message names %s status: %s", rank,
                             first ? "more than one" : "no", msg);
    mrank_logf("rank %d: the failed parent after the shrink: %s\n", rank, msg);
    /* A shrink of the shrunk communicator leaves out its rank 0: the lowest survivor judging is not rank 0. */
    if (rank != members[0]) {
        int first = 0;
        tcomms_comm_t *grandchild = NULL;
        st = tcomms_comm_shrink(child, &first, 1, NULL, NULL, &grandchild);
        if (st != TCOMMS_SUCCESS)
            fails += mrank_failf("FAIL rank %d: shrinking the survivors without their rank 0: %d (%s)", rank, st,
                                 tcomms_last_error());
        else
            fails += check_colls(grandchild, members + 1, n - 1, rank, "after the second shrink");
        tcomms_comm_destroy(grandchild);
    }
    tcomms_comm_destroy(child);
    tcomms_comm_destroy(world);
    return fails;
}

START_TEST(survivors_shrink_and_go_on)
{
    run_case(death_rank, _i, 4, 90, 1u << DYING);
}
END_TEST

/* ---- (b) a healthy parent leaves a rank out; (c) lists that differ -------------------------------------------- */

static int leave_out_rank(int rank, int size, void *arg)
{
    const shrink_case_t *sc = arg;
    tcomms_comm_t *world = mrank_world(sc->backend, OP_TIMEOUT_MS, rank);
    if (world == NULL)
        return 1;
    int fails = 0, last = size - 1;
    if (rank != last) {
        int members[8], n = 0;
        for (int r = 0; r < last; r++)
            members[n++] = r;
        tcomms_comm_t *child = NULL;
        tcomms_status_t st = tcomms_comm_shrink(world, &last, 1, NULL, NULL, &child);
        if (st != TCOMMS_SUCCESS)
            fails += mrank_failf("FAIL rank %d: shrink leaving out the idle rank %d: %d (%s)", rank, last, st,
                                 tcomms_last_error());
        else
            fails += check_colls(child, members, n, rank, "healthy parent");
        tcomms_comm_destroy(child);
    }
    /* The parent still works for everyone afterwards, and its ranks (the excluded one too) still split it
     * together: shrinks are numbered apart from splits. */
    int32_t one = 1, sum = 0;
    tcomms_status_t st = tcomms_all_reduce(world, &one, &sum, 1, TCOMMS_INT32, TCOMMS_SUM, NULL, NULL);
    if (st != TCOMMS_SUCCESS || sum != size)
        fails += mrank_failf("FAIL rank %d: the parent's all_reduce after the shrink: %d, sum %d (%s)", rank, st,
                             (int)sum, tcomms_last_error());
    int all[8];
    for (int r = 0; r < size; r++)
        all[r] = r;
    tcomms_comm_t *copy = NULL;
    st = tcomms_comm_split(world, all, size, "after-shrink", NULL, &copy);
    if (st != TCOMMS_SUCCESS)
        fails += mrank_failf("FAIL rank %d: splitting the parent after the shrink: %d (%s)", rank, st,
                             tcomms_last_error());
    else
        fails += check_colls(copy, all, size, rank, "split after the shrink");
    tcomms_comm_destroy(copy);
    tcomms_comm_destroy(world);
    return fails;
}

START_TEST(healthy_parent_leaves_a_rank_out)
{
    run_case(leave_out_rank, _i, 4, 60, 0);
}
END_TEST

static int mismatch_rank(int rank, int size, void *arg)
{
    const shrink_case_t *sc = arg;
    tcomms_comm_t *world = mrank_world(sc->backend, OP_TIMEOUT_MS, rank);
    if (world == NULL)
        return 1;
    int fails = 0;
    /* Rounds: a survivor of another list must not delete the verdict its judge's voters still wait for. */
    for (int round = 0; round < 10 && fails == 0 && rank != 3; round++) {
        /* Ranks 0 and 1 leave out rank 3; rank 2 also rank 1. */
        int mine[] = {1, 3}, theirs[] = {3};
        tcomms_comm_t *child = NULL;
        tcomms_status_t st = rank == 2 ? tcomms_comm_shrink(world, mine, 2, NULL, NULL, &child)
                                       : tcomms_comm_shrink(world, theirs, 1, NULL, NULL, &child);
        if (st != TCOMMS_ERR_MISMATCH || child != NULL)
            fails += mrank_failf("FAIL rank %d: shrink with differing lists: %d, expected %d (%s)", rank, st,
                                 TCOMMS_ERR_MISMATCH, tcomms_last_error());
        else if (strstr(tcomms_last_error(), "disagree") == NULL)
            fails += mrank_failf("FAIL rank %d: the mismatch message says nothing of the lists: %s", rank,
                                 tcomms_last_error());
        tcomms_comm_destroy(child);
    }
    (void)size;
    tcomms_comm_destroy(world);
    return fails;
}

START_TEST(differing_lists_are_a_mismatch_everywhere)
{
    run_case(mismatch_rank, _i, 4, 60, 0);
}
END_TEST

/* ---- (d) refused arguments -------------------------------------------------------------------------------------- */

static int refused_rank(int rank, int size, void *arg)
{
    const shrink_case_t *sc = arg;
    tcomms_comm_t *world = mrank_world(sc->backend, OP_TIMEOUT_MS, rank);
    if (world == NULL)
        return 1;
    int fails = 0, self = rank, out_of_range = size, twice[] = {(rank + 1) % size, (rank + 1) % size};
    tcomms_comm_t *child = NULL;
    struct {
        const char *what;
        const int *exclude;
        int n;
        tcomms_comm_t **out;
    } bad[] = {
        {"the caller", &self, 1, &child},      {"a rank out of range", &out_of_range, 1, &child},
        {"a rank twice", twice, 2, &child},     {"NULL exclude", NULL, 1, &child},
        {"a negative count", &self, -1, &child}, {"NULL out", NULL, 0, NULL},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        tcomms_status_t st = tcomms_comm_shrink(world, bad[i].exclude, bad[i].n, NULL, NULL, bad[i].out);
        if (st != TCOMMS_ERR_INVALID_ARG || child != NULL)
            fails += mrank_failf("FAIL rank %d: shrink excluding %s: %d, expected %d (%s)", rank, bad[i].what, st,
                                 TCOMMS_ERR_INVALID_ARG, tcomms_last_error());
    }
    /* Every rank refused each call alike, so the next call pairs up: nobody excluded, a copy of the parent. */
    int members[8];
    for (int r = 0; r < size; r++)
        members[r] = r;
    tcomms_status_t st = tcomms_comm_shrink(world, NULL, 0, "copy", NULL, &child);
    if (st != TCOMMS_SUCCESS)
        fails += mrank_failf("FAIL rank %d: shrink excluding nobody: %d (%s)", rank, st, tcomms_last_error());
    else
        fails += check_colls(child, members, size, rank, "nobody excluded");
    tcomms_comm_destroy(child);
    tcomms_comm_destroy(world);
    return fails;
}

START_TEST(refused_arguments)
{
    run_case(refused_rank, _i, 3, 60, 0);
}
END_TEST

/* ---- (e) the store's host dies ----------------------------------------------------------------------------------- */

static int store_host_rank(int rank, int size, void *arg)
{
    const shrink_case_t *sc = arg;
    tcomms_comm_t *world = mrank_world(sc->backend, OP_TIMEOUT_MS, rank);
    if (world == NULL)
        return 1;
    int32_t one = 1, sum = 0;
    tcomms_status_t st = tcomms_all_reduce(world, &one, &sum, 1, TCOMMS_INT32, TCOMMS_SUM, NULL, NULL);
    if (st != TCOMMS_SUCCESS || sum != size)
        return mrank_failf("FAIL rank %d: first all_reduce: %d, sum %d", rank, st, (int)sum);
    if (rank == 0)
        raise(SIGKILL);
    int fails = 0, zero = 0;
    (void)tcomms_all_reduce(world, &one, &sum, 1, TCOMMS_INT32, TCOMMS_SUM, NULL, NULL);
    tcomms_comm_t *child = NULL;
    double t0 = mrank_now();
    st = tcomms_comm_shrink(world, &zero, 1, NULL, NULL, &child);
    double took = mrank_now() - t0;
    mrank_logf("rank %d: shrink without the store's host: %d after %.2f s (%s)\n", rank, st, took,
               tcomms_last_error());
    if (st == TCOMMS_SUCCESS || child != NULL)
        fails += mrank_failf("FAIL rank %d: a shrink without the store's host succeeded", rank);
    else if (st == TCOMMS_ERR_REMOTE && strstr(tcomms_last_error(), "TCOMMS_COMM_PARAM_STORE") == NULL)
        fails += mrank_failf("FAIL rank %d: the message does not say what to do: %s", rank, tcomms_last_error());
    if (took > OP_TIMEOUT_MS / 1000.0 + SLACK_S)
        fails += mrank_failf("FAIL rank %d: the shrink took %.1f s to fail", rank, took);
    tcomms_comm_destroy(child);
    tcomms_comm_destroy(world);
    return fails;
}

START_TEST(store_host_dies)
{
    run_case(store_host_rank, _i, 3, 90, 1u << 0);
}
END_TEST

static void add_tests(Suite *s, int n)
{
    TCase *tc = mrank_tcase(s, "mrank", 180);
    tcase_add_loop_test(tc, survivors_shrink_and_go_on, 0, n);
    tcase_add_loop_test(tc, healthy_parent_leaves_a_rank_out, 0, n);
    tcase_add_loop_test(tc, differing_lists_are_a_mismatch_everywhere, 0, n);
    tcase_add_loop_test(tc, refused_arguments, 0, n);
    tcase_add_loop_test(tc, store_host_dies, 0, n);
}

int main(void)
{
    return mrank_main("shrink", MRANK_BACKEND, add_tests);
}
