/* SPDX-License-Identifier: BSD-3-Clause */
/* A rank dies in the middle of a job: (a) under mrank, the survivors' next all_reduce must fail (REMOTE or TIMEOUT)
 * within the communicator timeout plus 5 s; (b) under tcomms-run ($TCOMMS_RUN), the launcher must exit non-zero in
 * bounded time and leave no process of the job behind (each rank of peer_death_prog writes its pid to a temp dir);
 * (c) a rank stalls without dying: the other's operation ends in TCOMMS_ERR_TIMEOUT, and later ones fail fast. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <tcomms/tcomms.h>
#include <unistd.h>

#include "mrank.h"
#include "mrank_world.h"

#ifndef PEER_DEATH_PROG
#define PEER_DEATH_PROG "tests/peer_death_prog"
#endif

#define NRANKS 3
#define OP_TIMEOUT_MS 5000u
#define DETECT_SLACK_S 5.0  /* the survivors' error may come this long after the timeout */
#define LAUNCHER_BOUND_S 30 /* tcomms-run must be gone by then */

static const char *const dying_ranks_text[] = {"1", "0"};
static const int dying_ranks[] = {1, 0};

/* ---- (a) under mrank ------------------------------------------------------------------------------------------ */

/* One case: which rank misbehaves, on which backend (an entry of TCOMMS_TEST_BACKENDS; "" = the default). */
typedef struct death_case {
    int rank;
    char backend[32];
} death_case_t;

static int death_rank(int rank, int size, void *arg)
{
    const death_case_t *dc = arg;
    int dying = dc->rank;
    tcomms_comm_t *comm = NULL;
    if ((comm = mrank_world(dc->backend, OP_TIMEOUT_MS, rank)) == NULL)
        return 1;
    tcomms_status_t st;
    int32_t one = 1, sum = 0;
    st = tcomms_all_reduce(comm, &one, &sum, 1, TCOMMS_INT32, TCOMMS_SUM, NULL, NULL);
    if (st != TCOMMS_SUCCESS || sum != size)
        return mrank_failf("FAIL rank %d: first all_reduce: %d, sum %d (%s)", rank, st, (int)sum,
                           tcomms_last_error());
    if (rank == dying)
        raise(SIGKILL);
    int fails = 0;
    double t0 = mrank_now();
    st = tcomms_all_reduce(comm, &one, &sum, 1, TCOMMS_INT32, TCOMMS_SUM, NULL, NULL);
    double took = mrank_now() - t0, bound = OP_TIMEOUT_MS / 1000.0 + DETECT_SLACK_S;
    if (st != TCOMMS_ERR_REMOTE && st != TCOMMS_ERR_TIMEOUT)
        fails += mrank_failf("FAIL rank %d: all_reduce after rank %d died returned %d (%s), expected %d or %d",
                             rank, dying, st, tcomms_last_error(), TCOMMS_ERR_REMOTE, TCOMMS_ERR_TIMEOUT);
    if (took > bound)
        fails += mrank_failf("FAIL rank %d: the failure took %.1f s (bound %.1f s)", rank, took, bound);
    t0 = mrank_now();
    tcomms_comm_destroy(comm);
    if (mrank_now() - t0 > bound)
        fails += mrank_failf("FAIL rank %d: tcomms_comm_destroy after the failure took %.1f s", rank,
                             mrank_now() - t0);
    return fails;
}

/* _i runs over (backend, dying rank) pairs. */
START_TEST(survivors_fail_in_bounded_time)
{
    death_case_t dc = {dying_ranks[_i % 2], ""};
    snprintf(dc.backend, sizeof dc.backend, "%s", mrank_backend(_i / 2));
    int failing = mrank_run_ex(NRANKS, death_rank, &dc, 60, 1u << dc.rank);
    ck_assert_msg(failing == 0, "%s: rank %d died: %d rank(s) did not behave (see stderr)", dc.backend, dc.rank,
                  failing);
}
END_TEST

