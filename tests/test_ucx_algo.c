/* SPDX-License-Identifier: BSD-3-Clause */
/* Every algorithm of the UCX backend (backends/ucx/select.c), forced through TCOMMS_UCX_<COLL>_ALGO: test_coll's
 * small counts only reach what the rules pick, so Rabenseifner, scatter-allgather broadcast, binomial scatter, Bruck
 * and recursive doubling would otherwise never run. Round k forces the k-th algorithm of every operation's list on a
 * communicator split for it and runs each over the dtype x op table at tiny counts (0, 1, about the rank count), a
 * count no rank count divides and one above every size threshold, in and out of place, every root; on 2, 3 and 4
 * ranks (TCOMMS_TEST_RANKS; `make check-long` runs 5 to 8). Values hash (case, rank, index), so a block in the wrong
 * place shows, and stay small integers, so every result is exact; expectations are plain loops in double. The test
 * also checks that the backend says what it forced and refuses a name that is not in an operation's list. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tcomms/tcomms.h>
#include <unistd.h>

#include "coll_ref.h"
#include "mrank.h"
#include "mrank_world.h"

#define MAX_RANKS REF_MAX_RANKS
#define MAX_ALGOS 4
#define OP_TIMEOUT_MS 20000u
#define JOB_TIMEOUT_S 150 /* per job up to 4 ranks; oversubscribed jobs get more */
#define NDTYPES ((int)TCOMMS_DTYPE_COUNT)
#define NOPS ((int)TCOMMS_OP_COUNT)
/* Above every size threshold of select.c's rules (all_gather and gather 1 KiB, reduce_scatter 4 KiB, all_reduce
 * 8 KiB, all_to_all 32 KiB) and the engine's 64 KiB "big collective"; reduce switches at 1 MiB. */
#define LARGE_BYTES (66u << 10)
#define HUGE_BYTES ((1u << 20) + 4096u)
#define MEDIUM_COUNT 29u /* no rank count from 2 to 8 divides it */

/* ---- the algorithms, as select.c lists them ------------------------------------------------------------------- */

/* VCOUNTS: the row is the count-array form of an operation, whose case function serves both (tcase_t's v). */
enum { REDUCING = 1, ROOTED = 2, HUGE = 4, VCOUNTS = 8 };

typedef struct ctx ctx_t;
typedef struct tcase tcase_t;
typedef int (*case_fn)(ctx_t *x, const tcase_t *c);

typedef struct coll_row {
    const char *name; /* as the library names the operation */
    const char *env;
    const char *algos[MAX_ALGOS + 1];
    unsigned flags;
    case_fn run;
} coll_row_t;

/* Sizes of a case: classes of counts (per rank, or per peer for all_to_all), and count patterns for v-variants. */
enum { C_ZERO, C_ONE, C_FEW, C_MEDIUM, C_LARGE, NCLASSES, C_HUGE = NCLASSES };

struct tcase {
    tcomms_dtype_t dt;
    tcomms_op_t op;
    int cls;
    int inplace;
    int root;
    int layout; /* v-variants: displacements NULL, with gaps, or reversed with gaps */
    int v;      /* the v-variant of the operation (its row's VCOUNTS) */
};

struct ctx {
    tcomms_comm_t *world, *comm;
    int rank, size;
    const char *algo;     /* forced for the operation under test */
    uint32_t salt;        /* bumped per case: each fills its buffers with other values */
    volatile int *shared; /* barrier counter */
    int barrier_round;
    int stop;             /* a call failed: the ranks may be out of step, so run nothing more */
    int calls;
    char variant[160];
};

/* ---- values --------------------------------------------------------------------------------------------------- */

static uint32_t hash3(uint32_t salt, int who, size_t i)
{
    uint64_t z = ((uint64_t)salt << 36) ^ ((uint64_t)(unsigned)who << 28) ^ (uint64_t)i; /* splitmix64's finish */
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}

/* Input of reductions: nonzero, |v| <= 3 on ranks 0-3 and |v| = 1 above (uint8: 1..3, then 1), so that over up to
 * 8 ranks sums stay within 16 and products within 81: exact in every dtype, whatever the order of reduction. */
static double red_value(tcomms_dtype_t dt, uint32_t salt, int rank, size_t i)
{
    static const double vals[] = {-3, -2, -1, 1, 2, 3};
    uint32_t h = hash3(salt, rank, i);
    if (rank >= 4)
        return dt == TCOMMS_UINT8 || (h & 1u) ? 1.0 : -1.0;
    return dt == TCOMMS_UINT8 ? (double)(h % 3u + 1u) : vals[h % 6u];
}

static double red_expect(tcomms_dtype_t dt, tcomms_op_t op, uint32_t salt, int size, size_t i)
{
    double acc = red_value(dt, salt, 0, i);
    for (int r = 1; r < size; r++) {
        double v = red_value(dt, salt, r, i);
        if (op == TCOMMS_SUM || op == TCOMMS_AVG)
            acc += v;
        else if (op == TCOMMS_PROD)
            acc *= v;
        else if (op == TCOMMS_MIN)
            acc = v < acc ? v : acc;
        else
            acc = v > acc ? v : acc;
    }
    if (op != TCOMMS_AVG)
        return acc;
    if (dt == TCOMMS_FLOAT16 || dt == TCOMMS_BFLOAT16 || dt == TCOMMS_FLOAT32 || dt == TCOMMS_FLOAT64)
        return acc / size;
    return (double)((long long)acc / size); /* integer AVG truncates toward zero */
}

