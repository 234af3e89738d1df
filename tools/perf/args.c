/* SPDX-License-Identifier: BSD-3-Clause */
/* Command-line parsing of tcomms-perf (see args.h). Flag letters, long names, meanings and defaults follow
 * nccl-tests (src/common.cu); flags that mean nothing with one GPU per process are accepted and noted once.
 * Type and op names are nccl-tests' and the library's; the device is parsed by the library. */
#include "args.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"

static void usage(FILE *out)
{
    fprintf(out,
        "usage: tcomms-perf COLL [flags], tcomms-perf --coll COLL [flags], or COLL_perf [flags] (a link)\n"
        "Measures a tcomms collective over a sweep of message sizes and prints nccl-tests' table (rank 0, stdout).\n"
        "Run one process per rank, e.g. `tcomms-run -n 4 tcomms-perf all_reduce -b 8 -e 128M -f 2`.\n"
        "\n"
        "COLL: all_reduce all_gather reduce_scatter broadcast reduce alltoall gather scatter sendrecv\n"
        "      all_gather_v reduce_scatter_v alltoall_v, also as nccl-tests names them (all_reduce_perf,\n"
        "      allreduce, alltoallv_perf); `all`, or a comma-separated list. See tcomms-perf(1).\n"
        "\n"
        "nccl-tests' flags:\n"
        "  -b, --minbytes N          smallest size (default 32M; K, M, G are powers of 1024)\n"
        "  -e, --maxbytes N          largest size (default 32M)\n"
        "  -i, --stepbytes N         add N between sizes (default 1M)\n"
        "  -f, --stepfactor F        multiply by F between sizes instead (default 1: add)\n"
        "  -n, --iters N             timed iterations (default 20)\n"
        "  -w, --warmup_iters N      untimed iterations before them (default 1)\n"
        "  -m, --agg_iters N         operations per timed iteration (default 1)\n"
        "  -N, --run_cycles N        run the sweep N times (default 1; 0 = until interrupted)\n"
        "  -c, --check N             checked runs per size and form, each on fresh data (default 1; 0: N/A)\n"
        "  -d, --datatype T|all      int8 uint8 int32 int64 half bfloat16 float double (default float);\n"
        "                            uint32, uint64, f8e4m3, f8e5m2: tcomms has no such type\n"
        "  -o, --op OP|all           sum prod max min avg (default sum); mulsum: not in tcomms\n"
        "  -r, --root R|all          root of rooted collectives (default 0; all or -1: each rank in turn)\n"
        "  -a, --average 0..3        time across ranks: 0 rank 0, 1 average, 2 minimum, 3 maximum (default 1)\n"
        "  -z, --blocking 0..3       0 post all, then wait; 1 wait and barrier after each op; 2 wait after\n"
        "                            each op; 3 wait and barrier after each iteration, barrier not timed\n"
        "  -T, --timeout S           fail when one size takes more than S seconds (default 0: never)\n"
        "  -C, --report_cputime 0|1  report the host's time to post the operations (default 0)\n"
        "  -S, --report_timestamps 0|1  a timestamp after each row (default 0)\n"
        "  -u, --unalign N           buffers start N elements past an aligned address (default 0)\n"
        "  -J, --output_file F.json  nccl-tests' JSON file (rank 0; an existing F gets F.0, F.1, ...)\n"
        "  -R, --local_register 0..2 0 plain, 1 registered, 2 symmetric-window buffers (cuda; cpu ignores it)\n"
        "  -G, --cudagraph N         time N replays of the iterations captured in a CUDA graph (cuda only)\n"
        "  -g, --ngpus 1  -t, --nthreads 1   one GPU per process in tcomms: only 1 is accepted\n"
        "  -p -y -x -V -M -I -K, -D 0  accepted; without effect in tcomms (said once on stderr)\n"
        "tcomms' flags:\n"
        "  -B, --backend NAME        backend, e.g. gloo or cpu:gloo (default: TCOMMS_BACKEND, else the library's)\n"
        "      --device DEV          where buffers live: cpu (default), cuda (the local rank's GPU) or cuda:N\n"        "                            (cuda loads libcudart.so.13, .12 or libcudart.so; TCOMMS_PERF_CUDART names another)\n"
        "      --json FILE           tcomms' JSON file, which tcomms-plot reads (rank 0)\n"
        "  -L, --label TEXT          name of this run in JSON and charts (default: the backend name)\n"
        "  -h, --help  --version\n"
        "Exit status: 0; 1 on a runtime error, a wrong element or a timeout; 2 on a usage error.\n"
        "Testing aid: TCOMMS_PERF_CORRUPT=1 spoils one received element on rank 0 before each check.\n");
}

