/* SPDX-License-Identifier: BSD-3-Clause */
/* tcomms_group_start/end (lib/group.c) and tcomms_work_synchronize (lib/work.c) on every built CPU backend, 3
 * ranks: a ring of 1 MiB blocking sends and receives that only completes when grouped, in both posting orders;
 * nested groups; an unbalanced end; 100 groups holding a rejected call without fd growth; a group whose last
 * receive never matches (an error from the end, not a hang); synchronize agreeing with wait. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tcomms/tcomms.h>

#include "mrank.h"
#include "mrank_world.h"

#define NRANKS 3
#define JOB_S 120
#define OP_TIMEOUT_MS 20000u
#define RING_ELEMS (256 * 1024) /* 1 MiB of int32: more than a socket buffer, so an ungrouped send would stall */
#define SMALL 64
#define LEAK_GROUPS 100

typedef struct shared {
    int backend;
    int counter; /* mrank_host_barrier */
} shared_t;

/* What rank `r` sends in round `round`: distinct per rank, round and element. */
static int32_t pattern(int r, int round, size_t i)
{
    return (int32_t)((uint32_t)r * 2654435761u ^ (uint32_t)round * 40503u ^ (uint32_t)i * 2246822519u);
}

static int check_call(int rank, const char *what, tcomms_status_t st, tcomms_status_t want)
{
    if (st == want)
        return 0;
    return mrank_failf("FAIL rank %d: %s returned %d (%s), expected %d", rank, what, st, tcomms_last_error(), want);
}

/* The received block must be what `from` sent in `round`. */
static int check_block(int rank, const char *what, const int32_t *buf, size_t n, int from, int round)
{
    for (size_t i = 0; i < n; i++)
        if (buf[i] != pattern(from, round, i))
            return mrank_failf("FAIL rank %d, %s: element %zu = %d, expected %d (from rank %d)", rank, what, i,
                               buf[i], pattern(from, round, i), from);
    return 0;
}

/* One grouped ring exchange of n elements: even ranks post the send first, odd ranks the receive. `nest` wraps
 * each call in its own inner group. */
static int ring(tcomms_comm_t *comm, int rank, int size, size_t n, int round, int nest, int32_t *sbuf,
                int32_t *rbuf)
{
    int next = (rank + 1) % size, prev = (rank + size - 1) % size, fails = 0;
    for (size_t i = 0; i < n; i++) {
        sbuf[i] = pattern(rank, round, i);
        rbuf[i] = 0;
    }
    fails += check_call(rank, "tcomms_group_start", tcomms_group_start(), TCOMMS_SUCCESS);
    for (int step = 0; step < 2; step++) {
        if (nest)
            fails += check_call(rank, "inner tcomms_group_start", tcomms_group_start(), TCOMMS_SUCCESS);
        if ((step == 0) == (rank % 2 == 0))
            fails += check_call(rank, "grouped send", tcomms_send(comm, sbuf, n, TCOMMS_INT32, next, NULL, NULL),
                                TCOMMS_SUCCESS);
        else
            fails += check_call(rank, "grouped recv", tcomms_recv(comm, rbuf, n, TCOMMS_INT32, prev, NULL, NULL),
                                TCOMMS_SUCCESS);
        if (nest)
            fails += check_call(rank, "inner tcomms_group_end", tcomms_group_end(), TCOMMS_SUCCESS);
    }
    fails += check_call(rank, "tcomms_group_end", tcomms_group_end(), TCOMMS_SUCCESS);
    return fails ? fails : check_block(rank, nest ? "nested ring" : "ring", rbuf, n, prev, round);
}

/* Groups holding a call rejected at once (a send to oneself) beside a valid exchange: the error is immediate, the
 * exchange completes, and nothing accumulates. */
static int rejected_in_group(tcomms_comm_t *comm, int rank, int size, int round, int32_t *sbuf, int32_t *rbuf)
{
    int next = (rank + 1) % size, prev = (rank + size - 1) % size, fails = 0;
    for (size_t i = 0; i < SMALL; i++)
        sbuf[i] = pattern(rank, round, i);
    fails += check_call(rank, "tcomms_group_start", tcomms_group_start(), TCOMMS_SUCCESS);
    fails += check_call(rank, "send", tcomms_send(comm, sbuf, SMALL, TCOMMS_INT32, next, NULL, NULL), TCOMMS_SUCCESS);
    fails += check_call(rank, "send to self", tcomms_send(comm, sbuf, SMALL, TCOMMS_INT32, rank, NULL, NULL),
                        TCOMMS_ERR_INVALID_ARG);
    fails += check_call(rank, "recv", tcomms_recv(comm, rbuf, SMALL, TCOMMS_INT32, prev, NULL, NULL), TCOMMS_SUCCESS);
    fails += check_call(rank, "tcomms_group_end", tcomms_group_end(), TCOMMS_SUCCESS);
    return fails ? fails : check_block(rank, "group with a rejected call", rbuf, SMALL, prev, round);
}

