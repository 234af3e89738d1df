/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests lib/avg.c: an integer AVG is the exact mean of the ranks' values rounded toward zero, whatever their sum,
 * on every CPU backend in TCOMMS_TEST_BACKENDS at 2 and 3 ranks: all_reduce, reduce, reduce_scatter and
 * reduce_scatter_v, in place or not, blocking, waited, polled, inside a group and freed before completion, every
 * element checked against a mean computed here in 128 bits; plus tc_mean_from_words against 128-bit division. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tcomms/tcomms.h>

#include "avg.h"
#include "mrank.h"
#include "mrank_world.h"

#define JOB_S 120
#define OP_TIMEOUT_MS 20000u
#define N 37    /* all_reduce and reduce elements */
#define BLOCK 5 /* reduce_scatter elements a rank */
#define GUARD 3 /* elements past each result that must stay untouched */

static const tcomms_dtype_t dtypes[] = {TCOMMS_INT8, TCOMMS_UINT8, TCOMMS_INT32, TCOMMS_INT64};
#define NDT ((int)(sizeof dtypes / sizeof dtypes[0]))

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static void range(tcomms_dtype_t dt, int64_t *lo, int64_t *hi)
{
    switch (dt) {
    case TCOMMS_INT8: *lo = INT8_MIN, *hi = INT8_MAX; break;
    case TCOMMS_UINT8: *lo = 0, *hi = UINT8_MAX; break;
    case TCOMMS_INT32: *lo = INT32_MIN, *hi = INT32_MAX; break;
    default: *lo = INT64_MIN, *hi = INT64_MAX; break;
    }
}

/* Rank r's element i: the type's extremes first (every rank at max; at min; min + r, whose mean at 2 ranks is
 * min + 0.5 and truncates up; 100 everywhere), then values from the whole range, so most sums overflow the type. */
static int64_t value(tcomms_dtype_t dt, int r, size_t i)
{
    int64_t lo, hi;
    range(dt, &lo, &hi);
    switch (i) {
    case 0: return hi;
    case 1: return lo;
    case 2: return lo + r;
    case 3: return 100;
    case 4: return hi - r;
    default: break;
    }
    uint64_t bits = mix((uint64_t)i * 1000003u + (uint64_t)r * 7919u + (uint64_t)dt);
    if (dt == TCOMMS_INT64)
        return (int64_t)bits; /* two's complement on every target of this library */
    return lo + (int64_t)(bits % (uint64_t)(hi - lo + 1));
}

static int64_t mean(tcomms_dtype_t dt, int size, size_t i)
{
    __int128 sum = 0;
    for (int r = 0; r < size; r++)
        sum += value(dt, r, i);
    return (int64_t)(sum / size); /* C division truncates toward zero */
}

static void put(void *buf, tcomms_dtype_t dt, size_t i, int64_t v)
{
    switch (dt) {
    case TCOMMS_INT8: ((int8_t *)buf)[i] = (int8_t)v; break;
    case TCOMMS_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case TCOMMS_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
    default: ((int64_t *)buf)[i] = v; break;
    }
}

static int64_t get(const void *buf, tcomms_dtype_t dt, size_t i)
{
    switch (dt) {
    case TCOMMS_INT8: return ((const int8_t *)buf)[i];
    case TCOMMS_UINT8: return ((const uint8_t *)buf)[i];
    case TCOMMS_INT32: return ((const int32_t *)buf)[i];
    default: return ((const int64_t *)buf)[i];
    }
}

typedef enum { COLL_ALL_REDUCE, COLL_REDUCE, COLL_REDUCE_SCATTER, COLL_REDUCE_SCATTER_V, NCOLLS } coll_t;
static const char *const coll_names[NCOLLS] = {"all_reduce", "reduce", "reduce_scatter", "reduce_scatter_v"};
typedef enum { MODE_BLOCKING, MODE_WAIT, MODE_TEST, MODE_GROUP, MODE_FREE, NMODES } run_mode_t;
static const char *const mode_names[NMODES] = {"blocking", "waited", "polled", "in a group", "freed at once"};