/* Data that moves: 8a + b + 64h, where a and b (0..7) say whose it is (source and destination rank, root) and h,
 * from the hash, fills what the dtype holds exactly (int8 to 127, bfloat16 to 256, float16 to 2048). One rank's
 * data never passes for another's, and data moved within a block shows too. */
static double mov_value(tcomms_dtype_t dt, uint32_t salt, int a, int b, size_t i)
{
    static const unsigned spans[] = {2, 4, 1024, 1024, 32, 4, 1024, 1024}; /* in tcomms_dtype_t order */
    return (double)(8 * a + b + 64 * (int)(hash3(salt, 8 * a + b, i) % spans[dt]));
}

/* ---- counts --------------------------------------------------------------------------------------------------- */

/* Elements of `bytes` or a little more, rounded so that no rank count from 2 to 8 divides it (840 = lcm(1..8)). */
static size_t odd_count(size_t bytes, tcomms_dtype_t dt)
{
    size_t n = bytes / ref_esize(dt);
    return (n + 839) / 840 * 840 + 13;
}

static size_t class_count(const ctx_t *x, int cls, tcomms_dtype_t dt)
{
    switch (cls) {
    case C_ZERO: return 0;
    case C_ONE: return 1;
    case C_FEW: return x->size > 2 ? (size_t)x->size - 1 : 3; /* below the rank count; on 2 ranks that is C_ONE */
    case C_MEDIUM: return MEDIUM_COUNT;
    case C_LARGE: return odd_count(LARGE_BYTES, dt);
    default: return odd_count(HUGE_BYTES, dt);
    }
}

/* Rank q's count in a v-variant of class `cls`: zeros among the others in all but C_FEW, one rank above the
 * thresholds in C_LARGE. */
static size_t class_vcount(const ctx_t *x, int cls, tcomms_dtype_t dt, int q)
{
    switch (cls) {
    case C_ZERO: return 0;
    case C_ONE: return (size_t)(q % 2);
    case C_FEW: return (size_t)(x->size - q);
    case C_MEDIUM: return q == 1 ? 0 : (size_t)(q * 7 + 3) % 13;
    default: return q == x->size - 1 ? odd_count(LARGE_BYTES, dt) : q % 3 == 1 ? 0 : MEDIUM_COUNT + (size_t)q;
    }
}

/* Displacements for counts cnt[0..size) in `layout`; returns the extent in elements, gaps included. */
static size_t make_displs(const size_t *cnt, int size, int layout, size_t *displs)
{
    size_t pos = layout == 0 ? 0 : 2;
    for (int k = 0; k < size; k++) {
        int q = layout == 2 ? size - 1 - k : k;
        displs[q] = pos;
        pos += cnt[q] + (layout == 0 ? 0 : 3);
    }
    return pos;
}

static const char *const layout_names[] = {"displs=NULL", "displs with gaps", "displs reversed with gaps"};

/* ---- plumbing ------------------------------------------------------------------------------------------------- */

static void buf_init(ref_buf_t *b, tcomms_dtype_t dt, size_t n)
{
    if (ref_buf_init(b, dt, n) != 0) {
        mrank_logf("test_ucx_algo: out of memory");
        _exit(100);
    }
}

static mrank_case_t mk_case(ctx_t *x, const char *coll, const tcase_t *c, int op, size_t n, int inplace, int root,
                            const char *more)
{
    snprintf(x->variant, sizeof x->variant, "algo=%s%s%s", x->algo, more ? " " : "", more ? more : "");
    mrank_case_t k = {coll, ref_dtype_name(c->dt), op ? ref_op_name(c->op) : NULL, x->variant, (long long)n,
                      inplace, root, x->rank, 0};
    return k;
}

/* 0 when st is SUCCESS; otherwise report, stop the table and return 1. */
static int failed_call(ctx_t *x, mrank_case_t *c, const char *call, tcomms_status_t st)
{
    x->calls++;
    if (st == TCOMMS_SUCCESS)
        return 0;
    mrank_case_status(c, call, st, tcomms_last_error());
    x->stop = 1;
    return 1;
}

/* The end of every case: when the call succeeded, both buffers against what the case expects of them (set
 * whatever the call returned: a failed call reads none of it); then free them. 0 when all was right. */
static int finish(ctx_t *x, mrank_case_t *k, const char *call, tcomms_status_t st, ref_buf_t *s, const char *s_name,
                  ref_buf_t *r)
{
    int bad = failed_call(x, k, call, st);
    if (!bad)
        bad = ref_check(k, s_name, s) | (r ? ref_check(k, "recvbuf", r) : 0);
    ref_buf_free(s);
    if (r)
        ref_buf_free(r);
    return bad;
}

/* A reduction's input on this rank: every element of b. */
static void fill_reduced(const ctx_t *x, const tcase_t *c, ref_buf_t *b)
{
    for (size_t j = 0; j < b->count; j++)
        ref_set(b, j, red_value(c->dt, x->salt, x->rank, j));
}

/* n elements of b from `at` must hold the reduction over the ranks of their input's elements from `from`. */
static void expect_reduced(const ctx_t *x, const tcase_t *c, ref_buf_t *b, size_t at, size_t from, size_t n)
{
    for (size_t i = 0; i < n; i++)
        b->expect[at + i] = red_expect(c->dt, c->op, x->salt, x->size, from + i);
}

