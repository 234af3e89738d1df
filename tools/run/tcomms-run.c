/* SPDX-License-Identifier: BSD-3-Clause */
/* tcomms-run: start N ranks of a program on this host with the TCOMMS_* bootstrap environment (rank_env.c), relay
 * their output line by line behind a rank prefix, forward signals, and take the whole job down when one rank fails
 * (or, through spawn.c's parent-death signal, when tcomms-run itself is killed).
 * Standalone (does not link libtcomms); docs/launching.md describes the environment and the exit statuses. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* pipe2, environ; a hand build without the project's CPPFLAGS still compiles */
#endif

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h" /* lib/util/clock.h */
#include "port.h"
#include "run.h"


typedef struct run_stream {
    int fd;     /* read end of the rank's stdout or stderr pipe; -1 once EOF was seen */
    int out_fd; /* where its lines go: 1 or 2 */
    int rank;
    char *buf;  /* RUN_LINE_MAX bytes, allocated on first data */
    size_t len;
} run_stream_t;

typedef struct run_rank {
    pid_t pid;  /* also its process group id; 0 when never started */
    int exited; /* seen through waitid(WNOWAIT): the zombie is reaped only at the end, so its pid (our pgid)
                 * cannot be reused by an unrelated process while we may still signal the group */
    run_stream_t io[2];
} run_rank_t;

typedef enum { PHASE_RUNNING, PHASE_TERMINATING, PHASE_KILLED } run_phase_t;

typedef struct run_job {
    run_opts_t opts;
    run_rank_t *ranks;
    int nstarted, nexited;
    run_phase_t phase;
    int64_t timeout_at;  /* monotonic ms, -1 without --timeout */
    int64_t phase_until; /* TERMINATING: when SIGKILL goes out; KILLED: when draining output stops */
    int exit_code;       /* -1 until the first failure decides it */
    int broken[3];       /* our stdout/stderr refused a write (its reader is gone) */
    char *scratch;       /* prefix + one piece + newline */
    struct pollfd *pfd;
    run_stream_t **pfd_stream;
} run_job_t;

static int sig_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    if (write(sig_pipe[1], &b, 1) < 0) {
        /* pipe full: enough wake-ups are already queued */
    }
    errno = saved;
}

