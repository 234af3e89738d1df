/* SPDX-License-Identifier: BSD-3-Clause */
/* Multi-rank test harness: runs one function in N forked ranks that rendezvous over TCP loopback, bounds their time
 * and reaps every child, plus helpers children use to report failing cases and to meet outside tcomms. Used by
 * test_coll, test_split, test_peer_death and test_badinput; it knows nothing about tcomms itself. */
#ifndef TESTS_MRANK_H
#define TESTS_MRANK_H

#include <stddef.h>

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

/* The CPU backends to test, from TCOMMS_TEST_BACKENDS (space- or comma-separated). Returns how many were stored
 * into names[0..max) (each at most 31 characters). */
int mrank_backends(char names[][32], int max);

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