/* ---- one function per operation ------------------------------------------------------------------------------- */

static int t_all_reduce(ctx_t *x, const tcase_t *c)
{
    size_t n = class_count(x, c->cls, c->dt);
    mrank_case_t k = mk_case(x, "all_reduce", c, 1, n, c->inplace, -1, NULL);
    ref_buf_t s, r;
    buf_init(&s, c->dt, n);
    buf_init(&r, c->dt, c->inplace ? 0 : n);
    fill_reduced(x, c, &s);
    ref_buf_t *out = c->inplace ? &s : &r;
    tcomms_status_t st = tcomms_all_reduce(x->comm, s.data, out->data, n, c->dt, c->op, NULL, NULL);
    expect_reduced(x, c, out, 0, 0, n);
    return finish(x, &k, "tcomms_all_reduce", st, &s, c->inplace ? "buf" : "sendbuf", &r);
}

/* Non-root ranks pass recvbuf NULL in place and an untouchable buffer otherwise. */
static int t_reduce(ctx_t *x, const tcase_t *c)
{
    size_t n = class_count(x, c->cls, c->dt);
    int is_root = x->rank == c->root;
    mrank_case_t k = mk_case(x, "reduce", c, 1, n, c->inplace, c->root, NULL);
    ref_buf_t s, r;
    buf_init(&s, c->dt, n);
    buf_init(&r, c->dt, c->inplace ? 0 : n);
    fill_reduced(x, c, &s);
    ref_buf_t *out = c->inplace ? &s : &r;
    void *rb = is_root || !c->inplace ? out->data : NULL;
    tcomms_status_t st = tcomms_reduce(x->comm, s.data, rb, n, c->dt, c->op, c->root, NULL, NULL);
    if (is_root)
        expect_reduced(x, c, out, 0, 0, n);
    return finish(x, &k, "tcomms_reduce", st, &s, c->inplace && is_root ? "buf" : "sendbuf", &r);
}

/* reduce_scatter and (c->v) reduce_scatter_v; block q of the input starts at off[q]. */
static int t_reduce_scatter(ctx_t *x, const tcase_t *c)
{
    size_t cnt[MAX_RANKS] = {0}, off[MAX_RANKS + 1] = {0};
    for (int q = 0; q < x->size; q++) {
        cnt[q] = c->v ? class_vcount(x, c->cls, c->dt, q) : class_count(x, c->cls, c->dt);
        off[q + 1] = off[q] + cnt[q];
    }
    size_t total = off[x->size], mine = cnt[x->rank], at = off[x->rank];
    mrank_case_t k = mk_case(x, c->v ? "reduce_scatter_v" : "reduce_scatter", c, 1, mine, c->inplace, -1, NULL);
    ref_buf_t s, r;
    buf_init(&s, c->dt, total);
    buf_init(&r, c->dt, c->inplace ? 0 : mine);
    fill_reduced(x, c, &s);
    void *rb = c->inplace ? ref_at(&s, at) : r.data;
    tcomms_status_t st = c->v ? tcomms_reduce_scatter_v(x->comm, s.data, rb, cnt, c->dt, c->op, NULL, NULL)
                              : tcomms_reduce_scatter(x->comm, s.data, rb, mine, c->dt, c->op, NULL, NULL);
    if (c->inplace) /* the other blocks of an in-place buffer are undefined afterwards */
        for (size_t j = 0; j < total; j++)
            s.expect[j] = REF_ANY;
    expect_reduced(x, c, c->inplace ? &s : &r, c->inplace ? at : 0, at, mine);
    return finish(x, &k, c->v ? "tcomms_reduce_scatter_v" : "tcomms_reduce_scatter", st, &s,
                  c->inplace ? "buf" : "sendbuf", &r);
}

/* Every rank fills the buffer with its own data; the root's must win. */
static int t_broadcast(ctx_t *x, const tcase_t *c)
{
    size_t n = class_count(x, c->cls, c->dt);
    mrank_case_t k = mk_case(x, "broadcast", c, 0, n, -1, c->root, NULL);
    ref_buf_t b;
    buf_init(&b, c->dt, n);
    for (size_t i = 0; i < n; i++)
        ref_set(&b, i, mov_value(c->dt, x->salt, x->rank, 0, i));
    tcomms_status_t st = tcomms_broadcast(x->comm, b.data, n, c->dt, c->root, NULL, NULL);
    for (size_t i = 0; i < n; i++)
        b.expect[i] = mov_value(c->dt, x->salt, c->root, 0, i);
    return finish(x, &k, "tcomms_broadcast", st, &b, "buf", NULL);
}

