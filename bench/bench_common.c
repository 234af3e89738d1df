/* SPDX-License-Identifier: BSD-3-Clause */
/* The parts of the reference programs that do not depend on the library measured (see bench_common.h): options,
 * tables, layouts, the sweep, fill and check; their output is in bench_report.c. Our own reference code, kept
 * independent of tools/perf on purpose, but with the same layout rules (docs/perf.md) so sizes and factors match. */
#include "bench_common.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

const bench_coll_t bench_colls[B_NCOLLS] = {
    [B_ALL_REDUCE] = {"all_reduce", B_REDUCES | B_IN_PLACE, SHAPE_WHOLE, 0, 2},
    [B_ALL_GATHER] = {"all_gather", B_IN_PLACE, SHAPE_GATHER, 0, 1},
    [B_REDUCE_SCATTER] = {"reduce_scatter", B_REDUCES | B_IN_PLACE, SHAPE_SCATTER, 0, 1},
    [B_BROADCAST] = {"broadcast", B_ROOTED | B_ONE_BUFFER, SHAPE_WHOLE, 0, 0},
    [B_REDUCE] = {"reduce", B_REDUCES | B_ROOTED | B_IN_PLACE, SHAPE_WHOLE, 0, 0},
    [B_ALLTOALL] = {"alltoall", B_IN_PLACE, SHAPE_ALLTOALL, 0, 1},
    [B_GATHER] = {"gather", B_ROOTED | B_IN_PLACE, SHAPE_GATHER, 0, 1},
    [B_SCATTER] = {"scatter", B_ROOTED | B_IN_PLACE, SHAPE_SCATTER, 0, 1},
    [B_SENDRECV] = {"sendrecv", B_PAIRWISE, SHAPE_WHOLE, 0, 0},
    [B_ALL_GATHER_V] = {"all_gather_v", B_IN_PLACE, SHAPE_GATHER, 1, 1},
    [B_REDUCE_SCATTER_V] = {"reduce_scatter_v", B_REDUCES | B_IN_PLACE, SHAPE_SCATTER, 1, 1},
    [B_ALLTOALL_V] = {"alltoall_v", 0, SHAPE_ALLTOALL, 1, 1},
};

const bench_dtype_t bench_dtypes[B_NDTYPES] = {
    [B_INT8] = {"int8", "int8", 1, 0},          [B_UINT8] = {"uint8", "uint8", 1, 0},
    [B_INT32] = {"int32", "int32", 4, 0},       [B_INT64] = {"int64", "int64", 8, 0},
    [B_HALF] = {"half", "float16", 2, 1},       [B_BFLOAT16] = {"bfloat16", "bfloat16", 2, 1},
    [B_FLOAT] = {"float", "float32", 4, 1},     [B_DOUBLE] = {"double", "float64", 8, 1},
};

const char *const bench_op_names[B_NOPS] = {"sum", "prod", "min", "max", "avg"};

/* ---- command line -------------------------------------------------------------------------------------------- */