static const size_t v_counts[] = {3, 0, 7};

typedef struct job {
    tcomms_comm_t *comm;
    int rank, size;
    size_t counts[3], displs[3], total; /* reduce_scatter_v layout, and elements of the send buffer */
} job_t;

static tcomms_status_t post(const job_t *j, coll_t coll, tcomms_dtype_t dt, const void *send, void *recv, int root,
                            tcomms_work_t **w)
{
    switch (coll) {
    case COLL_ALL_REDUCE: return tcomms_all_reduce(j->comm, send, recv, N, dt, TCOMMS_AVG, NULL, w);
    case COLL_REDUCE: return tcomms_reduce(j->comm, send, recv, N, dt, TCOMMS_AVG, root, NULL, w);
    case COLL_REDUCE_SCATTER: return tcomms_reduce_scatter(j->comm, send, recv, BLOCK, dt, TCOMMS_AVG, NULL, w);
    default: return tcomms_reduce_scatter_v(j->comm, send, recv, j->counts, dt, TCOMMS_AVG, NULL, w);
    }
}

/* Run the call in `mode`; its status. */
static tcomms_status_t run_mode(const job_t *j, coll_t coll, tcomms_dtype_t dt, const void *send, void *recv,
                                int root, run_mode_t mode)
{
    tcomms_work_t *w = NULL;
    tcomms_status_t st;
    switch (mode) {
    case MODE_BLOCKING: return post(j, coll, dt, send, recv, root, NULL);
    case MODE_GROUP:
        tcomms_group_start();
        st = post(j, coll, dt, send, recv, root, NULL);
        tcomms_status_t end = tcomms_group_end();
        return st != TCOMMS_SUCCESS ? st : end;
    default: break;
    }
    if ((st = post(j, coll, dt, send, recv, root, &w)) != TCOMMS_SUCCESS)
        return st;
    if (mode == MODE_WAIT)
        st = tcomms_work_wait(w, 0);
    while (mode == MODE_TEST && (st = tcomms_work_test(w)) == TCOMMS_IN_PROGRESS)
        mrank_sleep_ms(1);
    tcomms_status_t freed = tcomms_work_free(w); /* MODE_FREE: the result must be there once this returns */
    return st != TCOMMS_SUCCESS ? st : freed;
}

/* One case; the number of failures. */
static int run_case(const job_t *j, coll_t coll, tcomms_dtype_t dt, int in_place, run_mode_t mode, int root)
{
    size_t es = tcomms_dtype_size(dt), nsend = coll == COLL_REDUCE_SCATTER ? BLOCK * (size_t)j->size
                                                 : coll == COLL_REDUCE_SCATTER_V ? j->total : N;
    size_t first = 0, nres = N; /* the result's place in the send buffer's index space, and its length */
    if (coll == COLL_REDUCE_SCATTER)
        first = BLOCK * (size_t)j->rank, nres = BLOCK;
    else if (coll == COLL_REDUCE_SCATTER_V)
        first = j->displs[j->rank], nres = j->counts[j->rank];
    int gets = coll != COLL_REDUCE || j->rank == root;
    unsigned char *send = malloc((nsend + GUARD) * es), *recv = malloc((nres + GUARD) * es);
    if (send == NULL || recv == NULL)
        return mrank_failf("FAIL rank %d: out of memory", j->rank);
    for (size_t i = 0; i < nsend; i++)
        put(send, dt, i, value(dt, j->rank, i));
    memset(send + nsend * es, 0x5a, GUARD * es);
    memset(recv, 0x5a, (nres + GUARD) * es);
    unsigned char *out = in_place ? send + first * es : recv;
    const void *in = send;
    void *target = in_place ? (void *)out : gets ? (void *)recv : NULL;
    tcomms_status_t st = run_mode(j, coll, dt, in, target, root, mode);
    int fails = 0;
    mrank_case_t c = {coll_names[coll], tcomms_dtype_name(dt), "avg", mode_names[mode], (long long)nres, in_place,
                      coll == COLL_REDUCE ? root : -1, j->rank, 0};
    if (st != TCOMMS_SUCCESS) {
        mrank_case_status(&c, coll_names[coll], st, tcomms_last_error());
        fails = 1;
    }
    for (size_t i = 0; gets && st == TCOMMS_SUCCESS && i < nres; i++) {
        int64_t want = mean(dt, j->size, first + i), got = get(out, dt, i);
        if (got != want) {
            mrank_case_fail(&c, "recvbuf", (long long)i, (double)got, (double)want);
            fails = 1;
        }
    }
    const unsigned char *guard = in_place ? send + nsend * es : recv + nres * es;
    for (size_t b = 0; b < GUARD * es && st == TCOMMS_SUCCESS; b++)
        if (guard[b] != 0x5a) {
            mrank_case_fail(&c, "guard after the result", (long long)b, guard[b], 0x5a);
            fails = 1;
            break;
        }
    free(send);
    free(recv);
    return fails;
}

