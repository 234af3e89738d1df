/* SPDX-License-Identifier: BSD-3-Clause */
/* tcomms-run's command line: options, their values and the usage text. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"

/* ---- command line ------------------------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fputs("Usage: tcomms-run -n N [OPTIONS] PROGRAM [ARGS...]\n"
          "Start N ranks of PROGRAM on this host with the environment tcomms reads: TCOMMS_RANK, TCOMMS_SIZE,\n"
          "TCOMMS_LOCAL_RANK, TCOMMS_LOCAL_SIZE, TCOMMS_MASTER_ADDR=127.0.0.1 and TCOMMS_MASTER_PORT; the store\n"
          "bound to 127.0.0.1 with a fresh random TCOMMS_STORE_TOKEN (unless TCOMMS_STORE_TOKEN is set).\n"
          "Each rank also gets torchrun's variables, so that a PyTorch program's init_process_group (env://) works\n"
          "unchanged: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK=0, MASTER_ADDR=127.0.0.1 and\n"
          "MASTER_PORT. That is a second port: rank 0 may bind both, tcomms' store on TCOMMS_MASTER_PORT and\n"
          "torch's TCPStore on MASTER_PORT. Inherited values of all these variables are replaced.\n"
          "\n"
          "  -n N, -np N        number of ranks, 1 to 4096 (-np as mpirun spells it)\n"
          "  --backend B        set TCOMMS_BACKEND=B in every rank (e.g. gloo, or cpu:gloo,cuda:nccl)\n"
          "  --timeout SECONDS  end the job when it runs longer than this (exit status 124)\n"
          "  --port P           TCOMMS_MASTER_PORT (default: a free port on 127.0.0.1)\n"
          "  --torch-port P     MASTER_PORT, other than --port (default: another free port on 127.0.0.1)\n"
          "  --cpu-bind auto|none  auto: each rank on its own contiguous block of the CPUs tcomms-run may use\n"
          "                     (default none: the ranks inherit tcomms-run's CPUs)\n"
          "  --tag-output       prefix every output line with \"[RANK] \" (the default)\n"
          "  --no-tag-output    relay output lines unchanged\n"
          "  -h, --help         show this help and exit\n"
          "  --version          show the version and exit\n"
          "\n"
          "When a rank exits non-zero or is killed, the other ranks get SIGTERM, then SIGKILL 3 s later.\n"
          "SIGINT, SIGTERM and SIGHUP are forwarded to every rank's process group; if tcomms-run is killed,\n"
          "its ranks get SIGKILL.\n"
          "Exit status: 0 when every rank exits 0; otherwise the status of the first rank that failed (128+N if it\n"
          "was killed by signal N), 124 on timeout, 128+N when tcomms-run itself got signal N, 127 when PROGRAM is\n"
          "not found, 126 when it cannot be executed, 2 for a usage error, 1 for any other launcher error.\n",
          f);
}

static int usage_error(const char *fmt, const char *arg)
{
    fputs("tcomms-run: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\nTry 'tcomms-run --help' for more information.\n", stderr);
    return EXIT_USAGE;
}

/* Match argv[*i] against option `name`; on a match, *val is its value: attached (-n4, --port=5) or the next
 * argument. Returns 1 on a match, 0 when it is another option, -1 when the value is missing. */
static int match_opt(int argc, char **argv, int *i, const char *name, const char **val)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0) return 0;
    if (a[n] == '\0') {
        if (*i + 1 >= argc) return -1;
        *val = argv[++*i];
        return 1;
    }
    if (name[1] == '-') {
        if (a[n] != '=') return 0;
        *val = a + n + 1;
        return 1;
    }
    *val = a + n;
    return 1;
}

static int parse_long(const char *text, long min, long max, long *out)
{
    char *end;
    if (text[0] == '\0' || text[0] == ' ' || text[0] == '\t') return -1;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max) return -1;
    *out = v;
    return 0;
}

static int parse_value(const char *opt, const char *val, run_opts_t *o)
{
    long v;
    if (strcmp(opt, "-n") == 0 || strcmp(opt, "-np") == 0) {
        if (parse_long(val, 1, RUN_MAX_RANKS, &v) != 0)
            return usage_error("-n needs a number of ranks from 1 to 4096, not '%s'", val);
        o->nranks = (int)v;
    } else if (strcmp(opt, "--port") == 0) {
        if (parse_long(val, 1, 65535, &v) != 0)
            return usage_error("--port needs a port from 1 to 65535, not '%s'", val);
        o->port = (int)v;
    } else if (strcmp(opt, "--torch-port") == 0) {
        if (parse_long(val, 1, 65535, &v) != 0)
            return usage_error("--torch-port needs a port from 1 to 65535, not '%s'", val);
        o->torch_port = (int)v;
    } else if (strcmp(opt, "--cpu-bind") == 0) {
        if (strcmp(val, "auto") != 0 && strcmp(val, "none") != 0)
            return usage_error("--cpu-bind takes auto or none, not '%s'", val);
        o->cpu_bind = val[0] == 'a';
    } else if (strcmp(opt, "--timeout") == 0) {
        char *end;
        errno = 0;
        double s = strtod(val, &end);
        if (val[0] == '\0' || *end != '\0' || errno != 0 || !(s > 0 && s <= 1e9))
            return usage_error("--timeout needs a positive number of seconds, not '%s'", val);
        o->timeout_s = s;
    } else {
        if (val[0] == '\0') return usage_error("--backend needs a backend name%s", "");
        o->backend = val;
    }
    return -1;
}

int run_parse_args(int argc, char **argv, run_opts_t *o)
{
    /* "-np" before "-n": "-np 4" would otherwise read as -n with the value "p". */
    static const char *const valued[] = {"-np", "-n", "--backend", "--timeout", "--port", "--torch-port",
                                         "--cpu-bind"};
    int i = 1;
    memset(o, 0, sizeof *o);
    o->tag = 1;
    for (; i < argc && argv[i][0] == '-' && argv[i][1] != '\0'; i++) {
        const char *a = argv[i], *val = NULL;
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(a, "--version") == 0) {
            printf("tcomms-run (tcomms) %s\n", PACKAGE_VERSION); /* the GNU form: tool, package, version */
            return 0;
        }
        if (strcmp(a, "--tag-output") == 0 || strcmp(a, "--no-tag-output") == 0) {
            o->tag = a[2] == 't';
            continue;
        }
        int matched = 0;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0] && !matched; k++) {
            matched = match_opt(argc, argv, &i, valued[k], &val);
            if (matched < 0) return usage_error("option '%s' needs a value", valued[k]);
            if (matched > 0) {
                int rc = parse_value(valued[k], val, o);
                if (rc >= 0) return rc;
            }
        }
        if (!matched) return usage_error("unknown option '%s'", a);
    }
    if (o->nranks == 0) return usage_error("missing -n N, the number of ranks to start%s", "");
    if (i >= argc) return usage_error("missing PROGRAM to run%s", "");
    if (o->port != 0 && o->port == o->torch_port)
        return usage_error("--torch-port must differ from --port: rank 0 may bind both%s", "");
    o->argv = argv + i;
    return -1;
}
