/* SPDX-License-Identifier: BSD-3-Clause */
/* run_child: the program tests/test_run.c starts under tcomms-run. Options, acted on in this order, make a rank
 * record its pid, print its environment (the bootstrap, torchrun's or the store's), its CPUs or odd output, fork a descendant, trap signals, fail, or sleep,
 * so the tests can check from outside what the launcher set, relayed and cleaned up. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char sig_path[4096]; /* where the trap handler records the signal it got */

static void on_signal(int sig)
{
    char text[8];
    int n = 0;
    for (int v = sig; v > 0; v /= 10) n++;
    for (int i = n - 1, v = sig; i >= 0; i--, v /= 10) text[i] = (char)('0' + v % 10);
    int fd = open(sig_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        if (write(fd, text, (size_t)n) < 0) {
            /* nothing to do: the test reports the missing file */
        }
        close(fd);
    }
    _exit(128 + sig);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Write `value` to dir/name atomically, so a reader never sees a half-written pid. */
static void write_file(const char *dir, const char *name, long value)
{
    char tmp[4096], path[4096];
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "%ld\n", value) < 0 || fclose(f) != 0 || rename(tmp, path) != 0) {
        perror(path);
        exit(90);
    }
}

/* A failing rank first waits (bounded) until every rank has recorded its pid, so the test knows them all. */
static void wait_for_peers(const char *dir, int size)
{
    char path[4096];
    for (int r = 0; r < size; r++) {
        snprintf(path, sizeof path, "%s/pid.%d", dir, r);
        for (int tries = 0; tries < 1000 && access(path, F_OK) != 0; tries++) sleep_ms(10);
    }
}

static const char *env_or_unset(const char *name)
{
    const char *v = getenv(name);
    return v ? v : "(unset)";
}

