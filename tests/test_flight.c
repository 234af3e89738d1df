/* SPDX-License-Identifier: BSD-3-Clause */
/* The flight record (lib/flight.c, lib/flight_ask.c) on every CPU backend of TCOMMS_TEST_BACKENDS, on 3 ranks that
 * run all_reduce #1 and broadcast #2 and then:
 *   (a) rank 2 skips all_reduce #3 and waits outside tcomms: the timeout message of ranks 0 and 1 names rank 2 as
 *       never having posted #3 and its last operation, broadcast #2, as completed;
 *   (b) rank 2 stops itself (SIGSTOP) instead: ranks 0 and 1 name it as not answering;
 *   (c) as (a) with TCOMMS_TRACE_DUMP set: every rank writes its file, and `tcomms-info --trace` over them names
 *       #3 as the first operation where the ranks diverge, and rank 2 as missing it;
 *   (d) as (a) on a split 'pair' of root ranks 1 and 2, whose ranks are not the root's: root rank 2 (rank 1 there)
 *       skips, and root rank 1 (rank 0 there) names rank 1 of 'pair', which its listener for root rank 2 answered.
 * On 2 ranks (the UCX pair path, whose record the backend writes after its first send), rank 1 holds back
 * all_reduce #3 until rank 0's record, dumped by TCOMMS_TRACE_DUMP_SIGNAL, shows #3 waiting; then posts it.
 * Single-rank cases check that tcomms_comm_abort and TCOMMS_TRACE_DUMP_SIGNAL write the file too. The references
 * are the scripted sequences themselves: which rank skipped what is known in advance. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <tcomms/tcomms.h>

#include "check_run.h"
#include "mrank.h"
#include "mrank_world.h"

#define OP_TIMEOUT_MS 1500u
#define JOB_S 40
#define NRANKS 3
#define LATE 2 /* the rank that skips or stops */

enum scenario { SKIP, STOPPED, DUMP, SPLIT, SCENARIOS };
static const char *const scenario_names[SCENARIOS] = {"skip", "stopped", "dump", "split"};

typedef struct shared {
    char backend[32];
    int scenario;
    char dir[128];          /* TCOMMS_TRACE_DUMP's directory (DUMP) */
    volatile int barrier;   /* host barrier outside tcomms */
    volatile int pid[NRANKS];
    volatile int checked;   /* ranks 0 and 1 have checked their message */
} shared_t;


static int has(const char *msg, const char *what, int rank, const char *needle)
{
    if (strstr(msg, needle) != NULL)
        return 0;
    return mrank_failf("FAIL rank %d, %s: the timeout message lacks \"%s\": %s", rank, what, needle, msg);
}

/* all_reduce #1 and broadcast #2, checked against their known results. */
static int warm_up(tcomms_comm_t *comm, int rank, int size)
{
    float x[4] = {1, 1, 1, 1}, y[4];
    int32_t b = rank == 0 ? 42 : 0;
    if (tcomms_all_reduce(comm, x, y, 4, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL) != TCOMMS_SUCCESS ||
        y[3] != (float)size || tcomms_broadcast(comm, &b, 1, TCOMMS_INT32, 0, NULL, NULL) != TCOMMS_SUCCESS || b != 42)
        return mrank_failf("FAIL rank %d: the first two operations failed: %s", rank, tcomms_last_error());
    return 0;
}

/* The JSON files of the DUMP case: one per rank, each naming the communicator. */
static int files_written(const shared_t *sh, int rank)
{
    int fails = 0;
    for (int r = 0; r < NRANKS; r++) {
        char path[256];
        snprintf(path, sizeof(path), "%s/trace.%d.json", sh->dir, r);
        struct stat st;
        double until = mrank_now() + 5;
        while (stat(path, &st) != 0 && mrank_now() < until)
            mrank_sleep_ms(50);
        if (stat(path, &st) != 0)
            fails += mrank_failf("FAIL rank %d: %s was not written", rank, path);
    }
    return fails;
}