static int avg_rank(int rank, int size, void *arg)
{
    const char *backend = arg;
    job_t j = {mrank_world(backend, OP_TIMEOUT_MS, rank), rank, size, {0}, {0}, 0};
    if (j.comm == NULL)
        return 1;
    for (int r = 0; r < size; r++) {
        j.counts[r] = v_counts[r];
        j.displs[r] = j.total;
        j.total += v_counts[r];
    }
    int fails = 0;
    for (int d = 0; d < NDT && fails == 0; d++)
        for (int coll = 0; coll < NCOLLS && fails == 0; coll++)
            for (int in_place = 0; in_place < 2 && fails == 0; in_place++)
                for (int mode = 0; mode < NMODES && fails == 0; mode++) {
                    int root = (d + mode) % size;
                    fails += run_case(&j, (coll_t)coll, dtypes[d], in_place, (run_mode_t)mode, root);
                }
    tcomms_comm_destroy(j.comm);
    return fails;
}

START_TEST(exact_mean)
{
    for (int b = 0; b < mrank_nbackends(); b++)
        for (int size = 2; size <= 3; size++) {
            int failing = mrank_run(size, avg_rank, (void *)mrank_backend(b), JOB_S);
            ck_assert_msg(failing == 0, "%s, %d ranks: %d rank(s) failed (see the lines above)", mrank_backend(b), size,
                          failing);
        }
}
END_TEST

/* The core's int64 division against 128-bit arithmetic, over the whole range of sums n values can have. */
START_TEST(mean_from_words)
{
    static const int ns[] = {1, 2, 3, 7, 1000, 65537, 1 << 30};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        __int128 n = ns[k];
        for (uint64_t t = 0; t < 20000; t++) {
            uint64_t a = mix(t * 2 + 1), b = mix(t * 2 + 2);
            /* n high words sum to [-2^31 n, (2^31 - 1) n], n low words to [0, (2^32 - 1) n]; the first two cases
             * are the ends, the mean of n INT64_MIN and of n INT64_MAX */
            __int128 hmin = -(n << 31), hmax = (((__int128)1 << 31) - 1) * n, lmax = (((__int128)1 << 32) - 1) * n;
            __int128 high = t == 0 ? hmin : t == 1 ? hmax : hmin + (__int128)(a % (uint64_t)(hmax - hmin + 1));
            __int128 low = t == 0 ? 0 : t == 1 ? lmax : (__int128)(b % (uint64_t)(lmax + 1));
            __int128 total = high * ((__int128)1 << 32) + low;
            int64_t want = (int64_t)(total / n);
            int64_t got = tc_mean_from_words((int64_t)high, (int64_t)low, ns[k]);
            ck_assert_msg(got == want, "n %d, high %lld, low %lld: %lld, expected %lld", ns[k], (long long)high,
                          (long long)low, (long long)got, (long long)want);
        }
    }
}
END_TEST

static void add_tests(Suite *s, int nbackends)
{
    TCase *tc = mrank_tcase(s, "avg", 2 * JOB_S * (nbackends ? nbackends : 1) + 30);
    tcase_add_test(tc, mean_from_words);
    tcase_add_test(tc, exact_mean);
}

int main(void)
{
    return mrank_main("avg", MRANK_ANY, add_tests);
}
