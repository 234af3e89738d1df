/* SPDX-License-Identifier: BSD-3-Clause */
/* Multi-rank test harness (see mrank.h): every multi-rank program's main() (mrank_main: the backends under test, the
 * skip, the suite), and ranks forked to meet on a loopback port, their time bounded, all reaped, with a uniform way
 * to report failing cases. The parent polls waitpid every few milliseconds rather than handling SIGCHLD so that it
 * does not disturb Check's own signal handling. */
#include "mrank.h"
#include "../tools/run/port.h"
#include "check_run.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MRANK_MAX_RANKS 64
#define MRANK_CASE_LINES 3   /* failure lines per case before "more" */
#define MRANK_PROCESS_LINES 200 /* failure lines per process before going quiet */

static int lines_printed; /* per process: each rank has its own copy */
#define MRANK_GRACE_S 2.0    /* after one rank fails, how long the others may still finish */

double mrank_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void mrank_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static void vlogf(const char *fmt, va_list ap)
{
    char line[1024];
    int n = snprintf(line, sizeof line, "[%ld] ", (long)getpid());
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    if (len == 0 || line[len - 1] != '\n')
        line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}

void mrank_logf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlogf(fmt, ap);
    va_end(ap);
}

int mrank_failf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlogf(fmt, ap);
    va_end(ap);
    return 1;
}

static void describe_case(const mrank_case_t *c, char *buf, size_t len)
{
    snprintf(buf, len, "%s dtype=%s op=%s count=%lld inplace=%s root=%d%s%s rank=%d", c->coll ? c->coll : "?",
             c->dtype ? c->dtype : "-", c->op ? c->op : "-", c->count,
             c->inplace < 0 ? "-" : (c->inplace ? "yes" : "no"), c->root, c->variant ? " " : "",
             c->variant ? c->variant : "", c->rank);
}

void mrank_case_fail(mrank_case_t *c, const char *what, long long index, double got, double expected)
{
    char desc[400];
    if (c->reported > MRANK_CASE_LINES || lines_printed > MRANK_PROCESS_LINES)
        return;
    describe_case(c, desc, sizeof desc);
    if (lines_printed++ == MRANK_PROCESS_LINES) {
        mrank_logf("FAIL %s: ... and more failures not shown", desc);
        return;
    }
    if (c->reported++ == MRANK_CASE_LINES) {
        mrank_logf("FAIL %s: more mismatches not shown", desc);
        return;
    }
    if (isnan(expected))
        mrank_logf("FAIL %s: %s[%lld] was written (now %.6g), must be untouched", desc, what, index, got);
    else
        mrank_logf("FAIL %s: %s[%lld] = %.6g, expected %.6g", desc, what, index, got, expected);
}

void mrank_case_status(mrank_case_t *c, const char *call, int status, const char *detail)
{
    char desc[400];
    describe_case(c, desc, sizeof desc);
    c->reported++;
    mrank_logf("FAIL %s: %s returned %d (%s)", desc, call, status, detail && *detail ? detail : "no message");
}

/* Can a listener bind `port` on 127.0.0.1 right now? */
int mrank_free_port(void)
{
    return run_free_port(); /* tools/run/port.c: below the kernel's ephemeral range */
}

int mrank_count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

