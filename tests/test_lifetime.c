/* SPDX-License-Identifier: BSD-3-Clause */
/* What the core does for every backend (include/tcomms/backend.h, "Failure" and "Lifetime"; lib/comm_state.c), on
 * every CPU backend of TCOMMS_TEST_BACKENDS, on 2 ranks:
 *   (a) a communicator destroyed while a handle's operation still runs: tcomms_comm_destroy returns at once (the
 *       backend's communicator stays until the handle is freed), and the handle, waited afterwards, completes with
 *       the data its peer sent only once it heard that the destroy had returned;
 *   (b) a failure a backend reports through the core (a receive past its timeout, its handle freed without a
 *       wait, so the core never sees its status) is seen by the next operation, which the core refuses naming the
 *       backend's message, and by the next split, which the core refuses before any backend sees it.
 * The ranks coordinate through shared memory (mrank_host_barrier), never through the communicator under test. */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <tcomms/tcomms.h>

#include "check_run.h"
#include "mrank.h"
#include "mrank_world.h"

#define COMM_TIMEOUT_MS 10000u /* (a): a destroy that waited for the receive would wait this long */
#define RECV_TIMEOUT_MS 300u   /* (b): the receive that fails */
#define PROMPT_S 2.0

typedef struct life_case {
    char backend[32];
    volatile int *barrier; /* shared by the ranks (mrank_shared_alloc) */
} life_case_t;

/* ---- (a) the handle outlives its communicator while its operation runs --------------------------------------- */

/* Rank 1 receives and destroys (rank 0 serves the store, and its destroy lingers until the others left it). */
static int running_rank1(tcomms_comm_t *comm, const life_case_t *lc)
{
    int fails = 0;
    int32_t y = -1;
    tcomms_work_t *w = NULL;
    tcomms_status_t st = tcomms_recv(comm, &y, 1, TCOMMS_INT32, 0, NULL, &w);
    if (st != TCOMMS_SUCCESS)
        return mrank_failf("FAIL rank 1: recv: %d (%s)", st, tcomms_last_error());
    double t0 = mrank_now();
    st = tcomms_comm_destroy(comm);
    double took = mrank_now() - t0;
    if (st != TCOMMS_SUCCESS || took > PROMPT_S)
        fails += mrank_failf("FAIL rank 1: destroy with a receive running returned %d after %.2f s (bound %.1f s: "
                             "the backend's communicator must wait for the handle, not the destroy) (%s)", st, took,
                             PROMPT_S, st ? tcomms_last_error() : "");
    if (mrank_host_barrier(lc->barrier, 2, 1, 60) != 0) /* rank 0 sends only now */
        return fails + mrank_failf("FAIL rank 1: rank 0 never came");
    if ((st = tcomms_work_wait(w, 0)) != TCOMMS_SUCCESS || y != 42)
        fails += mrank_failf("FAIL rank 1: the handle waited after destroy returned %d with %d, expected 42 (%s)", st,
                             (int)y, st ? tcomms_last_error() : "");
    if ((st = tcomms_work_test(w)) != TCOMMS_SUCCESS)
        fails += mrank_failf("FAIL rank 1: the handle's test after its wait returned %d", st);
    if (tcomms_work_free(w) != TCOMMS_SUCCESS) /* the backend's communicator goes here */
        fails += mrank_failf("FAIL rank 1: freeing the last handle: %s", tcomms_last_error());
    mrank_host_barrier(lc->barrier, 2, 2, 60);
    return fails;
}

static int running(int rank, int size, void *arg)
{
    (void)size;
    const life_case_t *lc = arg;
    tcomms_comm_t *comm = mrank_world(lc->backend, COMM_TIMEOUT_MS, rank);
    if (comm == NULL)
        return 1;
    if (rank == 1)
        return running_rank1(comm, lc);
    int fails = 0;
    if (mrank_host_barrier(lc->barrier, 2, 1, 60) != 0)
        return mrank_failf("FAIL rank 0: rank 1's destroy never returned");
    int32_t x = 42;
    tcomms_status_t st = tcomms_send(comm, &x, 1, TCOMMS_INT32, 1, NULL, NULL);
    if (st != TCOMMS_SUCCESS)
        fails += mrank_failf("FAIL rank 0: the send to the destroyed communicator's receive: %d (%s)", st,
                             tcomms_last_error());
    mrank_host_barrier(lc->barrier, 2, 2, 60);
    tcomms_comm_destroy(comm);
    return fails;
}

