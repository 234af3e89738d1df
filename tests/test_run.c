/* Tests of tools/run/tcomms-run: the built launcher ($TCOMMS_RUN) starts tests/run_child ($RUN_CHILD), and each
 * test checks from outside what reached the ranks, what came out, the exit status, and that no process is left.
 * The test process makes itself a child subreaper, so any descendant the launcher leaves behind becomes ours. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "check_run.h"

#define LAUNCH_LIMIT_MS 20000 /* the longest a launch may take before the test kills it and fails */
#define GONE_LIMIT_MS 3000    /* SIGKILLed processes must be gone this soon after the launcher returns */

static char launcher[PATH_MAX], child[PATH_MAX];

typedef struct launch {
    const char *pid_dir; /* where run_child records pids (NULL: none) */
    int nranks;          /* with `signal`: how many pid.R files to wait for */
    int signal;          /* sent to the launcher once every rank has recorded its pid; 0: none */
    const char *backend; /* TCOMMS_BACKEND in the launcher's environment (NULL: unset) */
    int close_stdout;    /* stop reading the launcher's stdout once something came, as `| head -1` would */
    const char *input;   /* the launcher's stdin comes from a pipe holding this (NULL: inherited) */
    int status;          /* wait status of tcomms-run */
    char *out, *err;
    size_t out_len, err_len;
} launch_t;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* $NAME, else a path next to this test binary (tests/ and tools/run/ in the build tree). */
static void locate(char *out, const char *name, const char *relative)
{
    const char *v = getenv(name);
    if (v && *v) {
        snprintf(out, PATH_MAX, "%s", v);
        return;
    }
    char self[PATH_MAX - 64]; /* room for the relative part */
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(self, '/');
    if (slash) *slash = '\0';
    snprintf(out, PATH_MAX, "%s/%s", self, relative);
}

static void setup(void)
{
    locate(launcher, "TCOMMS_RUN", "../tools/run/tcomms-run");
    locate(child, "RUN_CHILD", "run_child");
    ck_assert_msg(access(launcher, X_OK) == 0, "tcomms-run not found at %s (set TCOMMS_RUN)", launcher);
    ck_assert_msg(access(child, X_OK) == 0, "run_child not found at %s (set RUN_CHILD)", child);
    ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
}

static pid_t read_pid(const char *dir, const char *prefix, int rank)
{
    char path[PATH_MAX];
    long pid = 0;
    snprintf(path, sizeof path, "%s/%s.%d", dir, prefix, rank);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    if (fscanf(f, "%ld", &pid) != 1) pid = 0;
    fclose(f);
    return (pid_t)pid;
}

/* Gone: no such process, or a zombie (dead; its reaper's business). Reaps it when it became our child. */
static int gone(pid_t pid)
{
    char path[64], stat[256] = "";
    waitpid(pid, NULL, WNOHANG);
    if (kill(pid, 0) != 0 && errno == ESRCH) return 1;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 1;
    size_t n = fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    stat[n] = '\0';
    const char *paren = strrchr(stat, ')');
    return paren && (paren[2] == 'Z' || paren[2] == 'X');
}

static int wait_gone(pid_t pid)
{
    for (int64_t end = now_ms() + GONE_LIMIT_MS; now_ms() < end; sleep_ms(10))
        if (gone(pid)) return 1;
    return gone(pid);
}

/* Kill whatever a run recorded in dir (after a failed check, so nothing outlives the test). */
static void kill_recorded(const char *dir, int nranks)
{
    for (int r = 0; dir && r < nranks; r++) {
        pid_t p = read_pid(dir, "pid", r), g = read_pid(dir, "gpid", r);
        if (p > 0) {
            kill(-p, SIGKILL);
            kill(p, SIGKILL);
        }
        if (g > 0) kill(g, SIGKILL);
    }
    for (int64_t end = now_ms() + 1000; waitpid(-1, NULL, WNOHANG) >= 0 && now_ms() < end;) /* orphans are ours */
        sleep_ms(10);
}

/* Every pid run_child recorded is gone, and no other descendant of this test remains. */
static void assert_nothing_left(const char *dir, int nranks)
{
    for (int r = 0; r < nranks; r++) {
        const char *kinds[] = {"pid", "gpid"};
        for (int k = 0; k < 2; k++) {
            pid_t p = read_pid(dir, kinds[k], r);
            if (p > 0 && !wait_gone(p)) {
                kill_recorded(dir, nranks);
                ck_abort_msg("%s of rank %d (%d) outlived tcomms-run", kinds[k], r, (int)p);
            }
        }
    }
    int64_t end = now_ms() + GONE_LIMIT_MS;
    pid_t w;
    while ((w = waitpid(-1, NULL, WNOHANG)) >= 0 && now_ms() < end)
        if (w == 0) sleep_ms(10);
    ck_assert_msg(w < 0 && errno == ECHILD, "a descendant of tcomms-run is still alive");
}

static int pids_recorded(const launch_t *l)
{
    for (int r = 0; r < l->nranks; r++)
        if (read_pid(l->pid_dir, "pid", r) <= 0) return 0;
    return 1;
}

static void append(char **buf, size_t *len, const char *data, size_t n)
{
    *buf = realloc(*buf, *len + n + 1);
    ck_assert_ptr_nonnull(*buf);
    memcpy(*buf + *len, data, n);
    *len += n;
    (*buf)[*len] = '\0';
}