static const char *signal_name(int sig)
{
    static const struct { int sig; const char *name; } names[] = {
        {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
        {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
        {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
        {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGCHLD, "SIGCHLD"},
        {SIGCONT, "SIGCONT"}, {SIGSTOP, "SIGSTOP"}, {SIGTSTP, "SIGTSTP"}, {SIGTTIN, "SIGTTIN"},
        {SIGTTOU, "SIGTTOU"}, {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].sig == sig) return names[i].name;
    return "unknown signal";
}

/* ---- setup -------------------------------------------------------------------------------------------------- */

/* stdin/stdout/stderr must exist: a pipe created into slot 1 or 2 would otherwise collide with the dup2 that
 * puts it there in the child. */
static void open_std_fds(void)
{
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF && open("/dev/null", O_RDWR) < 0) break;
}

/* Route SIGCHLD and the signals we forward through the self-pipe. Signals the caller ignores stay ignored (nohup).
 * *sigpipe_changed: SIGPIPE went from default to ignored here, and the ranks must get the default back. */
static int setup_signals(int *sigpipe_changed)
{
    static const int handled[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP};
    struct sigaction sa, old;
    if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return -1;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_NOCLDSTOP; /* no SA_RESTART: poll() wakes up either way */
    for (size_t i = 0; i < sizeof handled / sizeof handled[0]; i++) {
        if (sigaction(handled[i], NULL, &old) != 0) return -1;
        if (old.sa_handler == SIG_IGN && handled[i] != SIGCHLD) continue;
        if (sigaction(handled[i], &sa, NULL) != 0) return -1;
    }
    /* A closed reader of our output must not kill the launcher before it has cleaned up. */
    sa.sa_handler = SIG_IGN;
    sa.sa_flags = 0;
    if (sigaction(SIGPIPE, &sa, &old) != 0) return -1;
    *sigpipe_changed = old.sa_handler == SIG_DFL;
    return 0;
}

/* ---- output relay ------------------------------------------------------------------------------------------- */

static void write_all(run_job_t *job, int fd, const char *p, size_t len)
{
    while (len > 0 && !job->broken[fd]) {
        ssize_t n = write(fd, p, len);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
        } else if (n < 0 && errno == EAGAIN) { /* an inherited non-blocking stdout */
            struct pollfd w = {.fd = fd, .events = POLLOUT};
            poll(&w, 1, 100);
        } else if (!(n < 0 && errno == EINTR)) {
            job->broken[fd] = 1;
        }
    }
}

/* Relay one line or piece of a rank's output. Tagged output always ends a piece with a newline so that the next
 * prefix starts a line; untagged output passes the bytes through unchanged. */
static void emit(run_job_t *job, const run_stream_t *s, const char *data, size_t len)
{
    if (!job->opts.tag) {
        write_all(job, s->out_fd, data, len);
        return;
    }
    int n = snprintf(job->scratch, 32, "[%d] ", s->rank);
    memcpy(job->scratch + n, data, len);
    size_t total = (size_t)n + len;
    if (len == 0 || data[len - 1] != '\n') job->scratch[total++] = '\n';
    write_all(job, s->out_fd, job->scratch, total);
}

static void stream_close(run_job_t *job, run_stream_t *s)
{
    if (s->len > 0) emit(job, s, s->buf, s->len); /* a last line without its newline */
    close(s->fd);
    s->fd = -1;
    free(s->buf);
    s->buf = NULL;
    s->len = 0;
}

/* The reader of our stdout (or stderr) is gone: close the ranks' side too, so that their next write fails with
 * SIGPIPE or EPIPE just as it would without a launcher in between (`tcomms-run -n 2 ./prog | head`). */
static void drop_streams(run_job_t *job, int out_fd)
{
    for (int r = 0; r < job->nstarted; r++)
        for (int k = 0; k < 2; k++) {
            run_stream_t *s = &job->ranks[r].io[k];
            if (s->fd < 0 || s->out_fd != out_fd) continue;
            s->len = 0;
            stream_close(job, s);
        }
}

/* One read per wake-up and stream, so that a chatty rank cannot starve the others. */
static void stream_read(run_job_t *job, run_stream_t *s)
{
    if (!s->buf && !(s->buf = malloc(RUN_LINE_MAX))) {
        fprintf(stderr, "tcomms-run: out of memory; dropping the output of rank %d\n", s->rank);
        stream_close(job, s);
        return;
    }
    ssize_t n = read(s->fd, s->buf + s->len, RUN_LINE_MAX - s->len);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {
        stream_close(job, s);
        return;
    }
    size_t start = 0, end = s->len + (size_t)n;
    char *nl, *p = s->buf + s->len;
    while ((nl = memchr(p, '\n', (size_t)(s->buf + end - p))) != NULL) {
        size_t stop = (size_t)(nl - s->buf) + 1;
        emit(job, s, s->buf + start, stop - start);
        start = stop;
        p = nl + 1;
    }
    if (start == 0 && end == RUN_LINE_MAX) { /* no newline in a full buffer: relay it as one piece */
        emit(job, s, s->buf, end);
        start = end;
    }
    memmove(s->buf, s->buf + start, end - start);
    s->len = end - start;
    if (job->broken[s->out_fd]) drop_streams(job, s->out_fd);
}

/* ---- ranks -------------------------------------------------------------------------------------------------- */

static void signal_groups(run_job_t *job, int sig)
{
    for (int r = 0; r < job->nstarted; r++) {
        kill(-job->ranks[r].pid, sig); /* ESRCH: the group is already empty */
        if (sig == SIGTERM) kill(-job->ranks[r].pid, SIGCONT); /* a stopped process would not see it */
    }
}

static int ranks_running(const run_job_t *job)
{
    return job->nstarted - job->nexited;
}

/* Start the SIGTERM, grace period, SIGKILL sequence (the caller may have sent another signal instead of SIGTERM). */
static void terminate(run_job_t *job, int send_term)
{
    if (job->phase != PHASE_RUNNING) return;
    if (send_term) signal_groups(job, SIGTERM);
    job->phase = PHASE_TERMINATING;
    job->phase_until = (int64_t)tc_now_ms() + RUN_GRACE_MS;
}

/* The first failure decides the exit status and takes the job down. */
static void fail(run_job_t *job, int code, int send_term)
{
    if (job->exit_code < 0) job->exit_code = code;
    if (send_term && job->phase == PHASE_RUNNING && ranks_running(job) > 0)
        fprintf(stderr, "tcomms-run: terminating the other ranks (%d still running)\n", ranks_running(job));
    terminate(job, send_term);
}

static int spawn_rank(run_job_t *job, int r, char **env, run_rank_vars_t *vars, int sigpipe_changed)
{
    int out[2] = {-1, -1}, err[2] = {-1, -1};
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
        fprintf(stderr, "tcomms-run: cannot create the output pipes of rank %d: %s\n", r, strerror(errno));
        if (out[0] >= 0) {
            close(out[0]);
            close(out[1]);
        }
        return 1;
    }
    run_rank_vars_set(vars, r);
    /* A rank in the background process group would be stopped by SIGTTIN reading a terminal: only rank 0 reads
     * our stdin, and only when it is a file or a pipe. */
    run_spawn_t sp = {.argv = job->opts.argv, .env = env, .out_fd = out[1], .err_fd = err[1],
                      .null_stdin = r != 0 || isatty(0), .sigpipe_default = sigpipe_changed};
    int e = -1; /* -1: not spawned, the reason printed already */
    pid_t pid = -1;
    if (job->opts.cpu_bind && run_bind_rank(r, job->opts.nranks) != 0)
        fprintf(stderr, "tcomms-run: --cpu-bind: cannot set the CPUs of rank %d: %s\n", r, strerror(errno));
    else if ((pid = run_spawn(&sp, &e)) > 0)
        e = 0;
    if (job->opts.cpu_bind)
        run_bind_restore();
    close(out[1]);
    close(err[1]);
    if (e != 0) {
        close(out[0]);
        close(err[0]);
        if (e == -1)
            return 1;
        if (e == EAGAIN || e == ENOMEM) {
            fprintf(stderr, "tcomms-run: cannot start rank %d: %s\n", r, strerror(e));
            return 1;
        }
        fprintf(stderr, "tcomms-run: cannot execute '%s': %s\n", job->opts.argv[0], strerror(e));
        return e == ENOENT || e == ENOTDIR ? EXIT_NOTFOUND : EXIT_NOEXEC;
    }
    run_rank_t *rank = &job->ranks[r];
    rank->pid = pid;
    rank->io[0] = (run_stream_t){.fd = out[0], .out_fd = 1, .rank = r};
    rank->io[1] = (run_stream_t){.fd = err[0], .out_fd = 2, .rank = r};
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);
    job->nstarted++;
    return 0;
}