/* A usage error: the message on stderr, a pointer to --help, and exit status 2. */
__attribute__((format(printf, 1, 2))) static int bad(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tcomms-perf: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry 'tcomms-perf --help' for more information.\n");
    va_end(ap);
    return 2;
}

/* A byte count: digits, then an optional K, M or G (powers of 1024, either case). */
static int parse_size(const char *flag, const char *text, size_t *out)
{
    errno = 0;
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text || *text == '-' || errno != 0)
        return bad("%s: '%s' is not a byte count (digits with an optional K, M or G)", flag, text);
    unsigned shift = 0;
    if (*end != '\0') {
        const char *units = "kmg", *u = strchr(units, (char)(*end | 0x20));
        if (u == NULL || end[1] != '\0')
            return bad("%s: '%s' has an unknown suffix (K, M or G, powers of 1024)", flag, text);
        shift = 10u * (unsigned)(u - units + 1);
    }
    if (v > (SIZE_MAX >> shift) / 2) /* leave room for one more step of the sweep */
        return bad("%s: '%s' is too large", flag, text);
    *out = (size_t)(v << shift);
    return 0;
}

/* An integer as nccl-tests reads it (strtol base 0: 0x10 and 010 too), within lo..hi. */
static int parse_int(const char *flag, const char *text, int lo, int hi, int *out)
{
    errno = 0;
    char *end;
    long v = strtol(text, &end, 0);
    if (end == text || *end != '\0' || errno != 0 || v < lo || v > hi) {
        if (hi >= INT_MAX / 2)
            return bad("%s: '%s' must be an integer >= %d", flag, text, lo);
        return bad("%s: '%s' must be an integer in %d..%d", flag, text, lo, hi);
    }
    *out = (int)v;
    return 0;
}

/* nccl-tests' type names in its order (`-d all` runs them so); TCOMMS_DTYPE_COUNT: tcomms has no such type. */
static const struct { const char *name; tcomms_dtype_t t; } nccl_types[] = {
    {"int8", TCOMMS_INT8},        {"uint8", TCOMMS_UINT8},          {"int32", TCOMMS_INT32},
    {"uint32", TCOMMS_DTYPE_COUNT}, {"int64", TCOMMS_INT64},        {"uint64", TCOMMS_DTYPE_COUNT},
    {"half", TCOMMS_FLOAT16},     {"float", TCOMMS_FLOAT32},        {"double", TCOMMS_FLOAT64},
    {"bfloat16", TCOMMS_BFLOAT16}, {"f8e4m3", TCOMMS_DTYPE_COUNT},  {"f8e5m2", TCOMMS_DTYPE_COUNT},
    {"char", TCOMMS_INT8},        {"int", TCOMMS_INT32}, /* nccl-tests built against NCCL 1 */
};
#define N_NCCL_TYPES 10 /* the entries `all` runs (fp8 only where NCCL and the GPU have it) */

const char *perf_type_name(tcomms_dtype_t t)
{
    for (size_t k = 0; k < sizeof nccl_types / sizeof nccl_types[0]; k++)
        if (nccl_types[k].t == t)
            return nccl_types[k].name;
    return "?";
}

