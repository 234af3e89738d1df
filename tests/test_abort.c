/* SPDX-License-Identifier: BSD-3-Clause */
/* tcomms_comm_abort (lib/comm.c, each backend's comm_abort) and the failure state it shares with every other error
 * (lib/comm_state.c), on every CPU backend of TCOMMS_TEST_BACKENDS, on 2 ranks:
 *   (a) rank 0 waits on an operation whose peer never posts (a blocking all_reduce, a work handle's all_reduce, a
 *       receive, a work handle's broadcast from rank 0, whose send UCX cannot cancel: rank 1 never takes it, so
 *       it ends only when the endpoint closes, after the handle and the communicator are gone); a second thread
 *       aborts: the wait returns TCOMMS_ERR_ABORTED within 1 s of the abort, later calls
 *       are ABORTED naming the abort, the handle outlives the communicator, destroy works. Rank 1 posts only after
 *       the abort and must fail (not hang) within its timeout plus a margin;
 *   (b) an abort with nothing pending: every later operation and split is ABORTED at once, queries still answer;
 *   (c) an abort of a split child leaves the parent working, and an abort of the parent leaves its child working.
 * The reference for every "works" is an all_reduce whose sum is known in advance. */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <tcomms/tcomms.h>

#include "mrank.h"
#include "mrank_world.h"

#define COMM_TIMEOUT_MS 20000u /* far beyond the test's bounds: only the abort can end rank 0's wait in time */
#define PEER_TIMEOUT_MS 3000u  /* rank 1's operation after the abort */
#define PEER_SLACK_S 5.0
#define ABORT_AFTER_MS 300     /* the aborting thread starts once the wait is surely under way */
#define PROMPT_S 1.0

/* What rank 0 waits on in (a). */
enum wait_kind { WAIT_BLOCKING, WAIT_HANDLE, WAIT_RECV, WAIT_BCAST, WAIT_KINDS };
static const char *const wait_names[WAIT_KINDS] = {"blocking all_reduce", "work handle of an all_reduce",
                                                    "blocking recv", "work handle of a broadcast from rank 0"};

typedef struct abort_case {
    char backend[32];
    int kind;
    volatile int *barrier; /* shared by the ranks (mrank_shared_alloc) */
} abort_case_t;

/* An all_reduce of `rank + 1` over `size` ranks must give size * (size + 1) / 2. */
static int sum_works(tcomms_comm_t *comm, int rank, int size, const char *what)
{
    int32_t x = rank + 1, y = -1;
    tcomms_status_t st = tcomms_all_reduce(comm, &x, &y, 1, TCOMMS_INT32, TCOMMS_SUM, NULL, NULL);
    if (st != TCOMMS_SUCCESS || y != size * (size + 1) / 2)
        return mrank_failf("FAIL rank %d: %s: all_reduce returned %d with sum %d, expected %d (%s)", rank, what, st,
                           (int)y, size * (size + 1) / 2, st ? tcomms_last_error() : "");
    return 0;
}

/* A call made after the abort: TCOMMS_ERR_ABORTED at once, its message naming the abort. */
static int refused(tcomms_status_t st, int rank, const char *call)
{
    if (st != TCOMMS_ERR_ABORTED || strstr(tcomms_last_error(), "tcomms_comm_abort") == NULL)
        return mrank_failf("FAIL rank %d: %s after the abort returned %d (%s), expected TCOMMS_ERR_ABORTED naming "
                           "tcomms_comm_abort", rank, call, st, tcomms_last_error());
    return 0;
}

static int later_calls_refused(tcomms_comm_t *comm, int rank)
{
    int fails = 0;
    int32_t x = 1, y = 0;
    double t0 = mrank_now();
    fails += refused(tcomms_all_reduce(comm, &x, &y, 1, TCOMMS_INT32, TCOMMS_SUM, NULL, NULL), rank, "all_reduce");
    tcomms_work_t *w = (tcomms_work_t *)&w; /* must be reset to NULL */
    fails += refused(tcomms_barrier(comm, NULL, &w), rank, "an async barrier");
    if (w != NULL)
        fails += mrank_failf("FAIL rank %d: a refused async barrier left a handle %p", rank, (void *)w);
    fails += refused(tcomms_send(comm, &x, 1, TCOMMS_INT32, 1 - rank, NULL, NULL), rank, "send");
    if (mrank_now() - t0 > PROMPT_S)
        fails += mrank_failf("FAIL rank %d: refusing took %.2f s", rank, mrank_now() - t0);
    int r = -1;
    if (tcomms_comm_rank(comm, &r) != TCOMMS_SUCCESS || r != rank)
        fails += mrank_failf("FAIL rank %d: tcomms_comm_rank after the abort gave %d", rank, r);
    if (tcomms_comm_abort(comm) != TCOMMS_SUCCESS)
        fails += mrank_failf("FAIL rank %d: a second abort failed (%s)", rank, tcomms_last_error());
    return fails;
}

