/* Command-line parsing of tcomms-perf (see args.h). Flag letters, long names, meanings and defaults follow
 * nccl-tests; dtype, op and device names are parsed by the library, so tcomms-perf accepts what tcomms accepts. */
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

static void usage(FILE *out)
{
    fprintf(out,
        "usage: tcomms-perf COLL [flags]   or   tcomms-perf --coll COLL [flags]\n"
        "Measures a tcomms collective over a sweep of message sizes and prints nccl-tests' table (rank 0, stdout).\n"
        "Run one process per rank, e.g. `tcomms-run -n 4 tcomms-perf all_reduce -b 8 -e 128M -f 2`.\n"
        "\n"
        "COLL: all_reduce all_gather reduce_scatter broadcast reduce alltoall gather scatter sendrecv\n"
        "      all_gather_v reduce_scatter_v alltoall_v, or `all` (each in that order, one block each), or a\n"
        "      comma-separated list of them (run in that same order).\n"
        "      sendrecv: each rank sends to rank+1 and receives from rank-1 (N/A on one rank). The v-variants\n"
        "      give rank k a ramp of unequal counts summing to the equal variant's total (see colls.c).\n"
        "      broadcast takes one buffer in tcomms: it is reported in the out-of-place columns.\n"
        "\n"
        "  -b, --minbytes N       smallest message size (default 32M); K, M, G suffixes are powers of 1024\n"
        "  -e, --maxbytes N       largest message size (default 32M)\n"
        "  -f, --stepfactor F     multiply the size by F between steps (default 1: add -i instead)\n"
        "  -i, --stepbytes N      add N bytes between steps when -f is 1 (default 1M)\n"
        "  -n, --iters N          timed iterations per size (default 20)\n"
        "  -w, --warmup_iters N   untimed iterations before them (default 1)\n"
        "  -c, --check 0|1        check every received element once per size and form (default 1; 0 prints N/A)\n"
        "  -d, --datatype T       int8 uint8 int32 int64 half|float16 bfloat16 float|float32 double|float64\n"
        "                         (default float)\n"
        "  -o, --op OP            sum prod min max avg, for reducing collectives (default sum)\n"
        "  -r, --root R           root of broadcast, reduce, gather, scatter (default 0)\n"
        "  -a, --average 0..3     time reported across ranks: 0 rank 0, 1 average, 2 minimum, 3 maximum (default 1)\n"
        "  -N, --run_cycles N     run the sweep N times (default 1; 0 = until interrupted)\n"
        "  -z, --blocking 0|1     0: post every iteration, then wait for all; 1: each call blocks (default 0)\n"
        "  -B, --backend NAME     tcomms backend, e.g. gloo or cpu:gloo (default: TCOMMS_BACKEND, else the\n"
        "                         library's default)\n"
        "  -D, --device DEV       where buffers live: cpu (default), cuda (the GPU of the local rank, modulo\n"
        "                         the GPUs visible) or cuda:N. cuda loads the CUDA runtime (libcudart.so.13, .12\n"
        "                         or libcudart.so; TCOMMS_PERF_CUDART names another) and orders every operation\n"
        "                         and copy on one stream of this rank (opts.stream); times then include a\n"
        "                         stream synchronize, and -z 1 synchronizes after each call, as nccl-tests\n"
        "  -R, --local_register M 0: plain buffers (cudaMalloc); 1: tcomms_mem_alloc + tcomms_mem_register;\n"
        "                         2: tcomms_mem_alloc + a symmetric window (TCOMMS_MEM_REG_WINDOW) (default 0;\n"
        "                         cpu accepts and ignores it)\n"
        "  -G, --cudagraph N      capture the -n iterations in a CUDA graph and time N replays of it (default 0:\n"
        "                         no graph; cuda only)\n"
        "  -J, --json FILE        also write the results as JSON to FILE (rank 0)\n"
        "  -L, --label TEXT       name of this run in JSON and charts (default: the backend name)\n"
        "  -h, --help             print this help and exit\n"
        "\n"
        "Columns: size (B, max of send and receive bytes per rank), count (elements per call and rank), type,\n"
        "redop, root, then for out-of-place and in-place: time (us per op), algbw and busbw (GB/s, 1e9 B/s),\n"
        "#wrong (wrong elements summed over ranks). busbw = algbw * 2(n-1)/n for all_reduce, * 1 for broadcast,\n"
        "reduce and sendrecv, * (n-1)/n for the others. Forms a collective lacks print N/A. When stderr is a\n"
        "terminal, rank 0 shows progress there. Exit status: 0; 1 on a runtime error or any wrong element;\n"
        "2 on a usage error.\n"
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

static int parse_int(const char *flag, const char *text, int lo, int hi, int *out)
{
    errno = 0;
    char *end;
    long v = strtol(text, &end, 10);
    if (end == text || *end != '\0' || errno != 0 || v < lo || v > hi) {
        if (hi >= INT_MAX / 2)
            return bad("%s: '%s' must be an integer >= %d", flag, text, lo);
        return bad("%s: '%s' must be an integer in %d..%d", flag, text, lo, hi);
    }
    *out = (int)v;
    return 0;
}

/* The library's parse message, after the flag at fault. */
static int lib_bad(const char *flag)
{
    return bad("%s: %s", flag, tcomms_last_error());
}

static const struct option longopts[] = {
    {"coll", required_argument, NULL, 'C'},       {"minbytes", required_argument, NULL, 'b'},
    {"maxbytes", required_argument, NULL, 'e'},   {"stepfactor", required_argument, NULL, 'f'},
    {"stepbytes", required_argument, NULL, 'i'},  {"iters", required_argument, NULL, 'n'},
    {"warmup_iters", required_argument, NULL, 'w'}, {"check", required_argument, NULL, 'c'},
    {"datatype", required_argument, NULL, 'd'},   {"op", required_argument, NULL, 'o'},
    {"root", required_argument, NULL, 'r'},       {"average", required_argument, NULL, 'a'},
    {"run_cycles", required_argument, NULL, 'N'}, {"blocking", required_argument, NULL, 'z'},
    {"backend", required_argument, NULL, 'B'},    {"device", required_argument, NULL, 'D'},
    {"json", required_argument, NULL, 'J'},       {"label", required_argument, NULL, 'L'},
    {"local_register", required_argument, NULL, 'R'}, {"cudagraph", required_argument, NULL, 'G'},
    {"help", no_argument, NULL, 'h'},             {NULL, 0, NULL, 0},
};

/* One option; 0, or the exit status of a usage error. */
static int option(perf_args_t *a, int c, const char *v, const char **coll)
{
    int x = 0, st = 0;
    switch (c) {
    case 'C': *coll = v; break;
    case 'b': st = parse_size("-b/--minbytes", v, &a->min_bytes); break;
    case 'e': st = parse_size("-e/--maxbytes", v, &a->max_bytes); break;
    case 'i': st = parse_size("-i/--stepbytes", v, &a->step_bytes); break;
    case 'f': st = parse_int("-f/--stepfactor", v, 1, 1 << 20, &a->step_factor); break;
    case 'n': st = parse_int("-n/--iters", v, 1, INT_MAX / 2, &a->iters); break;
    case 'w': st = parse_int("-w/--warmup_iters", v, 0, INT_MAX / 2, &a->warmup); break;
    case 'c': st = parse_int("-c/--check", v, 0, INT_MAX, &x); a->check = x > 0; break;
    case 'r': st = parse_int("-r/--root", v, 0, INT_MAX, &a->root); break;
    case 'a': st = parse_int("-a/--average", v, 0, 3, &a->average); break;
    case 'N': st = parse_int("-N/--run_cycles", v, 0, INT_MAX, &a->cycles); break;
    case 'z': st = parse_int("-z/--blocking", v, 0, 1, &a->blocking); break;
    case 'R': st = parse_int("-R/--local_register", v, 0, 2, &a->local_register); break;
    case 'G': st = parse_int("-G/--cudagraph", v, 0, INT_MAX / 2, &a->graph); break;
    case 'd': st = tcomms_dtype_parse(v, &a->dtype) == TCOMMS_SUCCESS ? 0 : lib_bad("-d/--datatype"); break;
    case 'o': st = tcomms_op_parse(v, &a->op) == TCOMMS_SUCCESS ? 0 : lib_bad("-o/--op"); break;
    case 'D': st = tcomms_device_parse(v, &a->device) == TCOMMS_SUCCESS ? 0 : lib_bad("-D/--device"); break;
    case 'B': a->backend = v; st = *v ? 0 : bad("-B/--backend: the backend name is empty"); break;
    case 'J': a->json = v; break;
    case 'L': a->label = v; break;
    default: st = -1; break; /* getopt's '?': named by the caller */
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
        else
            return bad("unknown collective '%.*s' (all_reduce all_gather reduce_scatter broadcast reduce alltoall "
                       "gather scatter sendrecv all_gather_v reduce_scatter_v alltoall_v all, or a comma-separated "
                       "list of them)", (int)n, p);
        p += n;
        if (*p == '\0')
            return 0;
    }
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
        return bad("-G/--cudagraph %d needs -D cuda (CUDA graphs capture work on a GPU stream)", a->graph);
    const char *corrupt = getenv("TCOMMS_PERF_CORRUPT");
    a->corrupt = corrupt != NULL && strcmp(corrupt, "1") == 0;
    return -1;
}

int perf_args_parse(int argc, char **argv, perf_args_t *a)
{
    *a = (perf_args_t){.min_bytes = 32u << 20, .max_bytes = 32u << 20, .step_bytes = 1u << 20, .step_factor = 1,
                       .iters = 20, .warmup = 1, .check = 1, .average = 1, .cycles = 1, .dtype = TCOMMS_FLOAT32,
                       .op = TCOMMS_SUM, .device = {TCOMMS_DEVICE_CPU, 0}};
    const char *coll = NULL;
    int c;
    optind = 1;
    opterr = 0; /* getopt would name the program by its path; we say it ourselves */
    while ((c = getopt_long(argc, argv, "b:e:f:i:n:w:c:d:o:r:a:N:z:B:D:J:L:R:G:h", longopts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return 0;
        }
        int st = option(a, c, optarg, &coll);
        if (st < 0)
            return bad("option '%s' is unknown or lacks its value", argv[optind - 1]);
        if (st != 0)
            return st;
    }
    for (; optind < argc; optind++) {
        if (coll != NULL)
            return bad("more than one collective given ('%s' and '%s')", coll, argv[optind]);
        coll = argv[optind];
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