static void usage(FILE *f, const char *prog, const char *about)
{
    fprintf(f,
            "usage: %s COLL [options]   (or --coll COLL)\n%s\n"
            "COLL: all_reduce all_gather reduce_scatter broadcast reduce alltoall gather scatter sendrecv\n"
            "      all_gather_v reduce_scatter_v alltoall_v, or all, or a comma-separated list (run in that order).\n"
            "Options as tcomms-perf and nccl-tests:\n"
            "  -b, --minbytes N      smallest size (default 32M; K/M/G suffixes are powers of 1024)\n"
            "  -e, --maxbytes N      largest size (default 32M)\n"
            "  -f, --stepfactor F    multiply the size by F (default 1: add -i instead)\n"
            "  -i, --stepbytes N     add N bytes (default 1M)\n"
            "  -n, --iters N         timed iterations per size (default 20)\n"
            "  -w, --warmup_iters N  untimed iterations per size (default 1)\n"
            "  -c, --check 0|1       check the results (default 1)\n"
            "  -d, --datatype T      int8 uint8 int32 int64 half float16 bfloat16 float float32 double float64\n"
            "  -o, --op OP           sum prod min max avg (default sum)\n"
            "  -r, --root R          root of rooted collectives (default 0)\n"
            "  -a, --average 0-3     time reported: 0 rank 0, 1 mean, 2 min, 3 max over ranks (default 1)\n"
            "  -z, --blocking 0|1    0: post every iteration, then wait; 1: each call completes (default 0;\n"
            "                        tcomms-perf -z 2, as compare-openmpi and compare-nccl pass it)\n"
            "      --json FILE       also write the results as tcomms' JSON (tcomms-perf --json's, which\n"
            "                        tcomms-plot reads)\n"
            "  -J FILE               the same as --json: tcomms' JSON, not nccl-tests' (unlike tcomms-perf -J)\n"
            "  -L, --label TEXT      the name of this run in charts\n"
            "  -g, --ngpus N         ranks to start, one process per GPU (nccl_bench only)\n"
            "  -R, --local_register M  buffers (nccl_bench only): 0 cudaMalloc (default), 1 ncclMemAlloc +\n"
            "                        ncclCommRegister, 2 ncclMemAlloc + ncclCommWindowRegister (symmetric)\n"
            "  --cpu-bind auto|none  each rank on its own block of CPUs, as tcomms-run's (nccl_bench only)\n"
            "  -G, --cudagraph N     capture the -n iterations in a CUDA graph and time N replays of it, as\n"
            "                        tcomms-perf -G (nccl_bench only; default 0: no graph)\n"
            "  --group               every call inside ncclGroupStart/End, as nccl-tests makes it (nccl_bench\n"
            "                        only; default: only operations made of several NCCL calls)\n"
            "  --event               record a CUDA event on the stream after every call, as a library that\n"
            "                        watches each call for its timeout does (nccl_bench only)\n"
            "  --report_cputime 0|1  1: report the host's time to post the calls instead of their completion,\n"
            "                        as tcomms-perf -C (nccl_bench only, without -G)\n"
            "  -h, --help            this help\n",
            prog, about);
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || s[0] == '-' || errno != 0)
        return -1;
    unsigned shift = 0;
    if (*end != '\0') {
        const char *units = "kmg", *u = strchr(units, end[0] | 0x20);
        if (u == NULL || end[1] != '\0')
            return -1;
        shift = 10u * (unsigned)(u - units + 1);
    }
    if (v > (SIZE_MAX >> shift))
        return -1;
    *out = (size_t)v << shift;
    return 0;
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || errno != 0 || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

static int parse_dtype(const char *s, enum bench_dtype_id *t)
{
    static const struct { const char *name; enum bench_dtype_id id; } names[] = {
        {"int8", B_INT8}, {"uint8", B_UINT8}, {"int32", B_INT32}, {"int64", B_INT64}, {"half", B_HALF},
        {"float16", B_HALF}, {"bfloat16", B_BFLOAT16}, {"float", B_FLOAT}, {"float32", B_FLOAT},
        {"double", B_DOUBLE}, {"float64", B_DOUBLE}};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if (strcmp(s, names[k].name) == 0) {
            *t = names[k].id;
            return 0;
        }
    return -1;
}

/* Is `name` one of the comma-separated words of `list`? */
static int listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list;; p++) {
        size_t w = strcspn(p, ",");
        if (w == n && strncmp(p, name, n) == 0)
            return 1;
        p += w;
        if (*p == '\0')
            return 0;
    }
}

/* COLL: a name, `all`, or a comma-separated list of them, run in table order; every word must name something. */
static int set_coll(const char *s, bench_opts_t *o)
{
    o->ncolls = 0;
    for (int k = 0; k < B_NCOLLS; k++)
        if (listed(s, "all") || listed(s, bench_colls[k].name))
            o->colls[o->ncolls++] = k;
    char word[64];
    for (const char *p = s;; p++) {
        size_t w = strcspn(p, ",");
        snprintf(word, sizeof word, "%.*s", (int)(w < sizeof word ? w : 0), p);
        int k = 0;
        while (k < B_NCOLLS && strcmp(word, bench_colls[k].name) != 0)
            k++;
        if (k == B_NCOLLS && strcmp(word, "all") != 0)
            return -1;
        p += w;
        if (*p == '\0')
            return 0;
    }
}

#define BAD(...) do { if (!quiet) { fprintf(stderr, "%s: ", prog); fprintf(stderr, __VA_ARGS__); \
    fprintf(stderr, "\nTry '%s --help' for more information.\n", prog); } return 2; } while (0)

