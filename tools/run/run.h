/* SPDX-License-Identifier: BSD-3-Clause */
/* tcomms-run's shared declarations: its options and exit statuses, parsed by args.c and acted on by tcomms-run.c;
 * the ranks' environment (rank_env.c) and how one rank is started (spawn.c). */
#ifndef TCOMMS_RUN_H
#define TCOMMS_RUN_H

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "0.1.0"
#endif

#include <sys/types.h>

#define RUN_MAX_RANKS 4096
#define RUN_LINE_MAX (64 * 1024) /* a longer line is relayed in pieces of this size */
#define RUN_GRACE_MS 3000        /* SIGTERM, then SIGKILL this much later */
#define RUN_DRAIN_MS 1000        /* after SIGKILL: how long output pipes held by escaped processes are waited for */

enum { EXIT_USAGE = 2, EXIT_TIMEOUT = 124, EXIT_NOEXEC = 126, EXIT_NOTFOUND = 127 };

typedef struct run_opts {
    int nranks;
    const char *backend; /* NULL: TCOMMS_BACKEND is left as inherited */
    double timeout_s;    /* 0: none */
    int port;            /* TCOMMS_MASTER_PORT; 0: pick a free one */
    int torch_port;      /* MASTER_PORT, for torch's own store; 0: pick a free one, not `port` */
    int tag;
    int cpu_bind;        /* --cpu-bind auto: each rank on its own block of the launcher's CPUs */
    char **argv;         /* PROGRAM ARGS..., NULL-terminated */
} run_opts_t;

/* bind.c: give the calling thread rank r's block of the launcher's original CPUs (of n ranks), so the rank spawned
 * next inherits it; -1 with errno on failure. run_bind_restore puts the original set back. */
int run_bind_rank(int r, int n);
void run_bind_restore(void);

/* rank_env.c: the variables that differ between ranks, tcomms' and torchrun's; run_rank_vars_set writes rank r's
 * into them before each spawn. */
typedef struct run_rank_vars {
    char rank[32], local_rank[32], torch_rank[32], torch_local_rank[32];
} run_rank_vars_t;
void run_rank_vars_set(run_rank_vars_t *v, int r);

/* rank_env.c: the ranks' environment (one allocation, for one free()): ours without the variables we set, then
 * ours: tcomms' (store on `port`) and torchrun's (MASTER_PORT = `torch_port`), the per-rank ones pointing into *v.
 * NULL with errno when out of memory or when no random token could be made. */
char **run_build_env(const run_opts_t *o, int port, int torch_port, run_rank_vars_t *v);

/* spawn.c: start one rank of PROGRAM in its own process group, killed (SIGKILL) if tcomms-run dies. */
typedef struct run_spawn {
    char *const *argv; /* argv[0] searched in PATH like execvp, as posix_spawnp does */
    char *const *env;
    int out_fd, err_fd;  /* become its stdout and stderr */
    int null_stdin;      /* stdin from /dev/null instead of tcomms-run's */
    int sigpipe_default; /* tcomms-run ignores SIGPIPE only for itself: give the rank the default back */
} run_spawn_t;
/* The rank's pid, or -1 with *err the errno of the failed fork or exec (no process is left then). */
pid_t run_spawn(const run_spawn_t *sp, int *err);

/* Fill `o` from the command line. Returns -1 to go on, otherwise the status to exit with (help, version, error). */
int run_parse_args(int argc, char **argv, run_opts_t *o);

#endif