/* ---- (b) under tcomms-run ------------------------------------------------------------------------------------- */

/* Reap whatever has ended among our children (tcomms-run, and ranks it orphaned onto us as subreaper). */
static void reap_children(pid_t launcher, int *launcher_status, int *launcher_done)
{
    int status;
    pid_t w;
    while ((w = waitpid(-1, &status, WNOHANG)) > 0) {
        if (w == launcher) {
            *launcher_status = status;
            *launcher_done = 1;
        }
    }
}

static int read_pids(const char *dir, pid_t *pids, int max)
{
    int n = 0;
    for (int r = 0; r < max; r++) {
        char path[4096];
        long pid = 0;
        snprintf(path, sizeof path, "%s/rank%d.pid", dir, r);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fscanf(f, "%ld", &pid) == 1 && pid > 1)
            pids[n++] = (pid_t)pid;
        fclose(f);
        unlink(path);
    }
    return n;
}

START_TEST(launcher_takes_the_job_down)
{
    const char *run = getenv("TCOMMS_RUN");
    if (!run || !*run) {
        fprintf(stderr, "test_peer_death: TCOMMS_RUN is not set: skipping the tcomms-run case\n");
        return;
    }
    const char *prog = getenv("TCOMMS_TEST_PEER_DEATH_PROG");
    if (!prog || !*prog)
        prog = PEER_DEATH_PROG;
    char dir[] = "/tmp/tcomms-peer-death-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    setenv("TCOMMS_TEST_PIDDIR", dir, 1);
    /* ranks orphaned by the launcher become our children, so we can see (and reap) them */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    fflush(NULL);
    double t0 = mrank_now();
    pid_t launcher = fork();
    ck_assert_int_ge(launcher, 0);
    if (launcher == 0) {
        setpgid(0, 0);
        execl(run, run, "-n", "3", prog, dying_ranks_text[_i], (char *)NULL);
        _exit(127);
    }
    int status = 0, done = 0;
    while (!done && mrank_now() - t0 < LAUNCHER_BOUND_S) {
        reap_children(launcher, &status, &done);
        if (!done)
            mrank_sleep_ms(10);
    }
    double took = mrank_now() - t0;
    if (!done) {
        kill(-launcher, SIGKILL);
        kill(launcher, SIGKILL);
        waitpid(launcher, &status, 0);
    }
    /* every rank started, and none may outlive the launcher (orphans get a moment to be reaped) */
    pid_t pids[NRANKS];
    int npids = read_pids(dir, pids, NRANKS), alive = 0;
    for (int k = 0; k < npids; k++) {
        double until = mrank_now() + 5.0;
        while (kill(pids[k], 0) == 0 && mrank_now() < until) {
            reap_children(launcher, &status, &done);
            mrank_sleep_ms(10);
        }
        if (kill(pids[k], 0) == 0 || errno != ESRCH) {
            alive++;
            fprintf(stderr, "test_peer_death: rank pid %ld outlived tcomms-run\n", (long)pids[k]);
            kill(pids[k], SIGKILL);
        }
    }
    reap_children(launcher, &status, &done);
    rmdir(dir);
    unsetenv("TCOMMS_TEST_PIDDIR");
    ck_assert_msg(done, "tcomms-run still ran %d s after rank %s killed itself", LAUNCHER_BOUND_S,
                  dying_ranks_text[_i]);
    ck_assert_msg(!(WIFEXITED(status) && WEXITSTATUS(status) == 0),
                  "tcomms-run exited with 0 although rank %s was killed", dying_ranks_text[_i]);
    ck_assert_msg(npids == NRANKS, "only %d of %d ranks wrote their pid (is %s built?)", npids, NRANKS, prog);
    ck_assert_msg(alive == 0, "%d process(es) of the job outlived tcomms-run", alive);
    fprintf(stderr, "test_peer_death: tcomms-run ended with status 0x%x %.1f s after start\n", status, took);
}
END_TEST

/* ---- (c) a stalled peer ---------------------------------------------------------------------------------------- */