/* Note ranks that have exited, without reaping them (see run_rank_t.exited). */
static void check_ranks(run_job_t *job)
{
    int first_code = -1;
    for (int r = 0; r < job->nstarted; r++) {
        run_rank_t *rank = &job->ranks[r];
        siginfo_t si;
        if (rank->exited) continue;
        memset(&si, 0, sizeof si);
        if (waitid(P_PID, (id_t)rank->pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid != rank->pid)
            continue;
        rank->exited = 1;
        job->nexited++;
        int code = si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status;
        if (code == 0 || job->phase != PHASE_RUNNING) continue; /* ranks we are terminating fail as asked */
        if (si.si_code == CLD_EXITED)
            fprintf(stderr, "tcomms-run: rank %d exited with status %d\n", r, si.si_status);
        else
            fprintf(stderr, "tcomms-run: rank %d was killed by signal %d (%s)%s\n", r, si.si_status,
                    signal_name(si.si_status), si.si_code == CLD_DUMPED ? " (core dumped)" : "");
        if (first_code < 0) first_code = code;
    }
    if (first_code >= 0) fail(job, first_code, 1);
}

static void handle_signals(run_job_t *job)
{
    unsigned char buf[64];
    ssize_t n;
    int chld = 0;
    while ((n = read(sig_pipe[0], buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] == SIGCHLD) {
                chld = 1;
                continue;
            }
            if (job->phase == PHASE_RUNNING)
                fprintf(stderr, "tcomms-run: got %s; forwarding it to every rank\n", signal_name(buf[i]));
            signal_groups(job, buf[i]);
            fail(job, 128 + buf[i], 0); /* the forwarded signal is the termination request */
        }
    }
    if (chld) check_ranks(job);
}