/* ---- (a) abort while another thread waits -------------------------------------------------------------------- */

/* Rank 0's wait on `kind`, with the handle (if any) left in *w for the caller to check after destroy. */
static tcomms_status_t wait_on(tcomms_comm_t *comm, int kind, int32_t *x, int32_t *y, tcomms_work_t **w)
{
    switch (kind) {
    case WAIT_BLOCKING:
        return tcomms_all_reduce(comm, x, y, 1, TCOMMS_INT32, TCOMMS_SUM, NULL, NULL);
    case WAIT_HANDLE: {
        tcomms_status_t st = tcomms_all_reduce(comm, x, y, 1, TCOMMS_INT32, TCOMMS_SUM, NULL, w);
        return st != TCOMMS_SUCCESS ? st : tcomms_work_wait(*w, 0);
    }
    case WAIT_BCAST: {
        tcomms_status_t st = tcomms_broadcast(comm, x, 1, TCOMMS_INT32, 0, NULL, w);
        return st != TCOMMS_SUCCESS ? st : tcomms_work_wait(*w, 0);
    }
    default:
        return tcomms_recv(comm, y, 1, TCOMMS_INT32, 1, NULL, NULL);
    }
}

static int stalled_rank0(tcomms_comm_t *comm, const abort_case_t *ac)
{
    int fails = 0;
    mrank_aborter_t a;
    if (mrank_abort_later(&a, comm, ABORT_AFTER_MS) != 0)
        return mrank_failf("FAIL rank 0: pthread_create");
    int32_t x = 1, y = 0;
    tcomms_work_t *w = NULL;
    tcomms_status_t st = wait_on(comm, ac->kind, &x, &y, &w);
    double back = mrank_now();
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", tcomms_last_error());
    mrank_abort_join(&a);
    const char *what = wait_names[ac->kind];
    if (a.st != TCOMMS_SUCCESS)
        fails += mrank_failf("FAIL rank 0: tcomms_comm_abort returned %d", a.st);
    if (st != TCOMMS_ERR_ABORTED)
        fails += mrank_failf("FAIL rank 0: %s returned %d (%s), expected TCOMMS_ERR_ABORTED", what, st, msg);
    if (a.at == 0 || back < a.at || back - a.at > PROMPT_S)
        fails += mrank_failf("FAIL rank 0: %s returned %.3f s after the abort (bound %.1f s)", what, back - a.at,
                             PROMPT_S);
    if (a.took > PROMPT_S)
        fails += mrank_failf("FAIL rank 0: tcomms_comm_abort itself took %.2f s", a.took);
    fails += later_calls_refused(comm, 0);
    /* Rank 1 goes now, and destroys once it is done: until then rank 0's destroy would wait for it to leave the
     * store rank 0 serves (tcomms_comm_destroy). */
    mrank_host_barrier(ac->barrier, 2, 1, 30);
    mrank_host_barrier(ac->barrier, 2, 2, 60);
    double t0 = mrank_now();
    st = tcomms_comm_destroy(comm);
    if (st != TCOMMS_SUCCESS || mrank_now() - t0 > PEER_SLACK_S)
        fails += mrank_failf("FAIL rank 0: destroy after the abort returned %d after %.2f s (%s)", st,
                             mrank_now() - t0, tcomms_last_error());
    if (w != NULL) { /* the handle outlives its communicator, with its final status */
        if ((st = tcomms_work_test(w)) != TCOMMS_ERR_ABORTED)
            fails += mrank_failf("FAIL rank 0: the handle's test after destroy returned %d (%s)", st,
                                 tcomms_last_error());
        if ((st = tcomms_work_wait(w, 0)) != TCOMMS_ERR_ABORTED)
            fails += mrank_failf("FAIL rank 0: the handle's wait after destroy returned %d", st);
        if (tcomms_work_free(w) != TCOMMS_SUCCESS)
            fails += mrank_failf("FAIL rank 0: freeing the handle after destroy: %s", tcomms_last_error());
    }
    return fails;
}

/* Posts the matching operation only once rank 0 aborted: it must end in an error within its own timeout. The
 * broadcast it leaves alone: rank 0's send must outlive its task's handle and communicator (see (a) above). */
