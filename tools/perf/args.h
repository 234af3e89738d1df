/* The command line of tcomms-perf: nccl-tests' flags with their meanings and defaults, plus the collective, the
 * backend, the device, JSON output and a label. Parsed once into one options struct that the rest reads. */
#ifndef PERF_ARGS_H
#define PERF_ARGS_H

#include <stddef.h>

#include <tcomms/tcomms.h>

#include "colls.h"

typedef struct perf_args {
    unsigned colls;          /* bit k: perf_colls[k] runs (`all`: every bit); blocks run in table order */
    size_t min_bytes, max_bytes, step_bytes;
    int step_factor;         /* > 1: multiply; 1: add step_bytes */
    int iters, warmup, check, average, cycles, blocking, root;
    int local_register;      /* -R: 0 plain buffers, 1 registered, 2 symmetric windows (cuda; cpu ignores it) */
    int graph;               /* -G: CUDA graph replays of the captured iterations (0: none; cuda only) */
    tcomms_dtype_t dtype;
    tcomms_op_t op;
    const char *backend;     /* NULL: TCOMMS_BACKEND, else the library's default */
    tcomms_device_t device;
    const char *json;        /* NULL: no JSON file */
    const char *label;       /* NULL: the backend name */
    int corrupt;             /* testing aid (TCOMMS_PERF_CORRUPT=1): spoil one received element per check */
} perf_args_t;

/* Parse argv into `a`. Returns -1 when the program should go on; otherwise the exit status to return at once
 * (0 after --help, 2 after a usage error, whose message went to stderr). */
int perf_args_parse(int argc, char **argv, perf_args_t *a);

/* The sweep: for (s = a->min_bytes; s != PERF_END; s = perf_args_next(a, s)); and how many sizes that is. */
#define PERF_END ((size_t)-1)
size_t perf_args_next(const perf_args_t *a, size_t size);
size_t perf_args_nsizes(const perf_args_t *a);

#endif