/* all_gather and (c->v) all_gather_v: rank q's block lands at displs[q]. */
static int t_all_gather(ctx_t *x, const tcase_t *c)
{
    size_t cnt[MAX_RANKS] = {0}, displs[MAX_RANKS] = {0};
    for (int q = 0; q < x->size; q++)
        cnt[q] = c->v ? class_vcount(x, c->cls, c->dt, q) : class_count(x, c->cls, c->dt);
    int layout = c->v ? c->layout : 0;
    size_t extent = make_displs(cnt, x->size, layout, displs), mine = cnt[x->rank];
    mrank_case_t k = mk_case(x, c->v ? "all_gather_v" : "all_gather", c, 0, mine, c->inplace, -1,
                             c->v ? layout_names[layout] : NULL);
    ref_buf_t s, r;
    buf_init(&s, c->dt, c->inplace ? 0 : mine);
    buf_init(&r, c->dt, extent);
    for (size_t i = 0; i < mine; i++)
        ref_set(c->inplace ? &r : &s, (c->inplace ? displs[x->rank] : 0) + i, mov_value(c->dt, x->salt, x->rank, 0, i));
    const void *sb = c->inplace ? ref_at(&r, displs[x->rank]) : s.data;
    tcomms_status_t st = c->v ? tcomms_all_gather_v(x->comm, sb, r.data, cnt, layout ? displs : NULL, c->dt, NULL, NULL)
                              : tcomms_all_gather(x->comm, sb, r.data, mine, c->dt, NULL, NULL);
    for (int q = 0; q < x->size; q++)
        for (size_t i = 0; i < cnt[q]; i++)
            r.expect[displs[q] + i] = mov_value(c->dt, x->salt, q, 0, i);
    return finish(x, &k, c->v ? "tcomms_all_gather_v" : "tcomms_all_gather", st, &s, "sendbuf", &r);
}

/* Block j of rank r's input is (r, j) data; in place the same buffer gets the blocks addressed to r. */
static int t_all_to_all(ctx_t *x, const tcase_t *c)
{
    size_t n = class_count(x, c->cls, c->dt), total = (size_t)x->size * n;
    mrank_case_t k = mk_case(x, "all_to_all", c, 0, n, c->inplace, -1, NULL);
    ref_buf_t s, r;
    buf_init(&s, c->dt, total);
    buf_init(&r, c->dt, c->inplace ? 0 : total);
    for (int q = 0; q < x->size; q++)
        for (size_t i = 0; i < n; i++)
            ref_set(&s, (size_t)q * n + i, mov_value(c->dt, x->salt, x->rank, q, i));
    ref_buf_t *out = c->inplace ? &s : &r;
    tcomms_status_t st = tcomms_all_to_all(x->comm, s.data, out->data, n, c->dt, NULL, NULL);
    for (int q = 0; q < x->size; q++)
        for (size_t i = 0; i < n; i++)
            out->expect[(size_t)q * n + i] = mov_value(c->dt, x->salt, q, x->rank, i);
    return finish(x, &k, "tcomms_all_to_all", st, &s, c->inplace ? "buf" : "sendbuf", &r);
}

/* Rank s sends class_vcount(s + 2d mod size) elements to rank d; both sides use the layout (no in-place form). */
static int t_all_to_all_v(ctx_t *x, const tcase_t *c)
{
    int n = x->size, me = x->rank;
    size_t sc[MAX_RANKS] = {0}, rc[MAX_RANKS] = {0}, sd[MAX_RANKS] = {0}, rd[MAX_RANKS] = {0};
    for (int q = 0; q < n; q++) {
        sc[q] = class_vcount(x, c->cls, c->dt, (me + 2 * q) % n);
        rc[q] = class_vcount(x, c->cls, c->dt, (q + 2 * me) % n);
    }
    size_t sext = make_displs(sc, n, c->layout, sd), rext = make_displs(rc, n, c->layout, rd);
    mrank_case_t k = mk_case(x, "all_to_all_v", c, 0, sc[(me + 1) % n], -1, -1, layout_names[c->layout]);
    ref_buf_t s, r;
    buf_init(&s, c->dt, sext);
    buf_init(&r, c->dt, rext);
    for (int q = 0; q < n; q++)
        for (size_t i = 0; i < sc[q]; i++)
            ref_set(&s, sd[q] + i, mov_value(c->dt, x->salt, me, q, i));
    const size_t *sdp = c->layout ? sd : NULL, *rdp = c->layout ? rd : NULL;
    tcomms_status_t st = tcomms_all_to_all_v(x->comm, s.data, sc, sdp, r.data, rc, rdp, c->dt, NULL, NULL);
    for (int q = 0; q < n; q++)
        for (size_t i = 0; i < rc[q]; i++)
            r.expect[rd[q] + i] = mov_value(c->dt, x->salt, q, me, i);
    return finish(x, &k, "tcomms_all_to_all_v", st, &s, "sendbuf", &r);
}

static int t_gather(ctx_t *x, const tcase_t *c)
{
    size_t n = class_count(x, c->cls, c->dt);
    int is_root = x->rank == c->root, own_in_r = c->inplace && is_root;
    mrank_case_t k = mk_case(x, "gather", c, 0, n, c->inplace, c->root, NULL);
    ref_buf_t s, r;
    buf_init(&s, c->dt, own_in_r ? 0 : n);
    buf_init(&r, c->dt, is_root ? (size_t)x->size * n : (c->inplace ? 0 : n));
    for (size_t i = 0; i < n; i++)
        ref_set(own_in_r ? &r : &s, (own_in_r ? (size_t)c->root * n : 0) + i, mov_value(c->dt, x->salt, x->rank, 0, i));
    const void *sb = own_in_r ? ref_at(&r, (size_t)c->root * n) : s.data;
    void *rb = is_root || !c->inplace ? r.data : NULL;
    tcomms_status_t st = tcomms_gather(x->comm, sb, rb, n, c->dt, c->root, NULL, NULL);
    for (int q = 0; is_root && q < x->size; q++)
        for (size_t i = 0; i < n; i++)
            r.expect[(size_t)q * n + i] = mov_value(c->dt, x->salt, q, 0, i);
    return finish(x, &k, "tcomms_gather", st, &s, "sendbuf", &r);
}