START_TEST(handle_outlives_running)
{
    life_case_t *lc = mrank_shared_alloc(sizeof(*lc) + 64);
    ck_assert_ptr_nonnull(lc);
    snprintf(lc->backend, sizeof lc->backend, "%s", mrank_backend(_i));
    lc->barrier = (volatile int *)(lc + 1);
    int failing = mrank_run(2, running, lc, 90);
    ck_assert_msg(failing == 0, "%s: %d rank(s) failed (see stderr)", lc->backend, failing);
    mrank_shared_free(lc, sizeof(*lc) + 64);
}
END_TEST

/* ---- (b) a backend's failure, reported through the core ------------------------------------------------------ */

/* `st` must be TCOMMS_ERR_ABORTED with a message starting with `start` (the core's) and naming `needle` (the
 * backend's failed operation). */
static int core_refused(tcomms_status_t st, const char *call, const char *start, const char *needle)
{
    const char *msg = tcomms_last_error();
    if (st != TCOMMS_ERR_ABORTED || strncmp(msg, start, strlen(start)) != 0 || strstr(msg, needle) == NULL)
        return mrank_failf("FAIL rank 0: %s after the unwaited failure returned %d (%s), expected "
                           "TCOMMS_ERR_ABORTED from the core ('%s...') naming '%s'", call, st, msg, start, needle);
    return 0;
}

static int reported(int rank, int size, void *arg)
{
    (void)size;
    const life_case_t *lc = arg;
    tcomms_comm_t *comm = mrank_world(lc->backend, COMM_TIMEOUT_MS, rank);
    if (comm == NULL)
        return 1;
    int fails = 0, all[2] = {0, 1};
    tcomms_comm_t *child = NULL;
    if (rank == 0) {
        const char *be = "";
        tcomms_comm_backend(comm, TCOMMS_DEVICE_CPU, &be);
        char needle[64];
        snprintf(needle, sizeof needle, "%s recv", be); /* "ucx recv (p2p) on ...", "gloo recv on ..." */
        int32_t y = 0;
        tcomms_op_opts_t o = {.field_mask = TCOMMS_OP_OPT_TIMEOUT, .timeout_ms = RECV_TIMEOUT_MS};
        tcomms_work_t *w = NULL;
        tcomms_status_t st = tcomms_recv(comm, &y, 1, TCOMMS_INT32, 1, &o, &w);
        if (st != TCOMMS_SUCCESS)
            return mrank_failf("FAIL rank 0: recv: %d (%s)", st, tcomms_last_error());
        tcomms_work_free(w); /* its status never reaches the core through the handle */
        mrank_sleep_ms(4 * RECV_TIMEOUT_MS + 500);
        fails += core_refused(tcomms_barrier(comm, NULL, NULL), "barrier", "tcomms_barrier: communicator '", needle);
        st = tcomms_comm_split(comm, all, 2, "child", NULL, &child);
        fails += core_refused(st, "split", "tcomms_comm_split: communicator '", needle);
    }
    if (mrank_host_barrier(lc->barrier, 2, 1, 60) != 0)
        return fails + mrank_failf("FAIL rank %d: the other rank never came", rank);
    if (rank == 1) { /* rank 0's core refused its part of the split: rank 1 hears it from the vote */
        tcomms_status_t st = tcomms_comm_split(comm, all, 2, "child", NULL, &child);
        if (st == TCOMMS_SUCCESS || child != NULL)
            fails += mrank_failf("FAIL rank 1: the split rank 0 refused returned %d", st);
    }
    tcomms_comm_destroy(child);
    tcomms_comm_destroy(comm);
    return fails;
}

START_TEST(failure_reported_through_core)
{
    life_case_t *lc = mrank_shared_alloc(sizeof(*lc) + 64);
    ck_assert_ptr_nonnull(lc);
    snprintf(lc->backend, sizeof lc->backend, "%s", mrank_backend(_i));
    lc->barrier = (volatile int *)(lc + 1);
    int failing = mrank_run(2, reported, lc, 90);
    ck_assert_msg(failing == 0, "%s: %d rank(s) failed (see stderr)", lc->backend, failing);
    mrank_shared_free(lc, sizeof(*lc) + 64);
}
END_TEST

/* With no backend listed, the tests run once on the library's default. */
static void add_tests(Suite *s, int n)
{
    TCase *tc = mrank_tcase(s, "core", 240);
    tcase_add_loop_test(tc, handle_outlives_running, 0, n);
    tcase_add_loop_test(tc, failure_reported_through_core, 0, n);
}

int main(void)
{
    return mrank_main("lifetime", MRANK_DEFAULT, add_tests);
}
