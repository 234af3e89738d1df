/* SPDX-License-Identifier: BSD-3-Clause */
/* Multi-rank test harness: runs one function in N forked ranks that rendezvous over TCP loopback, bounds their time
 * and reaps every child, plus helpers children use to report failing cases and to meet outside tcomms, and the
 * main() of every multi-rank Check program (mrank_main). It knows nothing about tcomms itself (mrank_world.h does). */
#ifndef TESTS_MRANK_H
#define TESTS_MRANK_H

#include <check.h>
#include <stddef.h>

/* ---- a program's main() ------------------------------------------------------------------------------------------ */

#define MRANK_MAX_BACKENDS 8

/* What a program needs of TCOMMS_TEST_BACKENDS (the CPU backends the build has) before its tests can run. */
typedef enum mrank_needs {
    MRANK_ANY,     /* nothing: with an empty list the tests run over no backend (add sees 0) */
    MRANK_BACKEND, /* one backend at least, else the whole program is skipped */
    MRANK_UCX,     /* the UCX backend, else the whole program is skipped */
    MRANK_DEFAULT  /* an empty list stands for one backend, "": the library's default selection */
} mrank_needs_t;

/* The whole main() of a multi-rank Check program: read TCOMMS_TEST_BACKENDS (mrank_backend), and where `needs` is
 * not met print why and return 77, which automake counts as SKIP; else let `add` put the tests into suite `name`
 * (test cases through mrank_tcase, loops over `nbackends`), run it, and return EXIT_SUCCESS when every test
 * passed, else EXIT_FAILURE. Messages read "test_<name>: ...". */
int mrank_main(const char *name, mrank_needs_t needs, void (*add)(Suite *s, int nbackends));

/* A test case `name` of `s` whose tests may each run `timeout_s` seconds (0: Check's default, 4 s unless
 * CK_DEFAULT_TIMEOUT says otherwise). */
TCase *mrank_tcase(Suite *s, const char *name, int timeout_s);

/* The backends mrank_main read, and backend i of them (0 <= i < mrank_nbackends()); "" is MRANK_DEFAULT's stand-in
 * for the library's default. */
int mrank_nbackends(void);
const char *mrank_backend(int i);

/* The rank counts a table test runs, into counts[0..max): TCOMMS_TEST_RANKS ("2 4", each in min..max), else min
 * up to TCOMMS_TEST_MAX_RANKS (default 4). Returns how many, or -1 when either variable is malformed. */
int mrank_rank_counts(int min, int max, int counts[]);

/* Seconds a job on `nranks` ranks may take, `base_s` up to 4 ranks: more ranks oversubscribe a small machine. */
int mrank_job_timeout(int base_s, int nranks);

/* ---- ranks ------------------------------------------------------------------------------------------------------- */

/* Runs in each child; returns the number of failures it saw (0 = pass). */
typedef int (*mrank_fn_t)(int rank, int size, void *arg);

/* Pick a free port on 127.0.0.1, fork `nranks` children with TCOMMS_RANK/SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT
 * set, run fn in each and _exit with min(failures, 100). Waits at most `timeout_s`; on timeout, or 2 s after one
 * child fails, the rest are SIGKILLed. Every child is reaped before returning; per-rank diagnostics go to stderr.
 * Returns the number of failing ranks (0 = all passed), or nranks when the job could not start. */
int mrank_run(int nranks, mrank_fn_t fn, void *arg, int timeout_s);

/* As mrank_run, where ranks set in `expect_killed` (bit r = rank r) must end by SIGKILL (they kill themselves);
 * such a death is neither a failure nor a reason to stop the others. */
int mrank_run_ex(int nranks, mrank_fn_t fn, void *arg, int timeout_s, unsigned expect_killed);

/* A TCP port free on 127.0.0.1, chosen below the kernel's ephemeral range, or -1. */
int mrank_free_port(void);

/* Open file descriptors of this process (entries of /proc/self/fd), or -1: for leak checks. */
int mrank_count_fds(void);

/* Seconds on CLOCK_MONOTONIC. */
double mrank_now(void);

/* Sleep `ms` milliseconds. */
void mrank_sleep_ms(int ms);

/* Zero-filled memory shared by the parent and every child forked after the call (anonymous MAP_SHARED), or NULL. */
void *mrank_shared_alloc(size_t len);
void mrank_shared_free(void *p, size_t len);

/* A barrier outside tcomms over a shared counter: every one of `size` ranks calls it with the same `round`
 * (1, 2, ...). Returns 0, or -1 after `timeout_s` without the others. */
int mrank_host_barrier(volatile int *counter, int size, int round, int timeout_s);

/* One case of a table, as shown in a failure line. Unused fields: NULL strings, -1 integers. */
typedef struct mrank_case {
    const char *coll;    /* "all_reduce" */
    const char *dtype;   /* "bfloat16" */
    const char *op;      /* "sum" */
    const char *variant; /* extra detail: "counts {4,0,9,1} gapped" */
    long long count;
    int inplace;
    int root;
    int rank;
    int reported; /* failure lines printed so far for this case */
} mrank_case_t;

/* Report element `index` of buffer `what` holding `got` where `expected` was due (NaN expected = "untouched").
 * Prints at most a few lines per case, as one write() each so ranks do not interleave. */
void mrank_case_fail(mrank_case_t *c, const char *what, long long index, double got, double expected);

/* Report a call that returned `status` (with the library's message `detail`, may be NULL). */
void mrank_case_status(mrank_case_t *c, const char *call, int status, const char *detail);

/* printf to stderr as one write(), prefixed by "[pid] ". */
void mrank_logf(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* mrank_logf, then return 1: `fails += mrank_failf("FAIL ...", ...);`. */
int mrank_failf(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

#endif
