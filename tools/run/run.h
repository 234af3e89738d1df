/* tcomms-run's shared declarations: its options and exit statuses, parsed by args.c and acted on by tcomms-run.c. */
#ifndef TCOMMS_RUN_H
#define TCOMMS_RUN_H

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "0.1.0"
#endif

#define RUN_MAX_RANKS 4096
#define RUN_LINE_MAX (64 * 1024) /* a longer line is relayed in pieces of this size */
#define RUN_GRACE_MS 3000        /* SIGTERM, then SIGKILL this much later */
#define RUN_DRAIN_MS 1000        /* after SIGKILL: how long output pipes held by escaped processes are waited for */

enum { EXIT_USAGE = 2, EXIT_TIMEOUT = 124, EXIT_NOEXEC = 126, EXIT_NOTFOUND = 127 };

typedef struct run_opts {
    int nranks;
    const char *backend; /* NULL: TCOMMS_BACKEND is left as inherited */
    double timeout_s;    /* 0: none */
    int port;            /* 0: pick a free one */
    int tag;
    int cpu_bind;        /* --cpu-bind auto: each rank on its own block of the launcher's CPUs */
    char **argv;         /* PROGRAM ARGS..., NULL-terminated */
} run_opts_t;

/* bind.c: give the calling thread rank r's block of the launcher's original CPUs (of n ranks), so the rank spawned
 * next inherits it; -1 with errno on failure. run_bind_restore puts the original set back. */
int run_bind_rank(int r, int n);
void run_bind_restore(void);

/* Fill `o` from the command line. Returns -1 to go on, otherwise the status to exit with (help, version, error). */
int run_parse_args(int argc, char **argv, run_opts_t *o);

#endif