/* tcomms-info --trace over the files names #3 and rank 2. */
static int merge_names_divergence(const shared_t *sh)
{
    const char *build = getenv("TCOMMS_TEST_BUILDDIR");
    char cmd[1024], out[4096] = "";
    snprintf(cmd, sizeof(cmd), "%s/tools/info/tcomms-info --trace %s/trace.0.json %s/trace.1.json %s/trace.2.json",
             build ? build : ".", sh->dir, sh->dir, sh->dir);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return mrank_failf("FAIL: cannot run %s", cmd);
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    int rc = pclose(p);
    mrank_logf("test_flight: %s:\n%s(exit %d)", cmd, out, rc);
    if (strstr(out, "first divergence") == NULL || strstr(out, "#3") == NULL ||
        strstr(out, "rank 2: never posted") == NULL)
        return mrank_failf("FAIL: tcomms-info --trace does not name #3 and rank 2:\n%s", out);
    return 0;
}

/* (d): the root's rank 0 only splits; in 'pair' (root ranks 1, 2) the second member skips all_reduce #3. */
static int split_rank(tcomms_comm_t *world, shared_t *sh, int rank)
{
    static const int members[2] = {1, 2};
    tcomms_comm_t *pair = NULL;
    int fails = 0;
    tcomms_status_t st = tcomms_comm_split(world, members, rank == 0 ? 0 : 2, "pair", NULL, &pair);
    if (st != TCOMMS_SUCCESS)
        return mrank_failf("FAIL rank %d: split: %s", rank, tcomms_last_error());
    if (rank == 0) {
        while (!sh->checked)
            mrank_sleep_ms(20);
        return 0;
    }
    int prank = rank - 1;
    fails += warm_up(pair, prank, 2);
    if (prank == 1) {
        while (!sh->checked)
            mrank_sleep_ms(20);
    } else {
        float x[4] = {1, 1, 1, 1}, y[4];
        st = tcomms_all_reduce(pair, x, y, 4, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL);
        const char *msg = tcomms_last_error();
        mrank_logf("test_flight: %s, split, root rank %d: status %d: %s", sh->backend, rank, st, msg);
        fails += has(msg, "split", rank, "all_reduce #3 on 'pair' (16 B float32 sum) timed out after 1.5 s");
        fails += has(msg, "split", rank, "rank 1 never posted #3");
        fails += has(msg, "split", rank, "rank 1's last operation is broadcast #2 (4 B int32 root 0, completed)");
        sh->checked = 1;
    }
    tcomms_comm_destroy(pair);
    return fails;
}

static int flight_rank(int rank, int size, void *arg)
{
    shared_t *sh = arg;
    sh->pid[rank] = (int)getpid();
    if (sh->scenario == DUMP) {
        char path[200];
        snprintf(path, sizeof(path), "%s/trace", sh->dir);
        setenv("TCOMMS_TRACE_DUMP", path, 1);
    }
    tcomms_comm_t *comm = mrank_world(sh->backend, OP_TIMEOUT_MS, rank);
    if (comm == NULL)
        return 1;
    int fails = warm_up(comm, rank, size);
    const char *what = scenario_names[sh->scenario];
    if (sh->scenario == SPLIT) {
        fails += split_rank(comm, sh, rank);
        tcomms_comm_destroy(comm);
        return fails;
    }
    if (rank == LATE) {
        if (sh->scenario == STOPPED)
            raise(SIGSTOP); /* rank 0 kills it once checked */
        /* outside tcomms until the others have seen their timeouts */
        while (!sh->checked)
            mrank_sleep_ms(20);
        if (sh->scenario == DUMP)
            fails += files_written(sh, rank);
        tcomms_comm_destroy(comm);
        return fails;
    }
    float x[4] = {1, 1, 1, 1}, y[4];
    double t0 = mrank_now();
    tcomms_status_t st = tcomms_all_reduce(comm, x, y, 4, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL);
    const char *msg = tcomms_last_error();
    mrank_logf("test_flight: %s, %s, rank %d: status %d after %.1f s: %s", sh->backend, what, rank, st,
               mrank_now() - t0, msg);
    if (st != TCOMMS_ERR_TIMEOUT)
        fails += mrank_failf("FAIL rank %d, %s: status %d, expected TCOMMS_ERR_TIMEOUT", rank, what, st);
    fails += has(msg, what, rank, "all_reduce #3 on 'world' (16 B float32 sum) timed out after 1.5 s");
    if (sh->scenario == STOPPED) {
        fails += has(msg, what, rank, "rank 2 did not answer");
    } else {
        fails += has(msg, what, rank, "rank 2 never posted #3");
        fails += has(msg, what, rank, "rank 2's last operation is broadcast #2 (4 B int32 root 0, completed)");
    }
    /* the communicator's broken state keeps the message */
    if (tcomms_barrier(comm, NULL, NULL) == TCOMMS_SUCCESS || strstr(tcomms_last_error(), "never posted") == NULL)
        if (sh->scenario != STOPPED)
            fails += mrank_failf("FAIL rank %d, %s: the next call's message lacks the diagnosis: %s", rank, what,
                                 tcomms_last_error());
    mrank_host_barrier(&sh->barrier, 2, 1, 20);
    if (sh->scenario == DUMP && rank == 0)
        fails += files_written(sh, rank) + merge_names_divergence(sh);
    if (rank == 0) {
        sh->checked = 1;
        if (sh->scenario == STOPPED)
            kill(sh->pid[LATE], SIGKILL);
    }
    tcomms_comm_destroy(comm);
    return fails;
}

