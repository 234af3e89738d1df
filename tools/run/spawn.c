/* SPDX-License-Identifier: BSD-3-Clause */
/* Starting one rank: fork, then in the child its own process group, its output pipes, default signal handling and
 * a parent-death signal (so that no rank outlives a tcomms-run killed by SIGKILL, which cannot forward anything),
 * then exec. posix_spawn cannot set the parent-death signal; an exec failure comes back through a close-on-exec
 * pipe, as posix_spawn reports it. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* pipe2, strchrnul */
#endif

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "run.h"

/* The launcher's handlers write to its signal pipe; exec would reset them, but a signal may come before. Ignored
 * signals stay ignored (nohup), except SIGPIPE when the launcher ignored it only for itself. */
static void reset_signals(const run_spawn_t *sp, const sigset_t *mask)
{
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigemptyset(&dfl.sa_mask);
    for (int sig = 1; sig < NSIG; sig++) {
        struct sigaction old;
        if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, NULL, &old) != 0) continue;
        if (old.sa_handler != SIG_DFL && (old.sa_handler != SIG_IGN || (sig == SIGPIPE && sp->sigpipe_default)))
            sigaction(sig, &dfl, NULL);
    }
    sigprocmask(SIG_SETMASK, mask, NULL);
}

/* execvp's search of PATH, without its fallback of running a file that has no "#!" line through /bin/sh (which
 * posix_spawnp, used before, does not have): such a file fails with ENOEXEC, exit status 126. Returns errno. */
static int exec_searching(char *const argv[], char *const env[])
{
    const char *file = argv[0], *path = getenv("PATH");
    if (strchr(file, '/') != NULL) {
        execve(file, argv, env);
        return errno;
    }
    int denied = 0;
    for (const char *p = path != NULL ? path : "/bin:/usr/bin";;) {
        const char *end = strchrnul(p, ':');
        size_t dlen = end > p ? (size_t)(end - p) : 1; /* an empty entry is the current directory */
        char full[PATH_MAX];
        if (dlen + 1 + strlen(file) < sizeof full) {
            memcpy(full, end > p ? p : ".", dlen);
            full[dlen] = '/';
            strcpy(full + dlen + 1, file);
            execve(full, argv, env);
            if (errno == EACCES)
                denied = 1;
            else if (errno != ENOENT && errno != ENOTDIR && errno != ESTALE && errno != ENODEV && errno != ETIMEDOUT)
                return errno;
        }
        if (*end == '\0')
            return denied ? EACCES : ENOENT;
        p = end + 1;
    }
}

/* In the child, between fork and exec (tcomms-run has one thread, so no lock can be held here). Never returns. */
static void become_rank(const run_spawn_t *sp, pid_t launcher, const sigset_t *mask, int report)
{
    /* SIGKILL: with the launcher gone nobody would escalate a SIGTERM the rank ignores. The check after it closes
     * the window where the launcher died before the signal was armed. */
    int e = prctl(PR_SET_PDEATHSIG, SIGKILL) == 0 ? 0 : errno;
    if (e == 0 && getppid() != launcher) _exit(EXIT_NOEXEC);
    if (e == 0) {
        setpgid(0, 0); /* its own group, so that signals reach its descendants too; the parent sets it as well */
        if (sp->null_stdin) {
            int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
            if (fd > 0) dup2(fd, 0);
        }
        dup2(sp->out_fd, 1);
        dup2(sp->err_fd, 2);
        reset_signals(sp, mask);
        e = exec_searching(sp->argv, sp->env);
    }
    while (write(report, &e, sizeof e) < 0 && errno == EINTR) {
    }
    _exit(EXIT_NOTFOUND);
}

pid_t run_spawn(const run_spawn_t *sp, int *err)
{
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) {
        *err = errno;
        return -1;
    }
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, &old); /* no handler may run in the child before it resets them */
    pid_t launcher = getpid(), pid = fork();
    if (pid == 0) {
        close(report[0]);
        become_rank(sp, launcher, &old, report[1]);
    }
    int fork_err = errno;
    sigprocmask(SIG_SETMASK, &old, NULL);
    close(report[1]);
    if (pid < 0) {
        close(report[0]);
        *err = fork_err;
        return -1;
    }
    setpgid(pid, pid); /* whichever of the two runs first; fails harmlessly once the child has exec'd */
    int child_err = 0;
    ssize_t n;
    while ((n = read(report[0], &child_err, sizeof child_err)) < 0 && errno == EINTR) {
    }
    close(report[0]);
    if (n == (ssize_t)sizeof child_err) { /* exec failed: the child exits at once */
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
        }
        *err = child_err;
        return -1;
    }
    return pid;
}