/* Escalate when a deadline has passed: --timeout, then SIGKILL after the grace period. */
static void check_deadlines(run_job_t *job)
{
    int64_t now = (int64_t)tc_now_ms();
    if (job->phase == PHASE_RUNNING && job->timeout_at >= 0 && now >= job->timeout_at) {
        fprintf(stderr, "tcomms-run: timed out after %g s\n", job->opts.timeout_s);
        fail(job, EXIT_TIMEOUT, 1);
    } else if (job->phase == PHASE_RUNNING && ranks_running(job) == 0) {
        terminate(job, 1); /* every rank has exited: what is left in their groups goes too */
    } else if (job->phase == PHASE_TERMINATING && now >= job->phase_until) {
        if (ranks_running(job) > 0)
            fprintf(stderr, "tcomms-run: sending SIGKILL (%d ranks still running %d s after SIGTERM)\n",
                    ranks_running(job), RUN_GRACE_MS / 1000);
        signal_groups(job, SIGKILL);
        job->phase = PHASE_KILLED;
        job->phase_until = now + RUN_DRAIN_MS;
    }
}

/* Build the poll set; returns the number of entries. */
static int poll_set(run_job_t *job)
{
    int n = 0;
    job->pfd[n++] = (struct pollfd){.fd = sig_pipe[0], .events = POLLIN};
    for (int r = 0; r < job->nstarted; r++)
        for (int k = 0; k < 2; k++)
            if (job->ranks[r].io[k].fd >= 0) {
                job->pfd_stream[n] = &job->ranks[r].io[k];
                job->pfd[n++] = (struct pollfd){.fd = job->ranks[r].io[k].fd, .events = POLLIN};
            }
    return n;
}

static int poll_timeout(const run_job_t *job)
{
    int64_t until = job->phase == PHASE_RUNNING ? job->timeout_at : job->phase_until;
    if (job->phase == PHASE_RUNNING && ranks_running(job) == 0) return 0;
    if (until < 0 || (job->phase == PHASE_KILLED && (int64_t)tc_now_ms() >= until)) return -1; /* SIGCHLD will come */
    int64_t left = until - (int64_t)tc_now_ms();
    return left < 0 ? 0 : left > 60000 ? 60000 : (int)left;
}