/* Read all of `path` into buf; 0 if absent. */
static int slurp(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
    return 1;
}

typedef struct hung {
    char backend[32];
    char dir[128];
    volatile int barrier;
    volatile int pid0;
} hung_t;

/* The line of operation #3 in `buf` (a dump) says `state`. */
static int third_is(const char *buf, const char *state)
{
    const char *at = strstr(buf, "\"seq\": 3, \"coll\": \"all_reduce\"");
    const char *end = at != NULL ? strchr(at, '\n') : NULL;
    char want[48];
    snprintf(want, sizeof(want), "\"state\": \"%s\"", state);
    const char *st = at != NULL ? strstr(at, want) : NULL;
    return st != NULL && (end == NULL || st < end);
}

static int hung_rank(int rank, int size, void *arg)
{
    (void)size;
    hung_t *h = arg;
    char path[200], file[220], buf[8192] = "";
    snprintf(path, sizeof(path), "%s/t", h->dir);
    snprintf(file, sizeof(file), "%s.0.json", path);
    setenv("TCOMMS_TRACE_DUMP", path, 1);
    setenv("TCOMMS_TRACE_DUMP_SIGNAL", "USR1", 1);
    tcomms_comm_t *comm = mrank_world(h->backend, OP_TIMEOUT_MS, rank);
    if (comm == NULL)
        return 1;
    int fails = warm_up(comm, rank, 2);
    if (rank == 0)
        h->pid0 = (int)getpid();
    mrank_host_barrier(&h->barrier, 2, 1, 20);
    float x[4] = {1, 1, 1, 1}, y[4] = {0, 0, 0, 0};
    tcomms_op_opts_t opts = {.field_mask = TCOMMS_OP_OPT_TIMEOUT, .timeout_ms = 20000};
    if (rank == 1) { /* rank 0 is inside #3 (or about to be): ask for its record until it shows #3 waiting */
        double until = mrank_now() + 15;
        do {
            mrank_sleep_ms(100);
            unlink(file);
            kill(h->pid0, SIGUSR1);
            for (int i = 0; i < 50 && !(slurp(file, buf, sizeof(buf)) && strstr(buf, "]}")); i++)
                mrank_sleep_ms(10);
        } while (!third_is(buf, "waiting") && mrank_now() < until);
        if (!third_is(buf, "waiting"))
            fails += mrank_failf("FAIL: rank 0's record lacks all_reduce #3 waiting:\n%s", buf);
    }
    if (tcomms_all_reduce(comm, x, y, 4, TCOMMS_FLOAT32, TCOMMS_SUM, &opts, NULL) != TCOMMS_SUCCESS || y[0] != 2)
        fails += mrank_failf("FAIL rank %d: all_reduce #3: %s", rank, tcomms_last_error());
    tcomms_comm_destroy(comm);
    return fails;
}