static void note(perf_args_t *a, const char *text)
{
    size_t n = strlen(a->notes);
    snprintf(a->notes + n, sizeof a->notes - n, "%s%s", n ? "; " : "", text);
}

static int parse_types(perf_args_t *a, const char *v)
{
    a->ndtypes = 0;
    if (strcmp(v, "all") == 0) {
        for (int k = 0; k < N_NCCL_TYPES; k++)
            if (nccl_types[k].t != TCOMMS_DTYPE_COUNT)
                a->dtypes[a->ndtypes++] = nccl_types[k].t;
        note(a, "-d all: uint32 and uint64 are left out (tcomms has no such types)");
        return 0;
    }
    for (size_t k = 0; k < sizeof nccl_types / sizeof nccl_types[0]; k++) {
        if (strcmp(v, nccl_types[k].name) != 0)
            continue;
        if (nccl_types[k].t == TCOMMS_DTYPE_COUNT)
            return bad("-d/--datatype %s: tcomms has no %s type (int8 uint8 int32 int64 half bfloat16 float "
                       "double)", v, v);
        a->dtypes[a->ndtypes++] = nccl_types[k].t;
        return 0;
    }
    if (tcomms_dtype_parse(v, &a->dtypes[0]) != TCOMMS_SUCCESS) /* the library's names: float32, float16 ... */
        return bad("-d/--datatype: %s", tcomms_last_error());
    a->ndtypes = 1;
    return 0;
}

static int parse_ops(perf_args_t *a, const char *v)
{
    static const tcomms_op_t all[] = {TCOMMS_SUM, TCOMMS_PROD, TCOMMS_MAX, TCOMMS_MIN, TCOMMS_AVG};
    a->nops = 0;
    if (strcmp(v, "all") == 0) {
        for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
            a->ops[a->nops++] = all[k];
        note(a, "-o all: mulsum is left out (tcomms has no pre-multiplied sum)");
        return 0;
    }
    if (strcmp(v, "mulsum") == 0)
        return bad("-o/--op mulsum: tcomms has no pre-multiplied sum (sum prod max min avg)");
    if (tcomms_op_parse(v, &a->ops[0]) != TCOMMS_SUCCESS)
        return bad("-o/--op: %s", tcomms_last_error());
    a->nops = 1;
    return 0;
}

/* Flags of nccl-tests that have nothing to act on here: accepted, and when not at their default, noted. */
static int ignored(perf_args_t *a, int c, const char *v)
{
    static const struct { int c; const char *flag, *why; } tab[] = {
        {'p', "-p/--parallel_init", "one GPU per process, nothing to initialize in parallel"},
        {'y', "-y/--stream_null", "tcomms-perf uses its own stream"},
        {'x', "-x/--cta_policy", "an NCCL communicator setting tcomms-perf does not pass"},
        {'V', "-V/--device_cta_count", "only for -D > 0"},
        {'M', "-M/--memory", "no GPU memory report"},
        {'I', "-I/--per_iter_timing", "no per-iteration columns"},
        {'K', "-K/--per_iter_skip", "only for -I"},
    };
    int x;
    for (size_t k = 0; k < sizeof tab / sizeof tab[0]; k++) {
        if (tab[k].c != c)
            continue;
        int st = parse_int(tab[k].flag, v, INT_MIN / 2, INT_MAX / 2, &x);
        if (st == 0 && x != (c == 'x' ? -1 : c == 'V' ? 16 : 0)) {
            char text[160];
            snprintf(text, sizeof text, "%s %s ignored (%s)", tab[k].flag, v, tab[k].why);
            note(a, text);
        }
        return st;
    }
    return -1;
}

enum { OPT_DEVICE = 256, OPT_JSON, OPT_VERSION };

