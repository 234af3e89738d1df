/* SPDX-License-Identifier: BSD-3-Clause */
/* The harness of tests/test_run.c (declared in run_harness.h): running the built tcomms-run on tests/run_child,
 * collecting what comes out, and checking from outside that no process it started is left. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "run_harness.h"

char launcher[PATH_MAX], child[PATH_MAX];


int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sleep_ms(long ms)
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

void harness_setup(void)
{
    locate(launcher, "TCOMMS_RUN", "../tools/run/tcomms-run");
    locate(child, "RUN_CHILD", "run_child");
    ck_assert_msg(access(launcher, X_OK) == 0, "tcomms-run not found at %s (set TCOMMS_RUN)", launcher);
    ck_assert_msg(access(child, X_OK) == 0, "run_child not found at %s (set RUN_CHILD)", child);
    ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
}

pid_t read_pid(const char *dir, const char *prefix, int rank)
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
int gone(pid_t pid)
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

int wait_gone(pid_t pid)
{
    for (int64_t end = now_ms() + GONE_LIMIT_MS; now_ms() < end; sleep_ms(10))
        if (gone(pid)) return 1;
    return gone(pid);
}

/* Kill whatever a run recorded in dir (after a failed check, so nothing outlives the test). */
void kill_recorded(const char *dir, int nranks)
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
void assert_nothing_left(const char *dir, int nranks)
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

void run_launcher(const char *const *args, launch_t *l)
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
        setenv("RANK", "99", 1); /* and torchrun's, from an outer launcher */
        setenv("WORLD_SIZE", "99", 1);
        setenv("LOCAL_RANK", "99", 1);
        setenv("LOCAL_WORLD_SIZE", "99", 1);
        setenv("GROUP_RANK", "7", 1);
        setenv("MASTER_ADDR", "10.0.0.1", 1);
        setenv("MASTER_PORT", "1", 1);
        if (l->backend) setenv("TCOMMS_BACKEND", l->backend, 1);
        else unsetenv("TCOMMS_BACKEND");
        setenv("TCOMMS_STORE_BIND_ADDR", "0.0.0.0", 1);
        if (l->token) setenv("TCOMMS_STORE_TOKEN", l->token, 1);
        else unsetenv("TCOMMS_STORE_TOKEN");
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

void launch_free(launch_t *l)
{
    free(l->out);
    free(l->err);
}

char *make_dir(void)
{
    char *dir = strdup("/tmp/tcomms-run-test.XXXXXX");
    ck_assert_ptr_nonnull(dir);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    return dir;
}

void remove_dir(char *dir)
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

int exit_status(const launch_t *l)
{
    return WIFEXITED(l->status) ? WEXITSTATUS(l->status) : 1000 + WTERMSIG(l->status);
}

int count_lines(const char *text)
{
    int n = 0;
    for (; *text; text++) n += *text == '\n';
    return n;
}