void *mrank_shared_alloc(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void mrank_shared_free(void *p, size_t len)
{
    if (p)
        munmap(p, len);
}

int mrank_host_barrier(volatile int *counter, int size, int round, int timeout_s)
{
    __atomic_add_fetch(counter, 1, __ATOMIC_SEQ_CST);
    double deadline = mrank_now() + timeout_s;
    while (__atomic_load_n(counter, __ATOMIC_SEQ_CST) < size * round) {
        if (mrank_now() > deadline)
            return -1;
        mrank_sleep_ms(1);
    }
    return 0;
}

/* ---- a program's main() ---------------------------------------------------------------------------------------- */

static char backend_names[MRANK_MAX_BACKENDS][32];
static int nbackends;

/* TCOMMS_TEST_BACKENDS, space- or comma-separated, into backend_names (each at most 31 characters). */
static int read_backends(void)
{
    const char *env = getenv("TCOMMS_TEST_BACKENDS");
    int n = 0;
    while (env && *env && n < MRANK_MAX_BACKENDS) {
        size_t len = strcspn(env, " ,\t");
        if (len > 0 && len < sizeof backend_names[0]) {
            memcpy(backend_names[n], env, len);
            backend_names[n][len] = '\0';
            n++;
        }
        env += len;
        env += strspn(env, " ,\t");
    }
    return n;
}

int mrank_nbackends(void)
{
    return nbackends;
}

const char *mrank_backend(int i)
{
    return i >= 0 && i < nbackends ? backend_names[i] : "";
}

/* Why `needs` is not met by the backends read, or NULL when it is. */
static const char *unmet(mrank_needs_t needs)
{
    if (needs == MRANK_BACKEND && nbackends == 0)
        return "TCOMMS_TEST_BACKENDS is empty: no CPU backend to test, skipping";
    if (needs == MRANK_UCX) {
        for (int i = 0; i < nbackends; i++)
            if (strcmp(backend_names[i], "ucx") == 0)
                return NULL;
        return "the UCX backend is not built, skipping";
    }
    return NULL;
}

int mrank_main(const char *name, mrank_needs_t needs, void (*add)(Suite *s, int nbackends))
{
    nbackends = read_backends();
    const char *why = unmet(needs);
    if (why != NULL) {
        printf("test_%s: %s\n", name, why);
        return 77; /* automake's SKIP */
    }
    if (needs == MRANK_DEFAULT && nbackends == 0) {
        backend_names[0][0] = '\0';
        nbackends = 1;
    }
    Suite *s = suite_create(name);
    add(s, nbackends);
    fflush(stdout); /* what add printed, before Check forks the tests */
    return check_run(s);
}

TCase *mrank_tcase(Suite *s, const char *name, int timeout_s)
{
    TCase *tc = tcase_create(name);
    if (timeout_s > 0)
        tcase_set_timeout(tc, timeout_s);
    suite_add_tcase(s, tc);
    return tc;
}

int mrank_rank_counts(int min, int max, int counts[])
{
    const char *list = getenv("TCOMMS_TEST_RANKS"), *top_env = getenv("TCOMMS_TEST_MAX_RANKS");
    char *end;
    int n = 0;
    if (list && *list) {
        while (*list && n < max) {
            long v = strtol(list, &end, 10);
            if (end == list || v < min || v > max)
                return -1;
            counts[n++] = (int)v;
            list = end + strspn(end, " ,");
        }
        return n > 0 ? n : -1;
    }
    long top = 4;
    if (top_env && *top_env) {
        top = strtol(top_env, &end, 10);
        if (*end || top < min || top > max)
            return -1;
    }
    for (int v = min; v <= top; v++)
        counts[n++] = v;
    return n;
}

int mrank_job_timeout(int base_s, int nranks)
{
    return nranks <= 4 ? base_s : base_s * nranks / 4;
}

/* ---- ranks ------------------------------------------------------------------------------------------------------ */

/* In the child: set the rank environment, run fn, leave without running the parent's atexit handlers. */
static void run_child(int rank, int size, int port, pid_t parent, mrank_fn_t fn, void *arg)
{
    char buf[32];
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(100);
    snprintf(buf, sizeof buf, "%d", rank);
    setenv("TCOMMS_RANK", buf, 1);
    setenv("TCOMMS_LOCAL_RANK", buf, 1);
    snprintf(buf, sizeof buf, "%d", size);
    setenv("TCOMMS_SIZE", buf, 1);
    snprintf(buf, sizeof buf, "%d", port);
    setenv("TCOMMS_MASTER_PORT", buf, 1);
    setenv("TCOMMS_MASTER_ADDR", "127.0.0.1", 1);
    int failures = fn(rank, size, arg);
    fflush(NULL);
    _exit(failures < 0 ? 1 : (failures > 100 ? 100 : failures));
}

typedef struct child {
    pid_t pid;
    int done;
    int status;  /* from waitpid */
    int killed;  /* 1: by us after a timeout, 2: by us after another rank failed */
} child_t;

/* Whether a reaped child counts as failed. */
static int child_failed(const child_t *c, int expect_kill)
{
    if (c->killed)
        return 1;
    if (expect_kill)
        return !(WIFSIGNALED(c->status) && WTERMSIG(c->status) == SIGKILL);
    return !(WIFEXITED(c->status) && WEXITSTATUS(c->status) == 0);
}

static void report_child(int rank, const child_t *c, int expect_kill, int timeout_s)
{
    if (!child_failed(c, expect_kill))
        return;
    if (c->killed == 1)
        mrank_logf("mrank: rank %d (pid %ld) killed after the %d s timeout", rank, (long)c->pid, timeout_s);
    else if (c->killed == 2)
        mrank_logf("mrank: rank %d (pid %ld) killed because another rank failed", rank, (long)c->pid);
    else if (WIFSIGNALED(c->status))
        mrank_logf("mrank: rank %d (pid %ld) died of signal %d%s", rank, (long)c->pid, WTERMSIG(c->status),
                   expect_kill ? " (expected SIGKILL)" : "");
    else if (expect_kill)
        mrank_logf("mrank: rank %d (pid %ld) exited with %d but was expected to die by SIGKILL", rank,
                   (long)c->pid, WEXITSTATUS(c->status));
    else
        mrank_logf("mrank: rank %d (pid %ld) exited with %d failure(s)", rank, (long)c->pid, WEXITSTATUS(c->status));
}

/* Reap what has ended; returns how many are still running. Sets *failed when a newly reaped child failed. */
static int reap(child_t *ch, int n, unsigned expect_killed, int *failed)
{
    int running = 0;
    for (int r = 0; r < n; r++) {
        if (ch[r].done)
            continue;
        pid_t w = waitpid(ch[r].pid, &ch[r].status, WNOHANG);
        if (w == ch[r].pid || (w < 0 && errno == ECHILD)) {
            ch[r].done = 1;
            if (child_failed(&ch[r], (expect_killed >> r) & 1u))
                *failed = 1;
        } else {
            running++;
        }
    }
    return running;
}

static void kill_rest(child_t *ch, int n, int why)
{
    for (int r = 0; r < n; r++) {
        if (!ch[r].done && !ch[r].killed) {
            ch[r].killed = why;
            kill(ch[r].pid, SIGKILL);
        }
    }
}

int mrank_run_ex(int nranks, mrank_fn_t fn, void *arg, int timeout_s, unsigned expect_killed)
{
    child_t ch[MRANK_MAX_RANKS];
    if (nranks < 1 || nranks > MRANK_MAX_RANKS)
        return nranks < 1 ? 1 : nranks;
    int port = mrank_free_port();
    if (port < 0) {
        mrank_logf("mrank: no free port on 127.0.0.1: %s", strerror(errno));
        return nranks;
    }
    memset(ch, 0, sizeof ch);
    pid_t self = getpid();
    fflush(NULL);
    int started = 0;
    for (; started < nranks; started++) {
        pid_t pid = fork();
        if (pid == 0)
            run_child(started, nranks, port, self, fn, arg);
        if (pid < 0) {
            mrank_logf("mrank: fork of rank %d failed: %s", started, strerror(errno));
            break;
        }
        ch[started].pid = pid;
    }
    double deadline = mrank_now() + timeout_s;
    double kill_at = started < nranks ? mrank_now() : -1.0;
    int failed = 0;
    while (reap(ch, started, expect_killed, &failed) > 0) {
        double now = mrank_now();
        if (failed && kill_at < 0)
            kill_at = now + MRANK_GRACE_S;
        if (now > deadline)
            kill_rest(ch, started, 1);
        else if (kill_at >= 0 && now > kill_at)
            kill_rest(ch, started, 2);
        mrank_sleep_ms(5);
    }
    int failing = nranks - started;
    for (int r = 0; r < started; r++) {
        int expect = (expect_killed >> r) & 1u;
        report_child(r, &ch[r], expect, timeout_s);
        failing += child_failed(&ch[r], expect);
    }
    return failing;
}

int mrank_run(int nranks, mrank_fn_t fn, void *arg, int timeout_s)
{
    return mrank_run_ex(nranks, fn, arg, timeout_s, 0u);
}