/* Run tcomms-run with `args` (NULL-terminated), collecting its output and wait status into *l. The launcher's
 * environment carries stale TCOMMS_* values that it must override. */
static void run_launcher(const char *const *args, launch_t *l)
{
    const char *argv[64] = {launcher};
    int n = 1, out[2], err[2];
    for (; args[n - 1] && n < 63; n++) argv[n] = args[n - 1];
    argv[n] = NULL;
    l->out = l->err = NULL;
    l->out_len = l->err_len = 0;
    append(&l->out, &l->out_len, "", 0);
    append(&l->err, &l->err_len, "", 0);
    ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
    ck_assert_int_eq(pipe2(err, O_CLOEXEC), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(out[1], 1);
        dup2(err[1], 2);
        /* a background `make check` may ignore SIGINT; the launcher would then rightly keep ignoring it */
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        int in[2];
        if (l->input && pipe(in) == 0) {
            if (write(in[1], l->input, strlen(l->input)) < 0) _exit(125);
            close(in[1]);
            dup2(in[0], 0);
        }
        setenv("TCOMMS_RANK", "99", 1);
        setenv("TCOMMS_SIZE", "99", 1);
        setenv("TCOMMS_LOCAL_RANK", "99", 1);
        setenv("TCOMMS_MASTER_ADDR", "10.0.0.1", 1);
        setenv("TCOMMS_MASTER_PORT", "1", 1);
        if (l->backend) setenv("TCOMMS_BACKEND", l->backend, 1);
        else unsetenv("TCOMMS_BACKEND");
        execv(launcher, (char *const *)argv);
        _exit(126);
    }
    close(out[1]);
    close(err[1]);
    struct pollfd pfd[2] = {{.fd = out[0], .events = POLLIN}, {.fd = err[0], .events = POLLIN}};
    int open_fds = 2, signalled = 0, exited = 0;
    int64_t end = now_ms() + LAUNCH_LIMIT_MS;
    while ((open_fds > 0 || !exited) && now_ms() < end) {
        if (l->signal && !signalled && pids_recorded(l)) {
            kill(pid, l->signal);
            signalled = 1;
        }
        if (!exited && waitpid(pid, &l->status, WNOHANG) == pid) exited = 1;
        if (open_fds == 0 || poll(pfd, 2, 20) <= 0) {
            if (open_fds == 0) sleep_ms(10);
            continue;
        }
        for (int i = 0; i < 2; i++) {
            char buf[65536];
            if (pfd[i].fd < 0 || !pfd[i].revents) continue;
            ssize_t got = read(pfd[i].fd, buf, sizeof buf);
            if (got > 0) append(i ? &l->err : &l->out, i ? &l->err_len : &l->out_len, buf, (size_t)got);
            if ((got > 0 && i == 0 && l->close_stdout) || (got <= 0 && (got == 0 || errno != EINTR))) {
                close(pfd[i].fd);
                pfd[i].fd = -1;
                open_fds--;
            }
        }
    }
    for (int i = 0; i < 2; i++)
        if (pfd[i].fd >= 0) close(pfd[i].fd);
    if (!exited) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        kill_recorded(l->pid_dir, l->nranks);
        ck_abort_msg("tcomms-run did not finish within %d ms; stderr: %s", LAUNCH_LIMIT_MS, l->err);
    }
}

static void launch_free(launch_t *l)
{
    free(l->out);
    free(l->err);
}

static char *make_dir(void)
{
    char *dir = strdup("/tmp/tcomms-run-test.XXXXXX");
    ck_assert_ptr_nonnull(dir);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    return dir;
}

static void remove_dir(char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[PATH_MAX];
    while (d && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d) closedir(d);
    rmdir(dir);
    free(dir);
}

static int exit_status(const launch_t *l)
{
    return WIFEXITED(l->status) ? WEXITSTATUS(l->status) : 1000 + WTERMSIG(l->status);
}

static int count_lines(const char *text)
{
    int n = 0;
    for (; *text; text++) n += *text == '\n';
    return n;
}

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
    ck_assert_str_eq(l.out, "tcomms-run 0.1.0\n");
    launch_free(&l);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tcomms-run");
    TCase *tc = tcase_create("launcher");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_all_ranks_succeed);
    tcase_add_test(tc, test_port_backend_untagged);
    tcase_add_test(tc, test_cpu_bind);
    tcase_add_test(tc, test_backend_inherited);
    tcase_add_test(tc, test_program_args_untouched);
    tcase_add_test(tc, test_stdin_to_rank0);
    tcase_add_test(tc, test_long_and_partial_lines);
    tcase_add_test(tc, test_rank_exits_nonzero);
    tcase_add_test(tc, test_rank_killed_by_signal);
    tcase_add_test(tc, test_sigterm_ignored_escalates);
    tcase_add_loop_test(tc, test_leftover_descendants, 0, 3);
    tcase_add_test(tc, test_stdout_reader_gone);
    tcase_add_loop_test(tc, test_signal_forwarded, 0, (int)(sizeof forwarded / sizeof forwarded[0]));
    tcase_add_test(tc, test_timeout);
    tcase_add_test(tc, test_missing_program);
    tcase_add_loop_test(tc, test_bad_flags, 0, (int)(sizeof bad_flags / sizeof bad_flags[0]));
    tcase_add_test(tc, test_help_and_version);
    suite_add_tcase(s, tc);

    return check_run(s);
}