int bench_parse(int argc, char **argv, const char *prog, const char *about, int quiet, bench_opts_t *o)
{
    static const struct option longs[] = {
        {"minbytes", 1, 0, 'b'}, {"maxbytes", 1, 0, 'e'}, {"stepfactor", 1, 0, 'f'}, {"stepbytes", 1, 0, 'i'},
        {"iters", 1, 0, 'n'}, {"warmup_iters", 1, 0, 'w'}, {"check", 1, 0, 'c'}, {"datatype", 1, 0, 'd'},
        {"op", 1, 0, 'o'}, {"root", 1, 0, 'r'}, {"average", 1, 0, 'a'}, {"blocking", 1, 0, 'z'},
        {"json", 1, 0, 'J'}, {"ngpus", 1, 0, 'g'}, {"label", 1, 0, 'L'}, {"coll", 1, 0, 'C'}, {"help", 0, 0, 'h'},
        {"local_register", 1, 0, 'R'}, {"cpu-bind", 1, 0, 'P'}, {"cudagraph", 1, 0, 'G'},
        {"group", 0, 0, 'Q'}, {"event", 0, 0, 'E'}, {"report_cputime", 1, 0, 'U'},
        {0, 0, 0, 0}};
    *o = (bench_opts_t){.minbytes = 32u << 20, .maxbytes = 32u << 20, .stepbytes = 1u << 20, .stepfactor = 1,
                        .iters = 20, .warmup = 1, .check = 1, .average = 1, .dtype = B_FLOAT, .op = B_SUM};
    const char *coll = NULL;
    int opt, f;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":b:e:f:i:n:w:c:d:o:r:a:z:J:L:g:R:G:h", longs, NULL)) != -1) {
        const char *v = optarg;
        switch (opt) {
        case 'b': if (parse_size(v, &o->minbytes)) BAD("-b needs a size like 8, 64K or 1G, not '%s'", v); break;
        case 'e': if (parse_size(v, &o->maxbytes)) BAD("-e needs a size like 8, 64K or 1G, not '%s'", v); break;
        case 'i': if (parse_size(v, &o->stepbytes) || o->stepbytes == 0) BAD("-i needs a size above 0, not '%s'", v);
                  break;
        case 'f': if (parse_int(v, 1, 1 << 20, &f)) BAD("-f needs a factor of 1 or more, not '%s'", v);
                  o->stepfactor = (size_t)f; break;
        case 'n': if (parse_int(v, 1, 1 << 30, &o->iters)) BAD("-n needs 1 or more iterations, not '%s'", v); break;
        case 'w': if (parse_int(v, 0, 1 << 30, &o->warmup)) BAD("-w needs 0 or more iterations, not '%s'", v); break;
        case 'c': if (parse_int(v, 0, 1, &o->check)) BAD("-c needs 0 or 1, not '%s'", v); break;
        case 'r': if (parse_int(v, 0, 1 << 30, &o->root)) BAD("-r needs a rank, not '%s'", v); break;
        case 'a': if (parse_int(v, 0, 3, &o->average)) BAD("-a needs 0, 1, 2 or 3, not '%s'", v); break;
        case 'z': if (parse_int(v, 0, 1, &o->blocking)) BAD("-z needs 0 or 1, not '%s'", v); break;
        case 'd': if (parse_dtype(v, &o->dtype)) BAD("unknown datatype '%s'", v); break;
        case 'o': {
            int k = 0;
            while (k < B_NOPS && strcmp(v, bench_op_names[k]) != 0)
                k++;
            if (k == B_NOPS) BAD("unknown op '%s' (sum prod min max avg)", v);
            o->op = (enum bench_op_id)k;
            break;
        }
        case 'g': if (parse_int(v, 1, 4096, &o->ngpus)) BAD("-g needs 1 to 4096 ranks, not '%s'", v); break;
        case 'R': if (parse_int(v, 0, 2, &o->local_register)) BAD("-R needs 0, 1 or 2, not '%s'", v); break;
        case 'G': if (parse_int(v, 0, 1 << 20, &o->graph)) BAD("-G needs 0 or more replays, not '%s'", v); break;
        case 'Q': o->group = 1; break;
        case 'E': o->event = 1; break;
        case 'U': if (parse_int(v, 0, 1, &o->cputime)) BAD("--report_cputime needs 0 or 1, not '%s'", v); break;
        case 'P':
            if (strcmp(v, "auto") != 0 && strcmp(v, "none") != 0) BAD("--cpu-bind needs auto or none, not '%s'", v);
            o->cpu_bind = v[0] == 'a';
            break;
        case 'J': o->json = v; break;
        case 'L': o->label = v; break;
        case 'C': coll = v; break;
        case 'h': if (!quiet) usage(stdout, prog, about); return 0;
        case ':': BAD("option '%s' needs a value", argv[optind - 1]);
        default: BAD("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc && coll == NULL)
        coll = argv[optind++];
    if (optind < argc) BAD("unexpected argument '%s'", argv[optind]);
    if (coll == NULL) BAD("missing the collective to run (or all)");
    if (set_coll(coll, o)) BAD("unknown collective '%s'", coll);
    if (o->minbytes > o->maxbytes) BAD("-b (%zu) is larger than -e (%zu)", o->minbytes, o->maxbytes);
    return -1;
}

size_t bench_next_size(const bench_opts_t *o, size_t bytes)
{
    size_t next;
    if (o->stepfactor > 1)
        next = bytes == 0 ? 1 : (bytes > SIZE_MAX / o->stepfactor ? 0 : bytes * o->stepfactor);
    else
        next = bytes > SIZE_MAX - o->stepbytes ? 0 : bytes + o->stepbytes;
    return next > o->maxbytes ? 0 : next;
}

/* ---- layouts -------------------------------------------------------------------------------------------------- */

int bench_ctx_init(bench_ctx_t *c, const bench_opts_t *o, int rank, int nranks)
{
    *c = (bench_ctx_t){.o = o, .rank = rank, .nranks = nranks};
    c->vec = calloc(5 * (size_t)nranks, sizeof *c->vec);
    return c->vec ? 0 : -1;
}

void bench_ctx_free(bench_ctx_t *c)
{
    free(c->vec);
    c->vec = NULL;
}

/* The v-variants spread n * b elements as a ramp (rank k gets about 2b(k+1)/(n+1), the last rank the rest): the
 * same total as the equal variant, so the size column and bus bandwidth compare directly. In alltoall_v, rank i
 * sends blk[(i + j) % n] elements to rank j, which makes the pattern symmetric: j sends i as many back. */
static void ramp(bench_ctx_t *c, size_t b, bench_layout_t *l)
{
    size_t n = (size_t)c->nranks, me = (size_t)c->rank, at = 0;
    l->blk = c->vec;
    l->displ = c->vec + n;
    l->a2a_cnt = c->vec + 2 * n;
    l->a2a_displ = c->vec + 3 * n;
    l->a2a_src = c->vec + 4 * n;
    for (size_t k = 0; k < n; k++) {
        l->blk[k] = k + 1 < n ? 2 * b * (k + 1) / (n + 1) : n * b - at;
        l->displ[k] = at;
        at += l->blk[k];
    }
    at = 0;
    for (size_t j = 0; j < n; j++) {
        l->a2a_cnt[j] = l->blk[(me + j) % n];
        l->a2a_displ[j] = at;
        at += l->a2a_cnt[j];
        l->a2a_src[j] = 0; /* rank j's send buffer holds blocks for ranks 0..me-1 before ours */
        for (size_t t = 0; t < me; t++)
            l->a2a_src[j] += l->blk[(j + t) % n];
    }
}

void bench_layout(bench_ctx_t *c, size_t bytes, bench_layout_t *l)
{
    const bench_coll_t *k = c->coll;
    size_t es = bench_dtypes[c->o->dtype].size, n = (size_t)c->nranks, me = (size_t)c->rank;
    size_t elems = bytes / es, b = elems / n;
    int root = c->rank == c->o->root;
    *l = (bench_layout_t){0};
    if (k->vector)
        ramp(c, b, l);
    switch (k->shape) {
    case SHAPE_WHOLE:
        l->count = l->nsend = l->nrecv = l->extent = elems;
        if (k->flags & B_ONE_BUFFER)
            l->nsend = root ? elems : 0;
        if (k->flags & B_ROOTED && k->flags & B_REDUCES)
            l->nrecv = root ? elems : 0;
        break;
    case SHAPE_GATHER:
        l->count = b;
        l->extent = l->nrecv = n * b;
        l->nsend = k->vector ? l->blk[me] : b;
        l->send_ip = k->vector ? l->displ[me] : me * b;
        if (k->flags & B_ROOTED && !root)
            l->nrecv = 0;
        break;
    case SHAPE_SCATTER:
        l->count = b;
        l->extent = l->nsend = n * b;
        l->nrecv = k->vector ? l->blk[me] : b;
        l->recv_ip = k->vector ? l->displ[me] : me * b;
        if (k->flags & B_ROOTED && !root)
            l->nsend = 0;
        break;
    case SHAPE_ALLTOALL:
        l->count = b;
        l->extent = l->nsend = l->nrecv = n * b;
        break;
    }
    l->bytes = (k->shape == SHAPE_WHOLE ? elems : n * b) * es;
}

void bench_sweep(bench_ctx_t *c, bench_layout_t *l, bench_report_t *r, int ip_ok, bench_measure_fn f, void *arg)
{
    const bench_coll_t *k = c->coll;
    size_t bytes = c->o->minbytes;
    do {
        bench_layout(c, bytes, l);
        bench_fig_t oop = {0}, ip = {0};
        if (!(k->flags & B_PAIRWISE && c->nranks == 1)) {
            f(arg, 0, &oop);
            if (k->flags & B_IN_PLACE && ip_ok)
                f(arg, 1, &ip);
        }
        bench_report_row(r, l, &oop, &ip);
        bytes = bench_next_size(c->o, bytes);
    } while (bytes != 0);
}

/* ---- values: small integers, exact in every dtype ------------------------------------------------------------ */

static double red_input(const bench_ctx_t *c, int rank, size_t i)
{
    if (c->o->op == B_PROD) /* one factor of 2 per element: no overflow on any rank count */
        return (size_t)rank == i % (size_t)c->nranks ? 2.0 : 1.0;
    return (double)(1 + ((size_t)rank * 3 + i) % 5);
}

double bench_input(const bench_ctx_t *c, int rank, size_t i)
{
    if (c->coll->flags & B_REDUCES)
        return red_input(c, rank, i);
    return (double)(1 + (i * 5 + (size_t)rank * 11) % 97);
}

static double reduced(const bench_ctx_t *c, size_t i)
{
    double acc = red_input(c, 0, i);
    for (int r = 1; r < c->nranks; r++) {
        double v = red_input(c, r, i);
        switch (c->o->op) {
        case B_PROD: acc *= v; break;
        case B_MIN: acc = fmin(acc, v); break;
        case B_MAX: acc = fmax(acc, v); break;
        default: acc += v; break;
        }
    }
    if (!bench_dtypes[c->o->dtype].is_float) { /* integers wrap to their width */
        int64_t x = (int64_t)acc;
        acc = c->o->dtype == B_INT8 ? (int8_t)x : c->o->dtype == B_UINT8 ? (uint8_t)x
            : c->o->dtype == B_INT32 ? (int32_t)x : (double)x;
        if (c->o->op == B_AVG)
            return (double)((int64_t)acc / c->nranks);
    }
    return c->o->op == B_AVG ? acc / c->nranks : acc;
}

/* The block of a v-layout holding element i (blocks ascend; empty ones share the next one's displacement). */
static size_t block_of(const size_t *cnt, const size_t *displ, size_t n, size_t i)
{
    size_t j = n - 1;
    while (j > 0 && (displ[j] > i || cnt[j] == 0))
        j--;
    return j;
}

double bench_expected(const bench_ctx_t *c, const bench_layout_t *l, size_t i)
{
    size_t n = (size_t)c->nranks, me = (size_t)c->rank, b = l->count, j;
    int prev = (c->rank + c->nranks - 1) % c->nranks;
    switch ((int)(c->coll - bench_colls)) {
    case B_ALL_REDUCE: case B_REDUCE: return reduced(c, i);
    case B_REDUCE_SCATTER: return reduced(c, me * b + i);
    case B_REDUCE_SCATTER_V: return reduced(c, l->displ[me] + i);
    case B_BROADCAST: return bench_input(c, c->o->root, i);
    case B_SCATTER: return bench_input(c, c->o->root, me * b + i);
    case B_SENDRECV: return bench_input(c, prev, i);
    case B_ALL_GATHER: case B_GATHER: return bench_input(c, (int)(i / b), i % b);
    case B_ALLTOALL: return bench_input(c, (int)(i / b), me * b + i % b);
    case B_ALL_GATHER_V:
        j = block_of(l->blk, l->displ, n, i);
        return bench_input(c, (int)j, i - l->displ[j]);
    case B_ALLTOALL_V:
        j = block_of(l->a2a_cnt, l->a2a_displ, n, i);
        return bench_input(c, (int)j, l->a2a_src[j] + i - l->a2a_displ[j]);
    }
    return NAN;
}

/* IEEE half and bfloat16, round to nearest even; the values stored here are small, so no subnormals. */
static uint16_t to_half(double v)
{
    uint16_t sign = signbit(v) ? 0x8000u : 0;
    int e;
    double m = frexp(fabs(v), &e); /* |v| = m * 2^e, m in [0.5, 1) */
    if (m == 0.0 || e < -13)
        return sign;
    double mant = nearbyint(ldexp(m, 11));
    if (mant >= 2048.0)
        mant = 1024.0, e++;
    if (e > 16)
        return sign | 0x7c00u;
    return (uint16_t)(sign | (unsigned)(e + 14) << 10 | (unsigned)(mant - 1024.0));
}

static double from_half(uint16_t h)
{
    int e = h >> 10 & 0x1f;
    double m = h & 0x3ff, v = e == 0 ? ldexp(m, -24) : e == 31 ? INFINITY : ldexp(m + 1024.0, e - 25);
    return h & 0x8000u ? -v : v;
}

static uint16_t to_bf16(double v)
{
    float f = (float)v;
    uint32_t x;
    memcpy(&x, &f, 4);
    return (uint16_t)((x + 0x7fffu + (x >> 16 & 1u)) >> 16);
}

static double from_bf16(uint16_t b)
{
    uint32_t x = (uint32_t)b << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

void bench_store(enum bench_dtype_id t, void *buf, size_t i, double v)
{
    char *p = (char *)buf + i * bench_dtypes[t].size;
    int64_t x = (int64_t)v;
    union { int8_t i8; uint8_t u8; int32_t i32; int64_t i64; uint16_t h; float f; double d; } u;
    switch (t) {
    case B_INT8: u.i8 = (int8_t)x; break;
    case B_UINT8: u.u8 = (uint8_t)x; break;
    case B_INT32: u.i32 = (int32_t)x; break;
    case B_INT64: u.i64 = x; break;
    case B_HALF: u.h = to_half(v); break;
    case B_BFLOAT16: u.h = to_bf16(v); break;
    case B_FLOAT: u.f = (float)v; break;
    default: u.d = v; break;
    }
    memcpy(p, &u, bench_dtypes[t].size); /* every member starts at the union's first byte */
}

static double load(enum bench_dtype_id t, const void *buf, size_t i)
{
    const char *p = (const char *)buf + i * bench_dtypes[t].size;
    union { int8_t i8; uint8_t u8; int32_t i32; int64_t i64; uint16_t h; float f; double d; } u;
    memcpy(&u, p, bench_dtypes[t].size);
    switch (t) {
    case B_INT8: return u.i8;
    case B_UINT8: return u.u8;
    case B_INT32: return u.i32;
    case B_INT64: return (double)u.i64;
    case B_HALF: return from_half(u.h);
    case B_BFLOAT16: return from_bf16(u.h);
    case B_FLOAT: return u.f;
    default: return u.d;
    }
}

void bench_fill(const bench_ctx_t *c, const bench_layout_t *l, void *buf)
{
    for (size_t i = 0; i < l->nsend; i++)
        bench_store(c->o->dtype, buf, i, bench_input(c, c->rank, i));
}

size_t bench_count_wrong(const bench_ctx_t *c, const bench_layout_t *l, const void *recv)
{
    static const double tol[B_NDTYPES] = {[B_HALF] = 1e-2, [B_BFLOAT16] = 2e-2, [B_FLOAT] = 1e-5,
                                          [B_DOUBLE] = 1e-12};
    size_t wrong = 0;
    for (size_t i = 0; i < l->nrecv; i++) {
        double got = load(c->o->dtype, recv, i), want = bench_expected(c, l, i);
        if (!(fabs(got - want) <= tol[c->o->dtype] * fmax(1.0, fabs(want)))) /* NaN counts as wrong */
            wrong++;
    }
    return wrong;
}