static int stalled_rank1(tcomms_comm_t *comm, const abort_case_t *ac)
{
    int fails = 0;
    if (ac->kind == WAIT_BCAST) {
        tcomms_comm_destroy(comm);
        mrank_host_barrier(ac->barrier, 2, 2, 60);
        return 0;
    }
    int32_t x = 2, y = 0;
    tcomms_op_opts_t o = {.field_mask = TCOMMS_OP_OPT_TIMEOUT, .timeout_ms = PEER_TIMEOUT_MS};
    double t0 = mrank_now();
    tcomms_status_t st = ac->kind == WAIT_RECV ? tcomms_send(comm, &x, 1, TCOMMS_INT32, 0, &o, NULL)
                                              : tcomms_all_reduce(comm, &x, &y, 1, TCOMMS_INT32, TCOMMS_SUM, &o, NULL);
    double took = mrank_now() - t0;
    /* What rank 0 sent before its abort stays sent, and a send may complete into its transport (UCX takes eager
     * messages unasked): rank 1's operation may then complete, with rank 0's true contribution. Hanging is the
     * failure, and so is any other error. */
    int ok = st == TCOMMS_ERR_TIMEOUT || st == TCOMMS_ERR_REMOTE || st == TCOMMS_ERR_ABORTED ||
             (st == TCOMMS_SUCCESS && (ac->kind == WAIT_RECV || y == 3));
    if (!ok)
        fails += mrank_failf("FAIL rank 1: the operation after rank 0's abort returned %d (%s)", st,
                             tcomms_last_error());
    if (took > PEER_TIMEOUT_MS / 1000.0 + PEER_SLACK_S)
        fails += mrank_failf("FAIL rank 1: the operation after rank 0's abort took %.1f s", took);
    mrank_logf("rank 1: after rank 0's abort: %d in %.2f s (%s)", st, took, st ? tcomms_last_error() : "");
    tcomms_comm_destroy(comm);
    mrank_host_barrier(ac->barrier, 2, 2, 60);
    return fails;
}

static int stalled(int rank, int size, void *arg)
{
    const abort_case_t *ac = arg;
    tcomms_comm_t *comm = NULL;
    if ((comm = mrank_world(ac->backend, COMM_TIMEOUT_MS, rank)) == NULL)
        return 1;
    if (sum_works(comm, rank, size, "before the abort") != 0)
        return 1;
    if (rank == 0)
        return stalled_rank0(comm, ac);
    if (mrank_host_barrier(ac->barrier, size, 1, 30) != 0)
        return mrank_failf("FAIL rank 1: rank 0 never got through its abort");
    return stalled_rank1(comm, ac);
}

/* _i runs over (backend, wait kind). */
START_TEST(abort_ends_a_stalled_wait)
{
    abort_case_t *ac = mrank_shared_alloc(sizeof(*ac) + 64);
    ck_assert_ptr_nonnull(ac);
    snprintf(ac->backend, sizeof ac->backend, "%s", mrank_backend(_i / WAIT_KINDS));
    ac->kind = _i % WAIT_KINDS;
    ac->barrier = (volatile int *)(ac + 1);
    int failing = mrank_run(2, stalled, ac, 90);
    ck_assert_msg(failing == 0, "%s, %s: %d rank(s) failed (see stderr)", ac->backend, wait_names[ac->kind],
                  failing);
    mrank_shared_free(ac, sizeof(*ac) + 64);
}
END_TEST

/* ---- (b) abort with nothing pending -------------------------------------------------------------------------- */

static int idle(int rank, int size, void *arg)
{
    const abort_case_t *ac = arg;
    tcomms_comm_t *comm = NULL;
    if ((comm = mrank_world(ac->backend, COMM_TIMEOUT_MS, rank)) == NULL)
        return 1;
    int fails = sum_works(comm, rank, size, "before the abort");
    tcomms_status_t st = tcomms_comm_abort(comm);
    if (st != TCOMMS_SUCCESS)
        fails += mrank_failf("FAIL rank %d: tcomms_comm_abort returned %d (%s)", rank, st, tcomms_last_error());
    fails += later_calls_refused(comm, rank);
    /* every rank aborted, so every rank's split is refused: each names the abort */
    tcomms_comm_t *child = (tcomms_comm_t *)&child;
    int all[2] = {0, 1};
    st = tcomms_comm_split(comm, all, 2, "child", NULL, &child);
    fails += refused(st, rank, "split");
    if (child != NULL)
        fails += mrank_failf("FAIL rank %d: a refused split gave a child", rank);
    if ((st = tcomms_comm_destroy(comm)) != TCOMMS_SUCCESS)
        fails += mrank_failf("FAIL rank %d: destroy after the abort returned %d (%s)", rank, st,
                             tcomms_last_error());
    if (tcomms_comm_abort(NULL) != TCOMMS_ERR_INVALID_ARG)
        fails += mrank_failf("FAIL rank %d: tcomms_comm_abort(NULL) was not INVALID_ARG", rank);
    if (tcomms_comm_abort(comm) != TCOMMS_ERR_INVALID_ARG) /* destroyed, still in the quarantine */
        fails += mrank_failf("FAIL rank %d: aborting a destroyed communicator was not INVALID_ARG", rank);
    return fails;
}