static const struct option longopts[] = {
    {"coll", required_argument, NULL, 'Q'},        {"minbytes", required_argument, NULL, 'b'},
    {"maxbytes", required_argument, NULL, 'e'},    {"stepbytes", required_argument, NULL, 'i'},
    {"stepfactor", required_argument, NULL, 'f'},  {"iters", required_argument, NULL, 'n'},
    {"agg_iters", required_argument, NULL, 'm'},   {"warmup_iters", required_argument, NULL, 'w'},
    {"run_cycles", required_argument, NULL, 'N'},  {"parallel_init", required_argument, NULL, 'p'},
    {"check", required_argument, NULL, 'c'},       {"op", required_argument, NULL, 'o'},
    {"datatype", required_argument, NULL, 'd'},    {"root", required_argument, NULL, 'r'},
    {"blocking", required_argument, NULL, 'z'},    {"stream_null", required_argument, NULL, 'y'},
    {"timeout", required_argument, NULL, 'T'},     {"cudagraph", required_argument, NULL, 'G'},
    {"report_cputime", required_argument, NULL, 'C'}, {"report_timestamps", required_argument, NULL, 'S'},
    {"output_file", required_argument, NULL, 'J'}, {"average", required_argument, NULL, 'a'},
    {"local_register", required_argument, NULL, 'R'}, {"cta_policy", required_argument, NULL, 'x'},
    {"device_implementation", required_argument, NULL, 'D'}, {"device_cta_count", required_argument, NULL, 'V'},
    {"memory", required_argument, NULL, 'M'},      {"unalign", required_argument, NULL, 'u'},
    {"per_iter_timing", required_argument, NULL, 'I'}, {"per_iter_skip", required_argument, NULL, 'K'},
    {"nthreads", required_argument, NULL, 't'},    {"ngpus", required_argument, NULL, 'g'},
    {"backend", required_argument, NULL, 'B'},     {"device", required_argument, NULL, OPT_DEVICE},
    {"json", required_argument, NULL, OPT_JSON},   {"label", required_argument, NULL, 'L'},
    {"help", no_argument, NULL, 'h'},              {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

/* -g and -t: tcomms runs one rank, one GPU, one thread per process. */
static int one_gpu(const char *flag, const char *v)
{
    int x;
    int st = parse_int(flag, v, 1, INT_MAX, &x);
    if (st == 0 && x != 1)
        return bad("%s %d: tcomms runs one GPU per process (one rank each, one thread); start %d processes "
                   "instead, e.g. tcomms-run -n %d", flag, x, x, x);
    return st;
}

/* -D: nccl-tests' device-API implementation; 0 is NCCL's host API, which is what tcomms calls. */
static int device_impl(const char *v)
{
    int x;
    if (parse_int("-D/--device_implementation", v, 0, INT_MAX, &x) != 0)
        return bad("(-D is nccl-tests' device implementation now; where buffers live is --device %s)", v);
    if (x != 0)
        return bad("-D/--device_implementation %d: tcomms has no device-API kernels; only 0 (the host API)", x);
    return 0;
}

/* One option; 0, or the exit status of a usage error. */
static int option(perf_args_t *a, int c, const char *v, const char **coll)
{
    int st = 0;
    switch (c) {
    case 'Q': *coll = v; break;
    case 'b': st = parse_size("-b/--minbytes", v, &a->min_bytes); break;
    case 'e': st = parse_size("-e/--maxbytes", v, &a->max_bytes); break;
    case 'i': st = parse_size("-i/--stepbytes", v, &a->step_bytes); break;
    case 'f': st = parse_int("-f/--stepfactor", v, 1, 1 << 20, &a->step_factor); break;
    case 'n': st = parse_int("-n/--iters", v, 1, INT_MAX / 2, &a->iters); break;
    case 'm': st = parse_int("-m/--agg_iters", v, 1, 1 << 16, &a->agg); break;
    case 'w': st = parse_int("-w/--warmup_iters", v, 0, INT_MAX / 2, &a->warmup); break;
    case 'c': st = parse_int("-c/--check", v, 0, 1 << 20, &a->check); break;
    case 'r':
        if (strcmp(v, "all") == 0)
            a->root = -1;
        else
            st = parse_int("-r/--root", v, -1, INT_MAX, &a->root);
        break;
    case 'a': st = parse_int("-a/--average", v, 0, 3, &a->average); break;
    case 'N': st = parse_int("-N/--run_cycles", v, 0, INT_MAX, &a->cycles); break;
    case 'z': st = parse_int("-z/--blocking", v, 0, 3, &a->blocking); break;
    case 'T': st = parse_int("-T/--timeout", v, 0, INT_MAX, &a->timeout); break;
    case 'C': st = parse_int("-C/--report_cputime", v, 0, 1, &a->cputime); break;
    case 'S': st = parse_int("-S/--report_timestamps", v, 0, 1, &a->timestamps); break;
    case 'u': st = parse_int("-u/--unalign", v, 0, 1 << 20, &a->unalign); break;
    case 'R': st = parse_int("-R/--local_register", v, 0, 2, &a->local_register); break;
    case 'G': st = parse_int("-G/--cudagraph", v, 0, INT_MAX / 2, &a->graph); break;
    case 'g': st = one_gpu("-g/--ngpus", v); break;
    case 't': st = one_gpu("-t/--nthreads", v); break;
    case 'D': st = device_impl(v); break;
    case 'd': st = parse_types(a, v); break;
    case 'o': st = parse_ops(a, v); break;
    case OPT_DEVICE:
        st = tcomms_device_parse(v, &a->device) == TCOMMS_SUCCESS ? 0 : bad("--device: %s", tcomms_last_error());
        break;
    case 'B': a->backend = v; st = *v ? 0 : bad("-B/--backend: the backend name is empty"); break;
    case 'J': a->nccl_json = v; break;
    case OPT_JSON: a->json = v; break;
    case 'L': a->label = v; break;
    default: st = ignored(a, c, v); break; /* -1 for getopt's '?': named by the caller */
    }
    return st;
}

/* COLL: a name, a comma-separated list of names, or `all`. */
static int parse_colls(const char *text, unsigned *colls)
{
    char name[64];
    *colls = 0;
    for (const char *p = text;; p++) {
        size_t n = strcspn(p, ",");
        snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), p);
        const perf_coll_t *c = perf_coll_find(name);
        if (strcmp(name, "all") == 0)
            *colls |= (1u << perf_ncolls) - 1;
        else if (c != NULL && n < sizeof name)
            *colls |= 1u << (c - perf_colls);
        else if (strncmp(name, "hypercube", 9) == 0)
            return bad("%s: tcomms has no hypercube collective", name);
        else
            return bad("unknown collective '%.*s' (all_reduce all_gather reduce_scatter broadcast reduce alltoall "
                       "gather scatter sendrecv all_gather_v reduce_scatter_v alltoall_v all, nccl-tests' names "
                       "such as all_reduce_perf or allreduce, or a comma-separated list)", (int)n, p);
        p += n;
        if (*p == '\0')
            return 0;
    }
}