/* The root's block q is (q, root) data; non-root ranks pass a send buffer that must stay untouched (NULL in place). */
static int t_scatter(ctx_t *x, const tcase_t *c)
{
    size_t n = class_count(x, c->cls, c->dt);
    int is_root = x->rank == c->root, own_in_s = c->inplace && is_root;
    mrank_case_t k = mk_case(x, "scatter", c, 0, n, c->inplace, c->root, NULL);
    ref_buf_t s, r;
    buf_init(&s, c->dt, is_root ? (size_t)x->size * n : (c->inplace ? 0 : n));
    buf_init(&r, c->dt, own_in_s ? 0 : n);
    for (size_t j = 0; j < s.count; j++)
        ref_set(&s, j, is_root ? mov_value(c->dt, x->salt, (int)(j / n), c->root, j % n)
                               : mov_value(c->dt, x->salt, x->rank, x->rank, j));
    const void *sb = is_root || !c->inplace ? s.data : NULL;
    void *rb = own_in_s ? ref_at(&s, (size_t)c->root * n) : r.data;
    tcomms_status_t st = tcomms_scatter(x->comm, sb, rb, n, c->dt, c->root, NULL, NULL);
    for (size_t i = 0; !own_in_s && i < n; i++)
        r.expect[i] = mov_value(c->dt, x->salt, x->rank, c->root, i);
    return finish(x, &k, "tcomms_scatter", st, &s, own_in_s ? "buf" : "sendbuf", &r);
}

/* Every rank bumps a shared counter before the barrier (the last rank late); none may leave before all bumped. */
static int t_barrier(ctx_t *x, const tcase_t *c)
{
    (void)c;
    int round = ++x->barrier_round;
    if (x->rank == x->size - 1)
        mrank_sleep_ms(20);
    __atomic_add_fetch(x->shared, 1, __ATOMIC_SEQ_CST);
    snprintf(x->variant, sizeof x->variant, "algo=%s", x->algo);
    mrank_case_t k = {"barrier", NULL, NULL, x->variant, 0, -1, -1, x->rank, 0};
    if (failed_call(x, &k, "tcomms_barrier", tcomms_barrier(x->comm, NULL, NULL)))
        return 1;
    int seen = __atomic_load_n(x->shared, __ATOMIC_SEQ_CST);
    if (seen >= x->size * round)
        return 0;
    return mrank_failf("FAIL barrier algo=%s rank=%d round %d: left with %d of %d ranks arrived", x->algo, x->rank,
                       round, seen - x->size * (round - 1), x->size);
}

/* ---- operations in flight together --------------------------------------------------------------------------- */

#define NASYNC 6

/* Six large operations posted at once, then waited for in reverse: more big collectives than the engine runs at a
 * time on a communicator (two), so some wait in its queue and start with a finished one's scratch, while the
 * round's forced algorithms of several operations run side by side. Operation i uses salt + i. */
