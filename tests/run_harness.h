/* SPDX-License-Identifier: BSD-3-Clause */
/* How tests/test_run.c drives tools/run/tcomms-run: the built launcher ($TCOMMS_RUN) starts tests/run_child
 * ($RUN_CHILD), and each test checks from outside what reached the ranks, what came out, the exit status, and that
 * no process is left. The test process makes itself a child subreaper, so what the launcher leaves becomes its. */
#ifndef TESTS_RUN_HARNESS_H
#define TESTS_RUN_HARNESS_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define LAUNCH_LIMIT_MS 20000 /* the longest a launch may take before the test kills it and fails */
#define GONE_LIMIT_MS 3000    /* SIGKILLed processes must be gone this soon after the launcher returns */

/* The launcher and the child program, found by harness_setup. */
extern char launcher[PATH_MAX], child[PATH_MAX];

typedef struct launch {
    const char *pid_dir; /* where run_child records pids (NULL: none) */
    int nranks;          /* with `signal`: how many pid.R files to wait for */
    int signal;          /* sent to the launcher once every rank has recorded its pid; 0: none */
    const char *backend; /* TCOMMS_BACKEND in the launcher's environment (NULL: unset) */
    int close_stdout;    /* stop reading the launcher's stdout once something came, as `| head -1` would */
    const char *input;   /* the launcher's stdin comes from a pipe holding this (NULL: inherited) */
    const char *token;   /* TCOMMS_STORE_TOKEN in the launcher's environment (NULL: unset) */
    int status;          /* wait status of tcomms-run */
    char *out, *err;
    size_t out_len, err_len;
} launch_t;

/* A checked fixture: find both programs ($TCOMMS_RUN, $RUN_CHILD, else next to this binary), become a subreaper. */
void harness_setup(void);
int64_t now_ms(void);
void sleep_ms(long ms);

/* Run tcomms-run with `args` (NULL-terminated), collecting its output and wait status into *l. The launcher's
 * environment carries stale TCOMMS_* values (rank 99, master 10.0.0.1:1, store bound to 0.0.0.0) and torchrun's
 * (RANK 99, GROUP_RANK 7, MASTER_ADDR 10.0.0.1, MASTER_PORT 1) that it must override. Fails the test when the launch takes over LAUNCH_LIMIT_MS. */
void run_launcher(const char *const *args, launch_t *l);
void launch_free(launch_t *l);
/* tcomms-run's exit status, or 1000 + the signal that killed it. */
int exit_status(const launch_t *l);
int count_lines(const char *text);

/* A fresh directory for run_child's pid files, and its removal with everything in it (dir is freed). */
char *make_dir(void);
void remove_dir(char *dir);
/* The pid run_child recorded in dir/prefix.rank (pid, gpid, sig), or 0. */
pid_t read_pid(const char *dir, const char *prefix, int rank);
/* The process is gone or a zombie (reaped when it became ours); wait_gone polls for it up to GONE_LIMIT_MS. */
int gone(pid_t pid);
int wait_gone(pid_t pid);
/* SIGKILL whatever a run recorded in dir (after a failed check, so nothing outlives the test). */
void kill_recorded(const char *dir, int nranks);
/* Every pid run_child recorded is gone, and no other descendant of this test remains. */
void assert_nothing_left(const char *dir, int nranks);

#endif