/* The collective of a program named like nccl-tests' binaries (all_reduce_perf, also lt-all_reduce_perf, the
 * libtool wrapper's name), else NULL. */
static const char *coll_of_program(const char *argv0)
{
    const char *base = strrchr(argv0, '/');
    base = base ? base + 1 : argv0;
    if (strncmp(base, "lt-", 3) == 0)
        base += 3;
    size_t n = strlen(base);
    return n > 5 && strcmp(base + n - 5, "_perf") == 0 ? base : NULL;
}

/* Checks that need every option. */
static int finish(perf_args_t *a, const char *coll)
{
    if (coll == NULL)
        return bad("no collective given (all_reduce, ..., or all)");
    int st = parse_colls(coll, &a->colls);
    if (st != 0)
        return st;
    if (a->min_bytes > a->max_bytes)
        return bad("-b/--minbytes (%zu) is larger than -e/--maxbytes (%zu)", a->min_bytes, a->max_bytes);
    if (a->min_bytes == 0 && a->step_factor > 1)
        return bad("-b/--minbytes 0 with -f/--stepfactor > 1 never grows");
    if (a->step_bytes == 0 && a->step_factor == 1 && a->min_bytes < a->max_bytes)
        return bad("-i/--stepbytes 0 with -f/--stepfactor 1 never grows");
    if (a->graph > 0 && a->device.type != TCOMMS_DEVICE_CUDA)
        return bad("-G/--cudagraph %d needs --device cuda (CUDA graphs capture work on a GPU stream)", a->graph);
    if (a->graph > 0 && a->blocking == 3)
        return bad("-z 3 with -G: nccl-tests refuses this pair too (no barrier inside a graph)");
    if (a->nccl_json != NULL) {
        const char *dot = strrchr(a->nccl_json, '.'), *slash = strrchr(a->nccl_json, '/');
        if (dot == NULL || (slash != NULL && slash > dot) || strcasecmp(dot, ".json") != 0) {
            note(a, "-J: no file written (nccl-tests writes only FILE.json)");
            a->nccl_json = NULL;
        }
    }
    const char *corrupt = getenv("TCOMMS_PERF_CORRUPT");
    a->corrupt = corrupt != NULL && strcmp(corrupt, "1") == 0;
    return -1;
}