static int t_async(ctx_t *x, int round)
{
    static const char *const names[NASYNC] = {"all_reduce", "all_reduce", "reduce_scatter", "all_gather",
                                              "broadcast", "reduce"};
    static const tcomms_dtype_t dts[NASYNC] = {TCOMMS_FLOAT32, TCOMMS_INT32, TCOMMS_FLOAT64, TCOMMS_INT8,
                                               TCOMMS_BFLOAT16, TCOMMS_FLOAT16};
    static const tcomms_op_t ops[NASYNC] = {TCOMMS_SUM, TCOMMS_MAX, TCOMMS_PROD, TCOMMS_SUM, TCOMMS_SUM, TCOMMS_MIN};
    int n = x->size, me = x->rank, root = n - 1;
    uint32_t salt = x->salt + 1;
    x->salt += NASYNC;
    ref_buf_t s[NASYNC], r[NASYNC];
    size_t cnt[NASYNC];
    for (int i = 0; i < NASYNC; i++) {
        tcomms_dtype_t dt = dts[i];
        cnt[i] = odd_count(LARGE_BYTES, dt);
        buf_init(&s[i], dt, i == 2 ? (size_t)n * cnt[i] : cnt[i]);
        buf_init(&r[i], dt, i == 1 || i == 4 ? 0 : i == 3 ? (size_t)n * cnt[i] : cnt[i]);
        for (size_t j = 0; j < s[i].count; j++)
            ref_set(&s[i], j, i == 3 || i == 4 ? mov_value(dt, salt + (uint32_t)i, me, 0, j)
                                               : red_value(dt, salt + (uint32_t)i, me, j));
    }
    snprintf(x->variant, sizeof x->variant, "posted together in round %d", round);
    mrank_case_t k = {"async batch", "mixed", NULL, x->variant, (long long)cnt[0], -1, root, me, 0};
    tcomms_work_t *w[NASYNC] = {NULL};
    tcomms_status_t st[NASYNC];
    st[0] = tcomms_all_reduce(x->comm, s[0].data, r[0].data, cnt[0], dts[0], ops[0], NULL, &w[0]);
    st[1] = tcomms_all_reduce(x->comm, s[1].data, s[1].data, cnt[1], dts[1], ops[1], NULL, &w[1]);
    st[2] = tcomms_reduce_scatter(x->comm, s[2].data, r[2].data, cnt[2], dts[2], ops[2], NULL, &w[2]);
    st[3] = tcomms_all_gather(x->comm, s[3].data, r[3].data, cnt[3], dts[3], NULL, &w[3]);
    st[4] = tcomms_broadcast(x->comm, s[4].data, cnt[4], dts[4], root, NULL, &w[4]);
    st[5] = tcomms_reduce(x->comm, s[5].data, r[5].data, cnt[5], dts[5], ops[5], 0, NULL, &w[5]);
    for (int i = 0; i < NASYNC; i++)
        if (failed_call(x, &k, names[i], st[i]))
            return 1; /* the others may still run on these buffers: leak them, the rank stops here */
    for (int i = NASYNC - 1; i >= 0; i--)
        if (failed_call(x, &k, "tcomms_work_wait", tcomms_work_wait(w[i], 0)))
            return 1;
    for (int i = 0; i < NASYNC; i++)
        tcomms_work_free(w[i]);
    for (size_t j = 0; j < cnt[0]; j++)
        r[0].expect[j] = red_expect(dts[0], ops[0], salt, n, j);
    for (size_t j = 0; j < cnt[1]; j++)
        s[1].expect[j] = red_expect(dts[1], ops[1], salt + 1, n, j);
    for (size_t j = 0; j < cnt[2]; j++)
        r[2].expect[j] = red_expect(dts[2], ops[2], salt + 2, n, (size_t)me * cnt[2] + j);
    for (int q = 0; q < n; q++)
        for (size_t j = 0; j < cnt[3]; j++)
            r[3].expect[(size_t)q * cnt[3] + j] = mov_value(dts[3], salt + 3, q, 0, j);
    for (size_t j = 0; j < cnt[4]; j++)
        s[4].expect[j] = mov_value(dts[4], salt + 4, root, 0, j);
    for (size_t j = 0; me == 0 && j < cnt[5]; j++)
        r[5].expect[j] = red_expect(dts[5], ops[5], salt + 5, n, j);
    int bad = 0;
    for (int i = 0; i < NASYNC; i++) {
        char what[64];
        snprintf(what, sizeof what, "%s %s sendbuf", names[i], ref_dtype_name(dts[i]));
        bad |= ref_check(&k, what, &s[i]);
        snprintf(what, sizeof what, "%s %s recvbuf", names[i], ref_dtype_name(dts[i]));
        bad |= ref_check(&k, what, &r[i]);
        ref_buf_free(&s[i]);
        ref_buf_free(&r[i]);
    }
    return bad;
}

/* The lists of select.c, in its order. The test fails when the backend knows a name missing here (check_refusals
 * compares them), so a new algorithm cannot go untested. */
static const coll_row_t rows[] = {
    {"all_reduce", "TCOMMS_UCX_ALLREDUCE_ALGO", {"ring", "recursive_doubling", "rabenseifner"}, REDUCING,
     t_all_reduce},
    {"broadcast", "TCOMMS_UCX_BROADCAST_ALGO", {"binomial", "scatter_allgather"}, ROOTED, t_broadcast},
    {"reduce", "TCOMMS_UCX_REDUCE_ALGO", {"binomial", "rabenseifner"}, REDUCING | ROOTED | HUGE, t_reduce},
    {"all_gather", "TCOMMS_UCX_ALLGATHER_ALGO", {"ring", "linear", "recursive_doubling", "bruck"}, 0, t_all_gather},
    {"all_gather_v", "TCOMMS_UCX_ALLGATHERV_ALGO", {"ring", "linear", "recursive_doubling", "bruck"}, VCOUNTS,
     t_all_gather},
    {"reduce_scatter", "TCOMMS_UCX_REDUCESCATTER_ALGO", {"ring", "recursive_halving"}, REDUCING, t_reduce_scatter},
    {"reduce_scatter_v", "TCOMMS_UCX_REDUCESCATTERV_ALGO", {"ring"}, REDUCING | VCOUNTS, t_reduce_scatter},
    {"all_to_all", "TCOMMS_UCX_ALLTOALL_ALGO", {"pairwise", "linear"}, 0, t_all_to_all},
    {"all_to_all_v", "TCOMMS_UCX_ALLTOALLV_ALGO", {"pairwise", "linear"}, 0, t_all_to_all_v},
    {"gather", "TCOMMS_UCX_GATHER_ALGO", {"linear", "binomial"}, ROOTED, t_gather},
    {"scatter", "TCOMMS_UCX_SCATTER_ALGO", {"linear", "binomial"}, ROOTED, t_scatter},
    {"barrier", "TCOMMS_UCX_BARRIER_ALGO", {"dissemination"}, 0, t_barrier},
};
#define NROWS ((int)(sizeof rows / sizeof rows[0]))

/* ---- the table ------------------------------------------------------------------------------------------------ */

/* Per class of counts: reductions run the whole dtype x op table, data movement every dtype in and out of place;
 * rooted operations cycle through the roots so that each root runs in and out of place in every class. */
