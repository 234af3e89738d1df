/* SPDX-License-Identifier: BSD-3-Clause */
/* The command line of tcomms-perf: every nccl-tests flag with its meaning and default, plus the collective, the
 * backend, the device, tcomms' own JSON and a label. Parsed once into one options struct that the rest reads. */
#ifndef PERF_ARGS_H
#define PERF_ARGS_H

#include <stddef.h>

#include <tcomms/tcomms.h>

#include "colls.h"

#define PERF_MAX_OPS 8

typedef struct perf_args {
    unsigned colls;          /* bit k: perf_colls[k] runs (`all`: every bit); blocks run in table order */
    size_t min_bytes, max_bytes, step_bytes;
    int step_factor;         /* > 1: multiply; 1: add step_bytes */
    int iters, warmup, average, cycles, root; /* root -1: every rank in turn (-r all) */
    int check;               /* -c: checked runs per size and form (0: none, N/A) */
    int agg;                 /* -m: operations per timed iteration */
    int blocking;            /* -z, as nccl-tests: 0 post all; 1 wait + barrier each op; 2 wait each op; 3 wait +
                                barrier each iteration, barrier not timed */
    int timeout;             /* -T: seconds one size may take before the run fails (0: none) */
    int cputime;             /* -C: report the host's time to post the operations, not their completion */
    int timestamps;          /* -S: a timestamp after each row */
    int unalign;             /* -u: buffers start this many elements past an aligned address */
    int local_register;      /* -R: 0 plain buffers, 1 registered, 2 symmetric windows (cuda; cpu ignores it) */
    int graph;               /* -G: CUDA graph replays of the captured iterations (0: none; cuda only) */
    tcomms_dtype_t dtypes[TCOMMS_DTYPE_COUNT]; /* -d: one, or every type (`all`), in nccl-tests' order */
    int ndtypes;
    tcomms_op_t ops[PERF_MAX_OPS]; /* -o: one, or every op (`all`) */
    int nops;
    const char *backend;     /* NULL: TCOMMS_BACKEND, else the library's default */
    tcomms_device_t device;  /* --device */
    const char *json;        /* --json: tcomms' JSON file (NULL: none) */
    const char *nccl_json;   /* -J: nccl-tests' JSON file (NULL: none) */
    const char *label;       /* NULL: the backend name */
    int corrupt;             /* testing aid (TCOMMS_PERF_CORRUPT=1): spoil one received element per check */
    int argc;                /* the command line, for -J's "args" */
    char **argv;
    char notes[512];         /* flags accepted but without effect here: rank 0 says so once on stderr */
} perf_args_t;

/* Parse argv into `a`. Returns -1 when the program should go on; otherwise the exit status to return at once
 * (0 after --help or --version, 2 after a usage error, whose message went to stderr). argv[0] named like
 * nccl-tests' binaries (all_reduce_perf) selects the collective. */
int perf_args_parse(int argc, char **argv, perf_args_t *a);

/* The sweep: for (s = a->min_bytes; s != PERF_END; s = perf_args_next(a, s)); and how many sizes that is. */
#define PERF_END ((size_t)-1)
size_t perf_args_next(const perf_args_t *a, size_t size);
size_t perf_args_nsizes(const perf_args_t *a);

/* The type name nccl-tests prints for `t` (half, float, ...). */
const char *perf_type_name(tcomms_dtype_t t);

#endif