static int group_rank(int rank, int size, void *arg)
{
    shared_t *sh = arg;
    const char *backend = mrank_backend(sh->backend);
    tcomms_comm_t *comm = mrank_world(backend, OP_TIMEOUT_MS, rank);
    if (!comm)
        return 1;
    int32_t *sbuf = malloc(RING_ELEMS * sizeof(int32_t)), *rbuf = malloc(RING_ELEMS * sizeof(int32_t));
    int fails = 0, round = 0;
    if (!sbuf || !rbuf)
        return mrank_failf("FAIL rank %d: out of memory", rank);
    fails += check_call(rank, "unbalanced tcomms_group_end", tcomms_group_end(), TCOMMS_ERR_INVALID_ARG);
    for (int i = 0; i < 3 && !fails; i++)
        fails += ring(comm, rank, size, RING_ELEMS, ++round, 0, sbuf, rbuf);
    if (!fails)
        fails += ring(comm, rank, size, RING_ELEMS, ++round, 1, sbuf, rbuf);
    fails += check_call(rank, "unbalanced tcomms_group_end after groups", tcomms_group_end(), TCOMMS_ERR_INVALID_ARG);
    for (int i = 0; i < 10 && !fails; i++)
        fails += rejected_in_group(comm, rank, size, ++round, sbuf, rbuf);
    int fd0 = mrank_count_fds();
    for (int i = 0; i < LEAK_GROUPS && !fails; i++)
        fails += rejected_in_group(comm, rank, size, ++round, sbuf, rbuf);
    int fd1 = mrank_count_fds();
    if (fd1 > fd0)
        fails += mrank_failf("FAIL rank %d, %s: open fds grew from %d to %d over %d groups", rank, backend, fd0, fd1,
                             LEAK_GROUPS);
    /* A receive nobody sends to, last in the group: the end reports an error after completing the rest. */
    if (!fails) {
        int next = (rank + 1) % size, prev = (rank + size - 1) % size;
        ++round;
        for (size_t i = 0; i < SMALL; i++)
            sbuf[i] = pattern(rank, round, i);
        tcomms_op_opts_t shortly = {.field_mask = TCOMMS_OP_OPT_TIMEOUT, .timeout_ms = 300};
        fails += check_call(rank, "tcomms_group_start", tcomms_group_start(), TCOMMS_SUCCESS);
        fails += check_call(rank, "send", tcomms_send(comm, sbuf, SMALL, TCOMMS_INT32, next, NULL, NULL),
                            TCOMMS_SUCCESS);
        fails += check_call(rank, "recv", tcomms_recv(comm, rbuf, SMALL, TCOMMS_INT32, prev, NULL, NULL),
                            TCOMMS_SUCCESS);
        fails += check_call(rank, "unmatched recv",
                            tcomms_recv(comm, rbuf + SMALL, SMALL, TCOMMS_INT32, prev, &shortly, NULL),
                            TCOMMS_SUCCESS);
        tcomms_status_t st = tcomms_group_end();
        if (st == TCOMMS_SUCCESS)
            fails += mrank_failf("FAIL rank %d, %s: a group with an unmatched recv ended with success", rank,
                                 backend);
        fails += check_block(rank, "matched recv before the unmatched one", rbuf, SMALL, prev, round);
        if (mrank_host_barrier(&sh->counter, size, 1, 30) != 0)
            fails += mrank_failf("FAIL rank %d: host barrier", rank);
    }
    free(sbuf);
    free(rbuf);
    tcomms_comm_destroy(comm);
    return fails;
}

/* tcomms_work_synchronize on a CPU backend is a wait: same status, same completed result. */
static int sync_rank(int rank, int size, void *arg)
{
    shared_t *sh = arg;
    tcomms_comm_t *comm = mrank_world(mrank_backend(sh->backend), OP_TIMEOUT_MS, rank);
    if (!comm)
        return 1;
    int fails = 0;
    enum { N = 1000 };
    static double in[N], out[N];
    for (int round = 1; round <= 3 && !fails; round++) {
        for (int i = 0; i < N; i++) {
            in[i] = rank * 0.25 + i + round;
            out[i] = -1;
        }
        tcomms_work_t *w = NULL;
        fails += check_call(rank, "async all_reduce",
                            tcomms_all_reduce(comm, in, out, N, TCOMMS_FLOAT64, TCOMMS_SUM, NULL, &w), TCOMMS_SUCCESS);
        if (fails)
            break;
        fails += check_call(rank, "tcomms_work_synchronize", tcomms_work_synchronize(w, 0), TCOMMS_SUCCESS);
        fails += check_call(rank, "tcomms_work_test after synchronize", tcomms_work_test(w), TCOMMS_SUCCESS);
        fails += check_call(rank, "tcomms_work_wait after synchronize", tcomms_work_wait(w, 0), TCOMMS_SUCCESS);
        fails += check_call(rank, "tcomms_work_synchronize again", tcomms_work_synchronize(w, 1000), TCOMMS_SUCCESS);
        tcomms_work_free(w);
        double ranks = 0.25 * size * (size - 1) / 2;
        for (int i = 0; i < N; i++)
            if (out[i] != ranks + (double)size * (i + round)) {
                fails += mrank_failf("FAIL rank %d: out[%d] = %g, expected %g", rank, i, out[i],
                                     ranks + (double)size * (i + round));
                break;
            }
    }
    tcomms_comm_destroy(comm);
    return fails;
}

static void run_job(mrank_fn_t fn, int backend)
{
    shared_t *sh = mrank_shared_alloc(sizeof *sh);
    ck_assert_ptr_nonnull(sh);
    sh->backend = backend;
    int failing = mrank_run(NRANKS, fn, sh, JOB_S);
    mrank_shared_free(sh, sizeof *sh);
    ck_assert_msg(failing == 0, "%s: %d rank(s) failed (see stderr)", mrank_backend(backend), failing);
}

START_TEST(test_groups)
{
    run_job(group_rank, _i);
}
END_TEST

START_TEST(test_synchronize)
{
    run_job(sync_rank, _i);
}
END_TEST

static void add_tests(Suite *s, int nbackends)
{
    TCase *tc = mrank_tcase(s, "group", JOB_S + 30);
    tcase_add_loop_test(tc, test_groups, 0, nbackends);
    tcase_add_loop_test(tc, test_synchronize, 0, nbackends);
}

int main(void)
{
    return mrank_main("group", MRANK_BACKEND, add_tests);
}