static int run_algo(ctx_t *x, const coll_row_t *row, const char *algo)
{
    int n = x->size, fails = 0, rooted = (row->flags & ROOTED) != 0, reducing = (row->flags & REDUCING) != 0;
    int last = row->flags & HUGE ? C_HUGE : NCLASSES - 1;
    x->algo = algo;
    if (row->run == t_barrier) {
        for (int k = 0; k < 2 && !x->stop; k++)
            fails += t_barrier(x, NULL);
        return fails;
    }
    for (int cls = 0; cls <= last; cls++) {
        int ncases = cls == C_HUGE ? 2 : reducing ? NDTYPES * NOPS : 2 * NDTYPES;
        for (int j = 0; j < ncases; j++) {
            tcase_t c = {(tcomms_dtype_t)((j + cls) % NDTYPES), TCOMMS_SUM, cls, j / NDTYPES, j % n, j % 3,
                         (row->flags & VCOUNTS) != 0};
            if (reducing) {
                c.dt = (tcomms_dtype_t)(j / NOPS);
                c.op = (tcomms_op_t)(j % NOPS);
                c.inplace = (j / NOPS + j % NOPS) % 2;
            }
            if (rooted)
                c.inplace = (j / n) % 2;
            if (cls == C_HUGE) { /* 1 MiB and more: float32 and bfloat16 sums, to the last rank and the one before */
                c.dt = j ? TCOMMS_BFLOAT16 : TCOMMS_FLOAT32;
                c.op = TCOMMS_SUM;
                c.root = n - 1 - j;
                c.inplace = j;
            }
            x->salt++;
            fails += row->run(x, &c);
            if (x->stop)
                return fails;
        }
    }
    return fails;
}

/* ---- what the backend says about forcing ---------------------------------------------------------------------- */

/* The library's debug lines for the UCX component go to stderr, here a temporary file while capturing. */
typedef struct capture {
    FILE *f;
    int saved;
} capture_t;

static int capture_start(capture_t *cap)
{
    fflush(stderr);
    cap->f = tmpfile();
    cap->saved = dup(STDERR_FILENO);
    if (cap->f == NULL || cap->saved < 0 || dup2(fileno(cap->f), STDERR_FILENO) < 0)
        return mrank_failf("FAIL test_ucx_algo: cannot capture stderr");
    setenv("TCOMMS_UCX_LOG_LEVEL", "debug", 1);
    return 0;
}

/* Restore stderr; the captured text (malloc'ed, NUL-terminated), or NULL. */
static char *capture_end(capture_t *cap)
{
    unsetenv("TCOMMS_UCX_LOG_LEVEL");
    fflush(stderr);
    dup2(cap->saved, STDERR_FILENO);
    close(cap->saved);
    char *text = NULL;
    long len = fseek(cap->f, 0, SEEK_END) == 0 ? ftell(cap->f) : -1;
    if (len >= 0 && (text = malloc((size_t)len + 1)) != NULL) {
        rewind(cap->f);
        text[fread(text, 1, (size_t)len, cap->f)] = '\0';
    }
    fclose(cap->f);
    return text;
}

/* Does `line` hold " word" followed by a space or its end (or by anything, `prefix` set)? */
static int has_word(const char *line, const char *word, int prefix)
{
    size_t len = strlen(word);
    for (const char *p = strstr(line, word); p; p = strstr(p + 1, word))
        if (p > line && p[-1] == ' ' && (prefix || p[len] == ' ' || p[len] == '\0'))
            return 1;
    return 0;
}

/* Set every operation's variable to its algorithm of round k ("auto" where its list is shorter). */
static void force_round(int k)
{
    for (int i = 0; i < NROWS; i++)
        setenv(rows[i].env, rows[i].algos[k] ? rows[i].algos[k] : "auto", 1);
}

static void unforce_all(void)
{
    for (int i = 0; i < NROWS; i++)
        unsetenv(rows[i].env);
}

static tcomms_status_t split_all(ctx_t *x, const char *name, tcomms_comm_t **out)
{
    int ranks[MAX_RANKS];
    for (int q = 0; q < x->size; q++)
        ranks[q] = q;
    return tcomms_comm_split(x->world, ranks, x->size, name, NULL, out);
}

/* Split the communicator of round k, and check that the backend's line names exactly what round k forced. */
static int open_round(ctx_t *x, int k)
{
    char name[32], head[64];
    snprintf(name, sizeof name, "algo-round-%d", k);
    snprintf(head, sizeof head, "'%s': forced algorithms:", name);
    force_round(k);
    capture_t cap;
    if (capture_start(&cap) != 0)
        return x->stop = 1;
    tcomms_status_t st = split_all(x, name, &x->comm);
    char *text = capture_end(&cap);
    unforce_all();
    if (st != TCOMMS_SUCCESS) {
        free(text);
        x->stop = 1;
        return mrank_failf("FAIL rank %d: the split of round %d returned %d (%s)", x->rank, k, st,
                           tcomms_last_error());
    }
    const char *line = text ? strstr(text, head) : NULL;
    char *end = line ? strchr(line, '\n') : NULL;
    if (end)
        *end = '\0';
    int fails = 0;
    for (int i = 0; line && i < NROWS; i++) {
        char word[96];
        snprintf(word, sizeof word, "%s=%s", rows[i].name, rows[i].algos[k] ? rows[i].algos[k] : "");
        int want = rows[i].algos[k] != NULL;
        if (has_word(line, word, !want) != want)
            fails += mrank_failf("FAIL rank %d round %d: %s %s in the backend's line: %s", x->rank, k, word,
                                 want ? "missing" : "unexpected", line);
    }
    if (!line)
        fails += mrank_failf("FAIL rank %d round %d: no line \"%s\" at debug level; stderr was:\n%s", x->rank, k, head,
                             text ? text : "(unreadable)");
    free(text);
    return fails;
}