int main(int argc, char **argv)
{
    const char *dir = NULL, *partial = NULL;
    int print_cpus = 0, print_env = 0, stderr_line = 0, trap = 0, ignore_term = 0, grandchild = 0;
    int quiet_grandchild = 0, input = 0, print_store = 0, print_torch = 0;
    int exit_rank = -1, exit_code = 0, kill_rank = -1, args_from = -1;
    long long_bytes = 0, sleep_s = 0, yes_ms = 0;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has1 = i + 1 < argc, has2 = i + 2 < argc;
        if (strcmp(a, "--pid-dir") == 0 && has1) dir = argv[++i];
        else if (strcmp(a, "--print-env") == 0) print_env = 1;
        else if (strcmp(a, "--print-cpus") == 0) print_cpus = 1;
        else if (strcmp(a, "--print-store") == 0) print_store = 1;
        else if (strcmp(a, "--print-torch") == 0) print_torch = 1;
        else if (strcmp(a, "--stderr-line") == 0) stderr_line = 1;
        else if (strcmp(a, "--stdin") == 0) input = 1;
        else if (strcmp(a, "--partial") == 0 && has1) partial = argv[++i];
        else if (strcmp(a, "--long") == 0 && has1) long_bytes = atol(argv[++i]);
        else if (strcmp(a, "--trap") == 0) trap = 1;
        else if (strcmp(a, "--ignore-term") == 0) ignore_term = 1;
        else if (strcmp(a, "--grandchild") == 0) grandchild = 1;
        else if (strcmp(a, "--quiet-grandchild") == 0) grandchild = quiet_grandchild = 1;
        else if (strcmp(a, "--exit-rank") == 0 && has2) {
            exit_rank = atoi(argv[++i]);
            exit_code = atoi(argv[++i]);
        } else if (strcmp(a, "--kill-rank") == 0 && has1) kill_rank = atoi(argv[++i]);
        else if (strcmp(a, "--sleep") == 0 && has1) sleep_s = atol(argv[++i]);
        else if (strcmp(a, "--yes") == 0 && has1) yes_ms = atol(argv[++i]);
        else if (strcmp(a, "--args") == 0) {
            args_from = i + 1;
            break;
        } else {
            fprintf(stderr, "run_child: bad argument '%s'\n", a);
            return 91;
        }
    }
    int rank = atoi(env_or_unset("TCOMMS_RANK")), size = atoi(env_or_unset("TCOMMS_SIZE"));
    char name[64];

    if ((trap || grandchild) && !dir) {
        fputs("run_child: --trap and --grandchild need --pid-dir\n", stderr);
        return 92;
    }
    if (trap) {
        snprintf(sig_path, sizeof sig_path, "%s/sig.%d", dir, rank);
        signal(SIGTERM, on_signal);
        signal(SIGINT, on_signal);
        signal(SIGHUP, on_signal);
    }
    if (ignore_term) signal(SIGTERM, SIG_IGN);
    if (grandchild) { /* a descendant in the rank's process group; it keeps the output pipes open unless quiet */
        pid_t pid = fork();
        if (pid == 0) {
            int null = open("/dev/null", O_WRONLY);
            if (quiet_grandchild && null >= 0) {
                dup2(null, 1);
                dup2(null, 2);
            }
            signal(SIGTERM, ignore_term ? SIG_IGN : SIG_DFL);
            signal(SIGINT, SIG_DFL);
            signal(SIGHUP, SIG_DFL);
            sleep_ms(60000);
            _exit(0);
        }
        snprintf(name, sizeof name, "gpid.%d", rank);
        write_file(dir, name, (long)pid);
    }
    if (dir) {
        snprintf(name, sizeof name, "pid.%d", rank);
        write_file(dir, name, (long)getpid());
    }
    if (print_cpus) { /* "cpus 0,1" */
        cpu_set_t set;
        char line[4096] = "cpus";
        size_t len = strlen(line);
        if (sched_getaffinity(0, sizeof set, &set) == 0)
            for (int c = 0; c < CPU_SETSIZE && len + 12 < sizeof line; c++)
                if (CPU_ISSET(c, &set))
                    len += (size_t)snprintf(line + len, sizeof line - len, "%s%d", len == 4 ? " " : ",", c);
        printf("%s\n", line);
    }
    if (print_env)
        printf("rank=%s size=%s local_rank=%s local_size=%s addr=%s port=%s backend=%s\n", env_or_unset("TCOMMS_RANK"),
               env_or_unset("TCOMMS_SIZE"), env_or_unset("TCOMMS_LOCAL_RANK"), env_or_unset("TCOMMS_LOCAL_SIZE"),
               env_or_unset("TCOMMS_MASTER_ADDR"), env_or_unset("TCOMMS_MASTER_PORT"), env_or_unset("TCOMMS_BACKEND"));
    if (print_torch) /* torchrun's variables, then tcomms' to compare them with */
        printf("torch rank=%s world_size=%s local_rank=%s local_world_size=%s group_rank=%s addr=%s port=%s "
               "tcomms_rank=%s tcomms_size=%s tcomms_port=%s\n",
               env_or_unset("RANK"), env_or_unset("WORLD_SIZE"), env_or_unset("LOCAL_RANK"),
               env_or_unset("LOCAL_WORLD_SIZE"), env_or_unset("GROUP_RANK"), env_or_unset("MASTER_ADDR"),
               env_or_unset("MASTER_PORT"), env_or_unset("TCOMMS_RANK"), env_or_unset("TCOMMS_SIZE"),
               env_or_unset("TCOMMS_MASTER_PORT"));
    if (print_store)
        printf("token=%s bind=%s\n", env_or_unset("TCOMMS_STORE_TOKEN"), env_or_unset("TCOMMS_STORE_BIND_ADDR"));
    for (int i = args_from; i > 0 && i < argc; i++) printf("arg=%s\n", argv[i]);
    if (input) { /* what this rank reads on stdin, newlines dropped */
        char text[4096];
        size_t n = fread(text, 1, sizeof text - 1, stdin);
        text[n] = '\0';
        text[strcspn(text, "\n")] = '\0';
        printf("stdin=%s\n", text);
    }
    if (stderr_line) fprintf(stderr, "stderr of rank %d\n", rank);
    for (long i = 0; i < long_bytes; i++) putchar('x');
    if (long_bytes > 0) putchar('\n');
    if (partial) fputs(partial, stdout);
    fflush(stdout);
    if ((rank == exit_rank || rank == kill_rank) && dir) wait_for_peers(dir, size);
    if (rank == exit_rank) exit(exit_code);
    if (rank == kill_rank) raise(SIGKILL);
    for (long i = 0; i < yes_ms; i++) { /* a line per ms until SIGPIPE ends it (or the time is up) */
        puts("y");
        fflush(stdout);
        sleep_ms(1);
    }
    sleep_ms(sleep_s * 1000);
    return 0;
}