START_TEST(hung_call_is_recorded)
{
    hung_t *h = mrank_shared_alloc(sizeof *h);
    ck_assert_ptr_nonnull(h);
    snprintf(h->backend, sizeof(h->backend), "%s", mrank_backend(_i));
    snprintf(h->dir, sizeof(h->dir), "/tmp/tcomms-flight-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(h->dir));
    int failing = mrank_run(2, hung_rank, h, JOB_S);
    char cmd[200];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", h->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "test_flight: could not remove %s\n", h->dir);
    ck_assert_msg(failing == 0, "%s: %d rank(s) failed or died (see stderr)", h->backend, failing);
    mrank_shared_free(h, sizeof *h);
}
END_TEST

START_TEST(timeout_names_the_missing_rank)
{
    shared_t *sh = mrank_shared_alloc(sizeof *sh);
    ck_assert_ptr_nonnull(sh);
    snprintf(sh->backend, sizeof(sh->backend), "%s", mrank_backend(_i / SCENARIOS));
    sh->scenario = _i % SCENARIOS;
    snprintf(sh->dir, sizeof(sh->dir), "/tmp/tcomms-flight-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(sh->dir));
    int failing = mrank_run_ex(NRANKS, flight_rank, sh, JOB_S, sh->scenario == STOPPED ? 1u << LATE : 0);
    char cmd[200];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", sh->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "test_flight: could not remove %s\n", sh->dir);
    ck_assert_msg(failing == 0, "%s, %s: %d rank(s) failed or died (see stderr)", sh->backend,
                  scenario_names[sh->scenario], failing);
    mrank_shared_free(sh, sizeof *sh);
}
END_TEST


static int dump_alone(int rank, int size, void *arg)
{
    (void)size;
    const int *how = arg; /* 0: abort, 1: signal */
    char dir[] = "/tmp/tcomms-flight-XXXXXX", path[128], file[160], buf[8192];
    if (mkdtemp(dir) == NULL)
        return mrank_failf("FAIL: mkdtemp");
    snprintf(path, sizeof(path), "%s/t", dir);
    snprintf(file, sizeof(file), "%s.0.json", path);
    setenv("TCOMMS_TRACE_DUMP", path, 1);
    setenv("TCOMMS_TRACE_DUMP_SIGNAL", "USR1", 1);
    tcomms_comm_t *comm = mrank_world(mrank_backend(0), OP_TIMEOUT_MS, rank);
    if (comm == NULL)
        return 1;
    int fails = warm_up(comm, rank, 1);
    const char *why = *how ? "\"why\": \"signal\"" : "\"why\": \"tcomms_comm_abort\"";
    if (*how)
        raise(SIGUSR1);
    else
        tcomms_comm_abort(comm);
    double until = mrank_now() + 5;
    while (!(slurp(file, buf, sizeof(buf)) && strstr(buf, "]}")) && mrank_now() < until)
        mrank_sleep_ms(20);
    /* The ring keeps the arguments' op and root as given; a reader drops those the collective has not. */
    if (strstr(buf, why) == NULL || strstr(buf, "\"seq\": 2, \"coll\": \"broadcast\"") == NULL ||
        strstr(buf, "\"state\": \"completed\"") == NULL || strstr(buf, "\"op\": \"sum\", \"root\": -1,") == NULL ||
        strstr(buf, "\"op\": \"\", \"root\": 0,") == NULL)
        fails += mrank_failf("FAIL: %s lacks %s, all_reduce #1 or broadcast #2:\n%s", file, why, buf);
    tcomms_comm_destroy(comm);
    unlink(file);
    rmdir(dir);
    return fails;
}

START_TEST(dump_on_abort_and_signal)
{
    int how = _i;
    ck_assert_int_eq(mrank_run(1, dump_alone, &how, JOB_S), 0);
}
END_TEST

static void add_tests(Suite *s, int nbackends)
{
    TCase *tc = mrank_tcase(s, "flight", JOB_S + 10);
    tcase_add_loop_test(tc, timeout_names_the_missing_rank, 0, nbackends * SCENARIOS);
    tcase_add_loop_test(tc, dump_on_abort_and_signal, 0, 2);
    tcase_add_loop_test(tc, hung_call_is_recorded, 0, nbackends);
}

int main(void)
{
    return mrank_main("flight", MRANK_BACKEND, add_tests);
}