/* An unknown name fails the split with TCOMMS_ERR_BAD_ENV naming the variable and listing exactly the names the
 * table above has; so does a name of another operation's list (recursive_halving has no reduce_scatter_v form). */
static int check_refusal(ctx_t *x, const coll_row_t *row, const char *value)
{
    char known[256] = "(known: ";
    size_t at = strlen(known);
    for (int a = 0; row->algos[a] && at < sizeof known; a++)
        at += (size_t)snprintf(known + at, sizeof known - at, "%s, ", row->algos[a]);
    snprintf(known + at, sizeof known - at, "auto)");
    setenv(row->env, value, 1);
    tcomms_comm_t *comm = NULL;
    tcomms_status_t st = split_all(x, "algo-refused", &comm);
    unsetenv(row->env);
    const char *msg = tcomms_last_error();
    if (st == TCOMMS_ERR_BAD_ENV && strstr(msg, row->env) && strstr(msg, value) && strstr(msg, known))
        return 0;
    if (st == TCOMMS_SUCCESS)
        tcomms_comm_destroy(comm);
    return mrank_failf("FAIL rank %d: %s=%s: the split returned %d (%s), expected %d naming the variable and %s",
                       x->rank, row->env, value, st, msg ? msg : "", TCOMMS_ERR_BAD_ENV, known);
}

static int check_refusals(ctx_t *x)
{
    int fails = 0;
    for (int i = 0; i < NROWS; i++)
        fails += check_refusal(x, &rows[i], "no_such_algorithm");
    for (int i = 0; i < NROWS; i++)
        if (strcmp(rows[i].name, "reduce_scatter_v") == 0)
            fails += check_refusal(x, &rows[i], "recursive_halving");
    return fails;
}

/* ---- a job ---------------------------------------------------------------------------------------------------- */

static int algo_rank(int rank, int size, void *arg)
{
    ctx_t x = {.rank = rank, .size = size, .shared = arg};
    unforce_all();
    unsetenv("TCOMMS_LOG_FILE"); /* the backend's debug line must reach stderr (capture_start) */
    double t0 = mrank_now();
    if ((x.world = mrank_world("ucx", OP_TIMEOUT_MS, rank)) == NULL)
        return 1;
    int fails = check_refusals(&x);
    for (int k = 0; k < MAX_ALGOS && !x.stop; k++) {
        fails += open_round(&x, k);
        for (int i = 0; i < NROWS && !x.stop; i++)
            if (rows[i].algos[k])
                fails += run_algo(&x, &rows[i], rows[i].algos[k]);
        if (!x.stop)
            fails += t_async(&x, k);
        if (x.comm && tcomms_comm_destroy(x.comm) != TCOMMS_SUCCESS)
            fails += mrank_failf("FAIL rank %d: tcomms_comm_destroy: %s", rank, tcomms_last_error());
        x.comm = NULL;
    }
    if (tcomms_comm_destroy(x.world) != TCOMMS_SUCCESS)
        fails += mrank_failf("FAIL rank %d: tcomms_comm_destroy: %s", rank, tcomms_last_error());
    if (rank == 0)
        mrank_logf("test_ucx_algo: %d ranks: %d calls, %d failure(s)%s, %.1f s", size, x.calls, fails,
                   x.stop ? ", stopped early" : "", mrank_now() - t0);
    return fails;
}

/* The rank counts (mrank_rank_counts): 2, 3 and 4 unless TCOMMS_TEST_RANKS ("5 6 7 8") or TCOMMS_TEST_MAX_RANKS say. */
static int rank_counts[MAX_RANKS];
static int nrank_counts;

START_TEST(test_forced_algorithms)
{
    int nranks = rank_counts[_i];
    int *counter = mrank_shared_alloc(4096);
    ck_assert_ptr_nonnull(counter);
    int failing = mrank_run(nranks, algo_rank, counter, mrank_job_timeout(JOB_TIMEOUT_S, nranks));
    mrank_shared_free(counter, 4096);
    ck_assert_msg(failing == 0, "%d rank(s): %d rank(s) failed (see stderr)", nranks, failing);
}
END_TEST

static void add_tests(Suite *s, int nbackends)
{
    (void)nbackends; /* ucx only */
    int most = 0; /* ranks of the largest job, which may take longest */
    for (int k = 0; k < nrank_counts; k++)
        most = rank_counts[k] > most ? rank_counts[k] : most;
    tcase_add_loop_test(mrank_tcase(s, "forced", mrank_job_timeout(JOB_TIMEOUT_S, most) + 30), test_forced_algorithms,
                        0, nrank_counts);
}

int main(void)
{
    if ((nrank_counts = mrank_rank_counts(2, MAX_RANKS, rank_counts)) < 0) {
        fprintf(stderr, "test_ucx_algo: TCOMMS_TEST_RANKS / TCOMMS_TEST_MAX_RANKS must be rank counts in 2..%d\n",
                MAX_RANKS);
        return EXIT_FAILURE;
    }
    return mrank_main("ucx_algo", MRANK_UCX, add_tests);
}