START_TEST(abort_with_nothing_pending)
{
    abort_case_t ac = {.kind = -1};
    snprintf(ac.backend, sizeof ac.backend, "%s", mrank_backend(_i));
    int failing = mrank_run(2, idle, &ac, 60);
    ck_assert_msg(failing == 0, "%s: %d rank(s) failed (see stderr)", ac.backend, failing);
}
END_TEST

/* ---- (c) children and parents are independent ---------------------------------------------------------------- */

static int family(int rank, int size, void *arg)
{
    const abort_case_t *ac = arg;
    tcomms_comm_t *parent = NULL, *doomed = NULL, *kept = NULL;
    if ((parent = mrank_world(ac->backend, COMM_TIMEOUT_MS, rank)) == NULL)
        return 1;
    int all[2] = {0, 1}, fails = 0;
    tcomms_status_t st = tcomms_comm_split(parent, all, 2, "doomed", NULL, &doomed);
    if (st == TCOMMS_SUCCESS)
        st = tcomms_comm_split(parent, all, 2, "kept", NULL, &kept);
    if (st != TCOMMS_SUCCESS)
        return mrank_failf("FAIL rank %d: split: %d (%s)", rank, st, tcomms_last_error());
    if (rank == 0) { /* a receive rank 1 never matches, ended by an abort of the child from another thread */
        mrank_aborter_t a;
        if (mrank_abort_later(&a, doomed, ABORT_AFTER_MS) != 0)
            return mrank_failf("FAIL rank 0: pthread_create");
        int32_t y = 0;
        st = tcomms_recv(doomed, &y, 1, TCOMMS_INT32, 1, NULL, NULL);
        double back = mrank_now();
        mrank_abort_join(&a);
        if (st != TCOMMS_ERR_ABORTED || back - a.at > PROMPT_S)
            fails += mrank_failf("FAIL rank 0: the child's recv returned %d %.2f s after the abort (%s)", st,
                                 back - a.at, tcomms_last_error());
        fails += refused(tcomms_barrier(doomed, NULL, NULL), rank, "the aborted child's barrier");
    }
    if (mrank_host_barrier(ac->barrier, size, 1, 30) != 0)
        return fails + mrank_failf("FAIL rank %d: the other rank never came", rank);
    fails += sum_works(parent, rank, size, "the parent after its child's abort");
    fails += sum_works(kept, rank, size, "the other child after its sibling's abort");
    if (rank == 0 && tcomms_comm_abort(parent) != TCOMMS_SUCCESS)
        fails += mrank_failf("FAIL rank 0: aborting the parent: %s", tcomms_last_error());
    fails += sum_works(kept, rank, size, "a child after rank 0 aborted its parent");
    if (rank == 0)
        fails += refused(tcomms_barrier(parent, NULL, NULL), rank, "the aborted parent's barrier");
    mrank_host_barrier(ac->barrier, size, 2, 30); /* rank 1 leaves the parent alone until rank 0 is done */
    tcomms_comm_destroy(doomed);
    tcomms_comm_destroy(kept);
    tcomms_comm_destroy(parent);
    return fails;
}

START_TEST(abort_spares_parent_and_children)
{
    abort_case_t *ac = mrank_shared_alloc(sizeof(*ac) + 64);
    ck_assert_ptr_nonnull(ac);
    snprintf(ac->backend, sizeof ac->backend, "%s", mrank_backend(_i));
    ac->barrier = (volatile int *)(ac + 1);
    int failing = mrank_run(2, family, ac, 90);
    ck_assert_msg(failing == 0, "%s: %d rank(s) failed (see stderr)", ac->backend, failing);
    mrank_shared_free(ac, sizeof(*ac) + 64);
}
END_TEST

/* With no backend listed, the tests run once on the library's default. */
static void add_tests(Suite *s, int n)
{
    TCase *tc = mrank_tcase(s, "mrank", 120);
    tcase_add_loop_test(tc, abort_ends_a_stalled_wait, 0, n * WAIT_KINDS);
    tcase_add_loop_test(tc, abort_with_nothing_pending, 0, n);
    tcase_add_loop_test(tc, abort_spares_parent_and_children, 0, n);
}

int main(void)
{
    return mrank_main("abort", MRANK_DEFAULT, add_tests);
}