int perf_args_parse(int argc, char **argv, perf_args_t *a)
{
    *a = (perf_args_t){.min_bytes = 32u << 20, .max_bytes = 32u << 20, .step_bytes = 1u << 20, .step_factor = 1,
                       .iters = 20, .warmup = 1, .check = 1, .agg = 1, .average = 1, .cycles = 1,
                       .dtypes = {TCOMMS_FLOAT32}, .ndtypes = 1, .ops = {TCOMMS_SUM}, .nops = 1,
                       .device = {TCOMMS_DEVICE_CPU, 0}, .argc = argc, .argv = argv};
    const char *coll = argc > 0 ? coll_of_program(argv[0]) : NULL;
    int c, named = coll != NULL;
    optind = 1;
    opterr = 0; /* getopt would name the program by its path; we say it ourselves */
    while ((c = getopt_long(argc, argv, "t:g:b:e:i:f:n:m:w:N:p:I:K:c:o:d:r:z:y:T:hG:C:a:R:x:D:V:J:S:M:u:B:L:",
                            longopts, NULL)) != -1) {
        if (c == 'h' || c == OPT_VERSION) {
            if (c == 'h')
                usage(stdout);
            else
                printf("tcomms-perf (tcomms) %s\n", PACKAGE_VERSION);
            return 0;
        }
        int st = option(a, c, optarg, &coll);
        if (st < 0)
            return bad("option '%s' is unknown or lacks its value", argv[optind - 1]);
        if (st != 0)
            return st;
    }
    for (; optind < argc; optind++, named = 0) {
        if (coll != NULL && !named)
            return bad("more than one collective given ('%s' and '%s')", coll, argv[optind]);
        coll = argv[optind]; /* a first argument overrides the program's name */
    }
    return finish(a, coll);
}

size_t perf_args_next(const perf_args_t *a, size_t size)
{
    size_t next = a->step_factor > 1 ? size * (size_t)a->step_factor : size + a->step_bytes;
    if (a->step_factor > 1 && next / (size_t)a->step_factor != size)
        return PERF_END; /* overflow: past any -e */
    return next > a->max_bytes || next <= size ? PERF_END : next;
}

size_t perf_args_nsizes(const perf_args_t *a)
{
    size_t n = 0;
    for (size_t s = a->min_bytes; s != PERF_END; s = perf_args_next(a, s))
        n++;
    return n;
}