#define STALL_TIMEOUT_MS 1500u

static int stall_rank(int rank, int size, void *arg)
{
    (void)size;
    const death_case_t *dc = arg;
    tcomms_comm_t *comm = NULL;
    if ((comm = mrank_world(dc->backend, STALL_TIMEOUT_MS, rank)) == NULL)
        return 1;
    tcomms_status_t st;
    int fails = 0;
    float x = 1, y = 0;
    if (rank == 1) {
        /* alive, connected, and silent for longer than the other's timeout */
        mrank_sleep_ms((int)STALL_TIMEOUT_MS + 3000);
        tcomms_comm_destroy(comm);
        return 0;
    }
    tcomms_work_t *w = NULL;
    double t0 = mrank_now();
    st = tcomms_all_reduce(comm, &x, &y, 1, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, &w);
    if (st != TCOMMS_SUCCESS)
        return mrank_failf("FAIL rank 0: posting the all_reduce: %d (%s)", st, tcomms_last_error());
    /* a short wait gives up without ending the operation */
    st = tcomms_work_wait(w, 100);
    if (st != TCOMMS_ERR_TIMEOUT)
        fails += mrank_failf("FAIL rank 0: a 100 ms wait returned %d, expected TCOMMS_ERR_TIMEOUT", st);
    if ((st = tcomms_work_test(w)) != TCOMMS_IN_PROGRESS)
        fails += mrank_failf("FAIL rank 0: test after the short wait returned %d, expected IN_PROGRESS", st);
    st = tcomms_work_wait(w, 0);
    double took = mrank_now() - t0, bound = STALL_TIMEOUT_MS / 1000.0 + DETECT_SLACK_S;
    if (st != TCOMMS_ERR_TIMEOUT)
        fails += mrank_failf("FAIL rank 0: all_reduce with a silent peer returned %d (%s), expected "
                             "TCOMMS_ERR_TIMEOUT", st, tcomms_last_error());
    if (took < STALL_TIMEOUT_MS / 1000.0 * 0.9 || took > bound)
        fails += mrank_failf("FAIL rank 0: the timeout came after %.2f s (timeout %.1f s, bound %.1f s)", took,
                             STALL_TIMEOUT_MS / 1000.0, bound);
    if (tcomms_work_wait(w, 0) != st) /* a final status is kept */
        fails += mrank_failf("FAIL rank 0: a second wait changed the status");
    tcomms_work_free(w);
    t0 = mrank_now();
    st = tcomms_all_reduce(comm, &x, &y, 1, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL);
    if (st != TCOMMS_ERR_ABORTED || mrank_now() - t0 > 1.0)
        fails += mrank_failf("FAIL rank 0: the next all_reduce returned %d after %.2f s, expected "
                             "TCOMMS_ERR_ABORTED at once", st, mrank_now() - t0);
    tcomms_comm_destroy(comm);
    return fails;
}

/* _i runs over the backends. */
START_TEST(stalled_peer_times_out)
{
    death_case_t dc = {1, ""};
    snprintf(dc.backend, sizeof dc.backend, "%s", mrank_backend(_i));
    int failing = mrank_run(2, stall_rank, &dc, 30);
    ck_assert_msg(failing == 0, "%s: %d rank(s) failed (see stderr)", dc.backend, failing);
}
END_TEST

/* With no backend listed, the rank tests run once on the library's default. */
static void add_tests(Suite *s, int nbackends)
{
    TCase *tm = mrank_tcase(s, "mrank", 90);
    tcase_add_loop_test(tm, survivors_fail_in_bounded_time, 0, 2 * nbackends);
    tcase_add_loop_test(tm, stalled_peer_times_out, 0, nbackends);
    tcase_add_loop_test(mrank_tcase(s, "tcomms_run", LAUNCHER_BOUND_S + 30), launcher_takes_the_job_down, 0, 2);
}

int main(void)
{
    return mrank_main("peer_death", MRANK_DEFAULT, add_tests);
}
