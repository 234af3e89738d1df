/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of tools/run/tcomms-run (through tests/run_harness.c): the environment the ranks get (tcomms' and
 * torchrun's), output relay, CPU binding, and that failures, signals, timeouts and the launcher's own death take
 * every rank down. */
#include "config.h"
#include <check.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check_run.h"
#include "run_harness.h"

/* ---- environment and output ----------------------------------------------------------------------------------- */

/* Every rank's --print-env line, as run_child formats it from what the launcher must set. */
static void assert_env_lines(const launch_t *l, int nranks, int port, const char *backend, int tagged)
{
    int seen_port = port;
    if (port == 0) { /* a free port the launcher chose: read it from rank 0's line, then require it everywhere */
        const char *p = strstr(l->out, "port=");
        ck_assert_ptr_nonnull(p);
        seen_port = atoi(p + 5);
        ck_assert_int_gt(seen_port, 1); /* 1 is the stale TCOMMS_MASTER_PORT run_launcher plants */
        ck_assert_int_le(seen_port, 65535);
    }
    for (int r = 0; r < nranks; r++) {
        char prefix[16] = "", expect[512];
        if (tagged) snprintf(prefix, sizeof prefix, "[%d] ", r);
        snprintf(expect, sizeof expect,
                 "%srank=%d size=%d local_rank=%d local_size=%d addr=127.0.0.1 port=%d backend=%s\n", prefix, r,
                 nranks, r, nranks, seen_port, backend);
        /* a whole line: at the start of the output or right after a newline */
        const char *at = strstr(l->out, expect);
        while (at && at != l->out && at[-1] != '\n') at = strstr(at + 1, expect);
        ck_assert_msg(at, "missing line '%s' in stdout:\n%s", expect, l->out);
    }
    ck_assert_int_eq(count_lines(l->out), nranks);
}

START_TEST(test_all_ranks_succeed)
{
    const char *args[] = {"-n", "3", child, "--print-env", "--stderr-line", NULL};
    launch_t l = {0};
    run_launcher(args, &l);
    ck_assert_int_eq(exit_status(&l), 0);
    assert_env_lines(&l, 3, 0, "(unset)", 1);
    for (int r = 0; r < 3; r++) {
        char expect[64];
        snprintf(expect, sizeof expect, "[%d] stderr of rank %d\n", r, r);
        ck_assert_msg(strstr(l.err, expect), "missing '%s' in stderr:\n%s", expect, l.err);
    }
    ck_assert_int_eq(count_lines(l.err), 3);
    ck_assert_ptr_null(strstr(l.out, "stderr of"));
    launch_free(&l);
}
END_TEST

START_TEST(test_port_backend_untagged)
{
    const char *args[] = {"--port", "23456", "--backend", "gloo", "--no-tag-output", "-n", "2", child,
                          "--print-env", NULL};
    launch_t l = {0};
    run_launcher(args, &l);
    ck_assert_int_eq(exit_status(&l), 0);
    assert_env_lines(&l, 2, 23456, "gloo", 0);
    launch_free(&l);
}
END_TEST

START_TEST(test_backend_inherited)
{
    const char *args[] = {"-n1", child, "--print-env", NULL};
    launch_t l = {.backend = "ucx"};
    run_launcher(args, &l);
    ck_assert_int_eq(exit_status(&l), 0);
    assert_env_lines(&l, 1, 0, "ucx", 1);
    launch_free(&l);
}
END_TEST

/* mpirun's spelling of -n, separate and attached. */
START_TEST(test_np_alias)
{
    const char *sep[] = {"-np", "2", child, "--print-env", NULL};
    const char *attached[] = {"-np2", child, "--print-env", NULL};
    const char *const *forms[] = {sep, attached};
    for (int k = 0; k < 2; k++) {
        launch_t l = {0};
        run_launcher(forms[k], &l);
        ck_assert_int_eq(exit_status(&l), 0);
        assert_env_lines(&l, 2, 0, "(unset)", 1);
        launch_free(&l);
    }
}
END_TEST

START_TEST(test_program_args_untouched)
{
    const char *args[] = {"-n", "1", "--", child, "--args", "a b", "-n", "--help", NULL};
    launch_t l = {0};
    run_launcher(args, &l);
    ck_assert_int_eq(exit_status(&l), 0);
    ck_assert_str_eq(l.out, "[0] arg=a b\n[0] arg=-n\n[0] arg=--help\n");
    launch_free(&l);
}
END_TEST

/* The store's token and bind address of rank r ("[r] token=T bind=B"); 0 when the line is missing. */
static int rank_store(const char *out, int r, char *token, size_t token_len, char *bind, size_t bind_len)
{
    char head[32];
    snprintf(head, sizeof head, "[%d] token=", r);
    const char *p = strstr(out, head), *sp, *nl;
    if (!p || !(sp = strstr(p, " bind=")) || !(nl = strchr(sp, '\n'))) return 0;
    p += strlen(head);
    snprintf(token, token_len, "%.*s", (int)(sp - p), p);
    snprintf(bind, bind_len, "%.*s", (int)(nl - sp - 6), sp + 6);
    return 1;
}

/* Every rank of a job gets the same fresh token, 32 random bytes in hex, different from the next job's, and the
 * store bound to 127.0.0.1 (a stale TCOMMS_STORE_BIND_ADDR is replaced); a token the caller set is kept. */
START_TEST(test_store_token_and_bind)
{
    const char *args[] = {"-n", "3", child, "--print-store", NULL};
    char first[128] = "", token[128], bind[64];
    for (int job = 0; job < 3; job++) {
        launch_t l = {.token = job == 2 ? "caller-secret" : NULL};
        run_launcher(args, &l);
        ck_assert_int_eq(exit_status(&l), 0);
        char job_token[128] = "";
        for (int r = 0; r < 3; r++) {
            ck_assert_msg(rank_store(l.out, r, token, sizeof token, bind, sizeof bind), "stdout: %s", l.out);
            ck_assert_str_eq(bind, "127.0.0.1");
            if (r == 0) snprintf(job_token, sizeof job_token, "%s", token);
            ck_assert_str_eq(token, job_token);
        }
        if (job == 2) {
            ck_assert_str_eq(job_token, "caller-secret");
        } else {
            ck_assert_msg(strlen(job_token) == 64 && strspn(job_token, "0123456789abcdef") == 64,
                          "token '%s' is not 64 hex digits", job_token);
            ck_assert_msg(strcmp(job_token, first) != 0, "two jobs got the same token %s", job_token);
            snprintf(first, sizeof first, "%s", job_token);
        }
        launch_free(&l);
    }
}
END_TEST

/* What run_child --print-torch prints: torchrun's variables, then tcomms' to compare them with. */
typedef struct torch_env {
    int rank, world_size, local_rank, local_world_size, group_rank, port, tcomms_rank, tcomms_size, tcomms_port;
    char addr[64];
} torch_env_t;

/* Rank r's line ("[r] torch rank=0 ..."); 0 when it is missing or a variable is unset or not a number. */
static int rank_torch(const char *out, int r, torch_env_t *t)
{
    char head[32];
    snprintf(head, sizeof head, "[%d] torch ", r);
    const char *p = strstr(out, head);
    while (p && p != out && p[-1] != '\n') p = strstr(p + 1, head);
    return p && sscanf(p + strlen(head),
                       "rank=%d world_size=%d local_rank=%d local_world_size=%d group_rank=%d addr=%63s port=%d "
                       "tcomms_rank=%d tcomms_size=%d tcomms_port=%d",
                       &t->rank, &t->world_size, &t->local_rank, &t->local_world_size, &t->group_rank, t->addr,
                       &t->port, &t->tcomms_rank, &t->tcomms_size, &t->tcomms_port) == 10;
}

/* Every rank has torchrun's variables, agreeing with tcomms' (the stale ones run_launcher plants are replaced), and
 * MASTER_PORT is a second port, the same in every rank: `torch_port`, or (0) one other than TCOMMS_MASTER_PORT. */
static void check_torch_env(const char *const *args, int nranks, int port, int torch_port)
{
    launch_t l = {0};
    run_launcher(args, &l);
    ck_assert_int_eq(exit_status(&l), 0);
    torch_env_t t0 = {0};
    for (int r = 0; r < nranks; r++) {
        torch_env_t t;
        ck_assert_msg(rank_torch(l.out, r, &t), "no complete torch line of rank %d in:\n%s", r, l.out);
        ck_assert_int_eq(t.rank, r);
        ck_assert_int_eq(t.tcomms_rank, r);
        ck_assert_int_eq(t.world_size, nranks);
        ck_assert_int_eq(t.tcomms_size, nranks);
        ck_assert_int_eq(t.local_rank, r);
        ck_assert_int_eq(t.local_world_size, nranks);
        ck_assert_int_eq(t.group_rank, 0);
        ck_assert_str_eq(t.addr, "127.0.0.1");
        ck_assert_int_gt(t.port, 1); /* 1 is the stale MASTER_PORT */
        ck_assert_int_le(t.port, 65535);
        ck_assert_int_ne(t.port, t.tcomms_port);
        if (port) ck_assert_int_eq(t.tcomms_port, port);
        if (torch_port) ck_assert_int_eq(t.port, torch_port);
        if (r == 0) t0 = t;
        ck_assert_int_eq(t.port, t0.port);
        ck_assert_int_eq(t.tcomms_port, t0.tcomms_port);
    }
    ck_assert_int_eq(count_lines(l.out), nranks);
    launch_free(&l);
}

START_TEST(test_torch_env)
{
    const char *free_ports[] = {"-n", "3", child, "--print-torch", NULL};
    const char *port_only[] = {"--port", "23456", "-n", "2", child, "--print-torch", NULL};
    const char *both[] = {"--torch-port=23457", "--port", "23456", "-n", "2", child, "--print-torch", NULL};
    const char *torch_only[] = {"--torch-port", "23457", "-n", "2", child, "--print-torch", NULL};
    check_torch_env(free_ports, 3, 0, 0);
    check_torch_env(port_only, 2, 23456, 0);
    check_torch_env(both, 2, 23456, 23457);
    check_torch_env(torch_only, 2, 0, 23457);
}
END_TEST

/* The CPUs rank r printed ("[r] cpus 0,3,4"), as a set; 0 when the line is missing or malformed. */
static int rank_cpus(const char *out, int r, cpu_set_t *set)
{
    char head[32];
    snprintf(head, sizeof head, "[%d] cpus ", r);
    const char *p = strstr(out, head);
    if (p == NULL)
        return 0;
    CPU_ZERO(set);
    for (p += strlen(head); *p >= '0' && *p <= '9';) {
        char *end;
        long c = strtol(p, &end, 10);
        if (c < 0 || c >= CPU_SETSIZE)
            return 0;
        CPU_SET((int)c, set);
        p = *end == ',' ? end + 1 : end;
    }
    return *p == '\n';
}

/* --cpu-bind auto: every rank's CPUs are non-empty, disjoint from the others' (there are at least as many CPUs as
 * ranks here, else they are shared round robin), contiguous in the launcher's list, and together the launcher's;
 * without it every rank has all of them. Judged from properties, not recomputed. */
static void check_cpu_bind(int nranks, int bind)
{
    cpu_set_t all, seen;
    ck_assert_int_eq(sched_getaffinity(0, sizeof all, &all), 0);
    int m = CPU_COUNT(&all);
    char n[8];
    snprintf(n, sizeof n, "%d", nranks);
    const char *with[] = {"-n", n, "--cpu-bind", "auto", child, "--print-cpus", NULL};
    const char *without[] = {"-n", n, child, "--print-cpus", NULL};
    launch_t l = {0};
    run_launcher(bind ? with : without, &l);
    ck_assert_int_eq(exit_status(&l), 0);
    CPU_ZERO(&seen);
    for (int r = 0; r < nranks; r++) {
        cpu_set_t set, both;
        ck_assert_msg(rank_cpus(l.out, r, &set), "no cpus line of rank %d in:\n%s", r, l.out);
        ck_assert_msg(CPU_COUNT(&set) > 0, "rank %d has no CPU", r);
        CPU_AND(&both, &set, &all);
        ck_assert_msg(CPU_EQUAL(&both, &set), "rank %d runs on CPUs tcomms-run may not use", r);
        if (!bind) {
            ck_assert_msg(CPU_EQUAL(&set, &all), "rank %d was restricted without --cpu-bind", r);
            continue;
        }
        CPU_AND(&both, &set, &seen);
        ck_assert_msg(m < nranks || CPU_COUNT(&both) == 0, "rank %d shares a CPU with a lower rank", r);
        int first = -1, last = -1, inside = 0; /* contiguous among the launcher's CPUs */
        for (int c = 0; c < CPU_SETSIZE; c++) {
            if (!CPU_ISSET(c, &all))
                continue;
            if (CPU_ISSET(c, &set)) {
                first = first < 0 ? c : first;
                last = c;
            }
        }
        for (int c = first; c <= last; c++)
            inside += CPU_ISSET(c, &all) && !CPU_ISSET(c, &set);
        ck_assert_msg(inside == 0, "rank %d's CPUs are not one contiguous block", r);
        CPU_OR(&seen, &seen, &set);
    }
    ck_assert_msg(!bind || CPU_EQUAL(&seen, &all) || m < nranks, "the ranks' CPUs do not add up to the launcher's");
    launch_free(&l);
}

START_TEST(test_cpu_bind)
{
    check_cpu_bind(2, 1);
    check_cpu_bind(3, 1);
    check_cpu_bind(2, 0);
    const char *bad[] = {"-n", "2", "--cpu-bind", "sometimes", child, NULL};
    launch_t l = {0};
    run_launcher(bad, &l);
    ck_assert_int_eq(exit_status(&l), 2);
    ck_assert_msg(strstr(l.err, "--cpu-bind"), "stderr does not name --cpu-bind:\n%s", l.err);
    launch_free(&l);
}
END_TEST

/* Rank 0 reads the launcher's stdin when it is a pipe; the other ranks read /dev/null. */
START_TEST(test_stdin_to_rank0)
{
    const char *args[] = {"-n", "2", child, "--stdin", NULL};
    launch_t l = {.input = "hello\n"};
    run_launcher(args, &l);
    ck_assert_int_eq(exit_status(&l), 0);
    ck_assert_msg(strstr(l.out, "[0] stdin=hello\n") && strstr(l.out, "[1] stdin=\n"), "stdout: %s", l.out);
    launch_free(&l);
}
END_TEST

/* A 200000-byte line comes out in pieces of at most 64 KiB, each behind the prefix; untagged, byte for byte. */
START_TEST(test_long_and_partial_lines)
{
    const char *tagged[] = {"-n", "1", child, "--long", "200000", "--partial", "tail", NULL};
    const char *raw[] = {"-n", "1", "--no-tag-output", child, "--long", "200000", "--partial", "tail", NULL};
    launch_t l = {0};
    run_launcher(tagged, &l);
    ck_assert_int_eq(exit_status(&l), 0);
    size_t xs = 0;
    int pieces = 0;
    for (char *line = l.out, *nl; (nl = strchr(line, '\n')) != NULL; line = nl + 1) {
        ck_assert_int_eq(strncmp(line, "[0] ", 4), 0);
        size_t n = (size_t)(nl - line) - 4;
        if (line[4] == 'x') {
            ck_assert_uint_eq(strspn(line + 4, "x"), n);
            ck_assert_uint_le(n, 65536);
            xs += n;
            pieces++;
        } else {
            ck_assert_str_eq(line, "[0] tail\n");
        }
    }
    ck_assert_uint_eq(xs, 200000);
    ck_assert_int_eq(pieces, 4); /* 3 full 64 KiB pieces and the rest */
    launch_free(&l);

    run_launcher(raw, &l);
    ck_assert_int_eq(exit_status(&l), 0);
    ck_assert_uint_eq(l.out_len, 200000 + 1 + 4);
    ck_assert_uint_eq(strspn(l.out, "x"), 200000);
    ck_assert_str_eq(l.out + 200000, "\ntail");
    launch_free(&l);
}
END_TEST

/* ---- failures and clean-up ------------------------------------------------------------------------------------ */

START_TEST(test_rank_exits_nonzero)
{
    char *dir = make_dir();
    const char *args[] = {"-n", "3", child, "--pid-dir", dir, "--exit-rank", "1", "3", "--sleep", "60", NULL};
    launch_t l = {.pid_dir = dir, .nranks = 3};
    run_launcher(args, &l);
    ck_assert_int_eq(exit_status(&l), 3);
    ck_assert_msg(strstr(l.err, "tcomms-run: rank 1 exited with status 3\n"), "stderr: %s", l.err);
    ck_assert_ptr_null(strstr(l.err, "rank 0 "));
    assert_nothing_left(dir, 3);
    launch_free(&l);
    remove_dir(dir);
}
END_TEST

START_TEST(test_rank_killed_by_signal)
{
    char *dir = make_dir();
    const char *args[] = {"-n", "2", child, "--pid-dir", dir, "--kill-rank", "0", "--sleep", "60", NULL};
    launch_t l = {.pid_dir = dir, .nranks = 2};
    run_launcher(args, &l);
    ck_assert_int_eq(exit_status(&l), 128 + SIGKILL);
    ck_assert_msg(strstr(l.err, "tcomms-run: rank 0 was killed by signal 9 (SIGKILL)\n"), "stderr: %s", l.err);
    assert_nothing_left(dir, 2);
    launch_free(&l);
    remove_dir(dir);
}
END_TEST

/* Ranks that ignore SIGTERM, and their descendants, still go: SIGKILL follows the grace period. */
START_TEST(test_sigterm_ignored_escalates)
{
    char *dir = make_dir();
    const char *args[] = {"-n", "3", child, "--pid-dir", dir, "--ignore-term", "--grandchild", "--exit-rank", "2", "5",
                          "--sleep", "60", NULL};
    launch_t l = {.pid_dir = dir, .nranks = 3};
    run_launcher(args, &l);
    ck_assert_int_eq(exit_status(&l), 5);
    ck_assert_msg(strstr(l.err, "rank 2 exited with status 5"), "stderr: %s", l.err);
    ck_assert_msg(strstr(l.err, "SIGKILL"), "stderr: %s", l.err);
    for (int r = 0; r < 3; r++) ck_assert_int_gt(read_pid(dir, "gpid", r), 0);
    assert_nothing_left(dir, 3);
    launch_free(&l);
    remove_dir(dir);
}
END_TEST

/* All ranks succeed but leave a descendant behind, holding their output open or not, ignoring SIGTERM or not: it is
 * killed, and the status is 0. */
START_TEST(test_leftover_descendants)
{
    char *dir = make_dir();
    const char *args[] = {"-n", "2", child, "--pid-dir", dir, _i ? "--quiet-grandchild" : "--grandchild", "--print-env",
                          _i == 2 ? "--ignore-term" : NULL, NULL};
    launch_t l = {.pid_dir = dir, .nranks = 2};
    run_launcher(args, &l);
    ck_assert_int_eq(exit_status(&l), 0);
    assert_env_lines(&l, 2, 0, "(unset)", 1);
    assert_nothing_left(dir, 2);
    launch_free(&l);
    remove_dir(dir);
}
END_TEST

/* The reader of the launcher's stdout goes away: the ranks get SIGPIPE, as they would without a launcher. */
START_TEST(test_stdout_reader_gone)
{
    char *dir = make_dir();
    const char *args[] = {"-n", "2", child, "--pid-dir", dir, "--yes", "15000", NULL};
    launch_t l = {.pid_dir = dir, .nranks = 2, .close_stdout = 1};
    run_launcher(args, &l);
    ck_assert_int_eq(exit_status(&l), 128 + SIGPIPE);
    ck_assert_msg(strstr(l.err, "was killed by signal 13 (SIGPIPE)"), "stderr: %s", l.err);
    assert_nothing_left(dir, 2);
    launch_free(&l);
    remove_dir(dir);
}
END_TEST

static const int forwarded[] = {SIGTERM, SIGINT, SIGHUP};

START_TEST(test_signal_forwarded)
{
    int sig = forwarded[_i];
    char *dir = make_dir();
    const char *args[] = {"-n", "2", child, "--pid-dir", dir, "--trap", "--sleep", "60", NULL};
    launch_t l = {.pid_dir = dir, .nranks = 2, .signal = sig};
    run_launcher(args, &l);
    ck_assert_int_eq(exit_status(&l), 128 + sig);
    for (int r = 0; r < 2; r++) ck_assert_int_eq(read_pid(dir, "sig", r), sig); /* what each rank's trap saw */
    assert_nothing_left(dir, 2);
    launch_free(&l);
    remove_dir(dir);
}
END_TEST

/* SIGKILL to the launcher, which can forward nothing: its ranks die with it (parent-death signal), within 1 s. */
START_TEST(test_launcher_killed)
{
    char *dir = make_dir();
    const char *args[] = {"-n", "3", child, "--pid-dir", dir, "--sleep", "60", NULL};
    launch_t l = {.pid_dir = dir, .nranks = 3, .signal = SIGKILL};
    run_launcher(args, &l);
    int64_t end = now_ms() + 1000;
    ck_assert_int_eq(exit_status(&l), 1000 + SIGKILL);
    for (int r = 0; r < 3; r++) {
        pid_t p = read_pid(dir, "pid", r);
        while (p > 0 && !gone(p) && now_ms() < end) sleep_ms(10);
        if (p > 0 && !gone(p)) {
            kill_recorded(dir, 3);
            ck_abort_msg("rank %d (pid %d) still runs 1 s after tcomms-run was killed", r, (int)p);
        }
    }
    assert_nothing_left(dir, 3);
    launch_free(&l);
    remove_dir(dir);
}
END_TEST

START_TEST(test_timeout)
{
    char *dir = make_dir();
    const char *args[] = {"--timeout", "0.5", "-n", "2", child, "--pid-dir", dir, "--sleep", "60", NULL};
    launch_t l = {.pid_dir = dir, .nranks = 2};
    run_launcher(args, &l);
    ck_assert_int_eq(exit_status(&l), 124);
    ck_assert_msg(strstr(l.err, "tcomms-run: timed out after 0.5 s"), "stderr: %s", l.err);
    assert_nothing_left(dir, 2);
    launch_free(&l);
    remove_dir(dir);
}
END_TEST

START_TEST(test_missing_program)
{
    const char *names[] = {"/nonexistent/tcomms-no-such-program", "tcomms-no-such-program-on-path"};
    for (int k = 0; k < 2; k++) {
        const char *args[] = {"-n", "3", names[k], NULL};
        launch_t l = {0};
        run_launcher(args, &l);
        ck_assert_int_eq(exit_status(&l), 127);
        ck_assert_msg(strstr(l.err, names[k]) && strstr(l.err, "No such file"), "stderr: %s", l.err);
        ck_assert_str_eq(l.out, "");
        launch_free(&l);
    }
    assert_nothing_left(NULL, 0); /* no recorded pids: only "no descendant" */
}
END_TEST

/* A file that exists but is no program (no "#!" line; not executable) is 126, as with posix_spawnp: never run
 * through /bin/sh behind the user's back. */
START_TEST(test_not_executable)
{
    char *dir = make_dir(), path[PATH_MAX];
    snprintf(path, sizeof path, "%s/script", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("echo ran through sh\n", f);
    fclose(f);
    const char *says[] = {"Exec format error", "Permission denied"};
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(chmod(path, k == 0 ? 0755 : 0644), 0);
        const char *args[] = {"-n", "2", path, NULL};
        launch_t l = {0};
        run_launcher(args, &l);
        ck_assert_int_eq(exit_status(&l), 126);
        ck_assert_msg(strstr(l.err, says[k]), "stderr: %s", l.err);
        ck_assert_str_eq(l.out, "");
        launch_free(&l);
    }
    assert_nothing_left(NULL, 0);
    remove_dir(dir);
}
END_TEST

/* ---- command line --------------------------------------------------------------------------------------------- */

static const struct {
    const char *args[8];
    const char *says;
} bad_flags[] = {
    {{NULL}, "missing -n"},
    {{"-n", NULL}, "needs a value"},
    {{"-n", "2", NULL}, "missing PROGRAM"},
    {{"-n", "0", "prog", NULL}, "'0'"},
    {{"-n", "-1", "prog", NULL}, "'-1'"},
    {{"-n", "abc", "prog", NULL}, "'abc'"},
    {{"-n", "3x", "prog", NULL}, "'3x'"},
    {{"-n", "5000", "prog", NULL}, "'5000'"},
    {{"-n", "2", "--bogus", "prog", NULL}, "unknown option '--bogus'"},
    {{"prog", NULL}, "missing -n"},
    {{"-n", "2", "--timeout", "0", "prog", NULL}, "--timeout"},
    {{"-n", "2", "--timeout", "soon", "prog", NULL}, "'soon'"},
    {{"-n", "2", "--port", "70000", "prog", NULL}, "'70000'"},
    {{"-n", "2", "--port=", "prog", NULL}, "--port"},
    {{"-n", "2", "--torch-port", "0", "prog", NULL}, "--torch-port needs a port from 1 to 65535, not '0'"},
    {{"-n", "2", "--torch-port", "70000", "prog", NULL}, "'70000'"},
    {{"-n", "2", "--torch-port", "abc", "prog", NULL}, "'abc'"},
    {{"-n", "2", "--torch-port=", "prog", NULL}, "--torch-port"},
    {{"-n", "2", "--port", "23456", "--torch-port", "23456", "prog", NULL}, "--torch-port must differ from --port"},
    {{"-n", "2", "--backend", "", "prog", NULL}, "--backend"},
};

START_TEST(test_bad_flags)
{
    launch_t l = {0};
    run_launcher(bad_flags[_i].args, &l);
    ck_assert_int_eq(exit_status(&l), 2);
    ck_assert_msg(strncmp(l.err, "tcomms-run: ", 12) == 0 && strstr(l.err, bad_flags[_i].says) &&
                      strstr(l.err, "--help"),
                  "case %d: stderr: %s", _i, l.err);
    ck_assert_str_eq(l.out, "");
    launch_free(&l);
}
END_TEST

START_TEST(test_help_and_version)
{
    const char *help[] = {"--help", NULL}, *version[] = {"--version", NULL};
    launch_t l = {0};
    run_launcher(help, &l);
    ck_assert_int_eq(exit_status(&l), 0);
    ck_assert_int_eq(strncmp(l.out, "Usage: tcomms-run -n N", 22), 0);
    launch_free(&l);
    run_launcher(version, &l);
    ck_assert_int_eq(exit_status(&l), 0);
    ck_assert_str_eq(l.out, "tcomms-run (tcomms) " PACKAGE_VERSION "\n");
    launch_free(&l);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tcomms-run");
    TCase *tc = tcase_create("launcher");
    tcase_add_checked_fixture(tc, harness_setup, NULL);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_all_ranks_succeed);
    tcase_add_test(tc, test_port_backend_untagged);
    tcase_add_test(tc, test_cpu_bind);
    tcase_add_test(tc, test_backend_inherited);
    tcase_add_test(tc, test_store_token_and_bind);
    tcase_add_test(tc, test_torch_env);
    tcase_add_test(tc, test_np_alias);
    tcase_add_test(tc, test_program_args_untouched);
    tcase_add_test(tc, test_stdin_to_rank0);
    tcase_add_test(tc, test_long_and_partial_lines);
    tcase_add_test(tc, test_rank_exits_nonzero);
    tcase_add_test(tc, test_rank_killed_by_signal);
    tcase_add_test(tc, test_sigterm_ignored_escalates);
    tcase_add_loop_test(tc, test_leftover_descendants, 0, 3);
    tcase_add_test(tc, test_stdout_reader_gone);
    tcase_add_loop_test(tc, test_signal_forwarded, 0, (int)(sizeof forwarded / sizeof forwarded[0]));
    tcase_add_test(tc, test_launcher_killed);
    tcase_add_test(tc, test_timeout);
    tcase_add_test(tc, test_missing_program);
    tcase_add_test(tc, test_not_executable);
    tcase_add_loop_test(tc, test_bad_flags, 0, (int)(sizeof bad_flags / sizeof bad_flags[0]));
    tcase_add_test(tc, test_help_and_version);
    suite_add_tcase(s, tc);

    return check_run(s);
}