static void run_loop(run_job_t *job)
{
    for (;;) {
        int n = poll_set(job);
        if (ranks_running(job) == 0 &&
            (n == 1 || (job->phase == PHASE_KILLED && (int64_t)tc_now_ms() >= job->phase_until)))
            return;
        int rc = poll(job->pfd, (nfds_t)n, poll_timeout(job));
        if (rc < 0 && errno != EINTR) { /* cannot happen with valid fds; still end the job without spinning */
            fprintf(stderr, "tcomms-run: poll failed: %s\n", strerror(errno));
            fail(job, 1, 1);
            struct timespec pause = {0, 100 * 1000 * 1000};
            nanosleep(&pause, NULL);
            check_ranks(job);
        }
        if (rc > 0 && job->pfd[0].revents) handle_signals(job);
        for (int i = 1; rc > 0 && i < n; i++)
            if (job->pfd[i].revents) stream_read(job, job->pfd_stream[i]);
        check_deadlines(job);
    }
}

/* A free port other than `other` (0: any); -1 with errno when none was found. */
static int free_port_except(int other)
{
    for (int tries = 0; tries < 10; tries++) {
        int p = run_free_port();
        if (p < 0 || p != other) return p;
    }
    errno = EADDRINUSE;
    return -1;
}

/* Nothing outlives the launcher: kill what is left in every group, reap every rank, flush what was read. */
static void finish(run_job_t *job)
{
    signal_groups(job, SIGKILL);
    for (int r = 0; r < job->nstarted; r++) {
        while (waitpid(job->ranks[r].pid, NULL, 0) < 0 && errno == EINTR) {
        }
        for (int k = 0; k < 2; k++)
            if (job->ranks[r].io[k].fd >= 0) stream_close(job, &job->ranks[r].io[k]);
    }
}

int main(int argc, char **argv)
{
    run_job_t job;
    run_rank_vars_t vars;
    int sigpipe_changed = 0, rc;

    memset(&job, 0, sizeof job);
    rc = run_parse_args(argc, argv, &job.opts);
    if (rc >= 0) return rc;
    open_std_fds();
    /* Rank 0 binds two ports: tcomms' store on TCOMMS_MASTER_PORT, torch's TCPStore on MASTER_PORT. */
    int port = job.opts.port ? job.opts.port : free_port_except(job.opts.torch_port);
    int torch_port = job.opts.torch_port;
    if (port > 0 && torch_port == 0) torch_port = free_port_except(port);
    if (port < 0 || torch_port < 0) {
        fprintf(stderr, "tcomms-run: cannot find a free port on 127.0.0.1: %s\n", strerror(errno));
        return 1;
    }
    int n = job.opts.nranks;
    job.ranks = calloc((size_t)n, sizeof *job.ranks);
    job.pfd = calloc(2 * (size_t)n + 1, sizeof *job.pfd);
    job.pfd_stream = calloc(2 * (size_t)n + 1, sizeof *job.pfd_stream);
    job.scratch = malloc(32 + RUN_LINE_MAX + 1);
    char **env = run_build_env(&job.opts, port, torch_port, &vars);
    job.exit_code = 1;
    if (!env) {
        fprintf(stderr, "tcomms-run: cannot build the ranks' environment (a random store token): %s\n",
                strerror(errno));
        goto out;
    }
    if (!job.ranks || !job.pfd || !job.pfd_stream || !job.scratch) {
        fputs("tcomms-run: out of memory\n", stderr);
        goto out;
    }
    if (setup_signals(&sigpipe_changed) != 0) {
        fprintf(stderr, "tcomms-run: cannot set up signal handling: %s\n", strerror(errno));
        goto out;
    }
    job.exit_code = -1;
    job.timeout_at = job.opts.timeout_s > 0 ? (int64_t)tc_now_ms() + (int64_t)(job.opts.timeout_s * 1000) : -1;
    for (int r = 0; r < n; r++) {
        rc = spawn_rank(&job, r, env, &vars, sigpipe_changed);
        if (rc != 0) {
            fail(&job, rc, 1);
            break;
        }
    }
    run_loop(&job);
    finish(&job);
out:
    free(env);
    free(job.ranks);
    free(job.pfd);
    free(job.pfd_stream);
    free(job.scratch);
    return job.exit_code > 0 ? job.exit_code : 0;
}
