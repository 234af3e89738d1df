/* SPDX-License-Identifier: BSD-3-Clause */
/* Several communicators at once, and many large collectives in flight on one: every CPU backend in
 * TCOMMS_TEST_BACKENDS, 2-4 ranks. Ranks post on their communicators in different orders and wait in different
 * orders, two threads drive two communicators at the same time, a burst of >= 64 KiB collectives exceeds the
 * UCX backend's two-at-a-time limit, and rounds of thousands of small ones in flight reuse the tasks the rounds
 * before left (UCX keeps them between busy spells). Every result is compared with a sum computed by a plain loop
 * in double. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tcomms/tcomms.h>

#include "mrank.h"
#include "mrank_world.h"

#define MIN_RANKS 2
#define MAX_RANKS 4
#define JOB_TIMEOUT_S 120
#define OP_TIMEOUT_MS 60000
#define BIG 24576 /* floats: 96 KiB, above the 64 KiB "large collective" line */
#define SMALL 7
#define BURST 12
#define MANY 3000   /* small collectives in flight at once: far more than the UCX backend's 64 kept tasks */
#define MANY_ROUNDS 3

/* The value rank r contributes at index i in round k: small integers, so float sums are exact. */
static float val(int r, size_t i, int k)
{
    return (float)((r * 7 + (int)(i % 61) + k * 3) % 29);
}

static void fill(float *b, size_t n, int r, int k)
{
    for (size_t i = 0; i < n; i++)
        b[i] = val(r, i, k);
}

/* Count the elements of an all_reduce(sum) result that differ from the loop-computed sum over `size` ranks. */
static int check_sum(const float *b, size_t n, int size, int k, const char *what, int rank)
{
    for (size_t i = 0; i < n; i++) {
        double want = 0;
        for (int r = 0; r < size; r++)
            want += val(r, i, k);
        if ((double)b[i] != want)
            return mrank_failf("FAIL rank %d %s round %d: element %zu is %g, expected %g", rank, what, k, i,
                               (double)b[i], want);
    }
    return 0;
}

/* An async all_reduce of round k on `comm`; n == 0 marks a slot not used. */
typedef struct pending {
    tcomms_comm_t *comm;
    tcomms_work_t *work;
    float *buf;
    size_t n;
    int k;
    const char *what;
} pending_t;

static int post(pending_t *p, int rank)
{
    fill(p->buf, p->n, rank, p->k);
    tcomms_status_t st = tcomms_all_reduce(p->comm, p->buf, p->buf, p->n, TCOMMS_FLOAT32, TCOMMS_SUM, NULL,
                                           &p->work);
    if (st != TCOMMS_SUCCESS)
        return mrank_failf("FAIL rank %d %s round %d: post returned %d (%s)", rank, p->what, p->k, st,
                           tcomms_last_error());
    return 0;
}

static int finish(pending_t *p, int rank, int size)
{
    if (p->work == NULL)
        return 1;
    tcomms_status_t st = tcomms_work_wait(p->work, 0);
    tcomms_work_free(p->work);
    p->work = NULL;
    if (st != TCOMMS_SUCCESS)
        return mrank_failf("FAIL rank %d %s round %d: wait returned %d (%s)", rank, p->what, p->k, st,
                           tcomms_last_error());
    return check_sum(p->buf, p->n, size, p->k, p->what, rank);
}

/* Two communicators over the same ranks: even ranks post on A first, odd ranks on B first, and each waits in the
 * opposite order to the one it posted in. Tags must keep the communicators apart; neither may wait for the other. */
static int interleaved(tcomms_comm_t *a, tcomms_comm_t *b, int rank, int size)
{
    int fails = 0;
    float *ba = malloc(BIG * sizeof(float)), *bb = malloc(BIG * sizeof(float));
    if (ba == NULL || bb == NULL)
        fails = mrank_failf("FAIL rank %d: out of memory", rank);
    for (int k = 0; k < 40 && fails == 0; k++) {
        size_t n = k % 2 ? BIG : SMALL;
        pending_t pa = {a, NULL, ba, n, k, "interleaved A"};
        pending_t pb = {b, NULL, bb, BIG + SMALL - n, k + 1, "interleaved B"};
        pending_t *first = rank % 2 ? &pb : &pa, *second = rank % 2 ? &pa : &pb;
        fails += post(first, rank);
        fails += post(second, rank);
        fails += finish(second, rank, size);
        fails += finish(first, rank, size);
        /* back to back, blocking, on alternating communicators */
        fill(ba, n, rank, k);
        tcomms_status_t st = tcomms_all_reduce(k % 3 ? a : b, ba, ba, n, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL);
        fails += st == TCOMMS_SUCCESS ? check_sum(ba, n, size, k, "back-to-back", rank)
                                      : mrank_failf("FAIL rank %d back-to-back %d: %s", rank, k, tcomms_last_error());
    }
    free(ba);
    free(bb);
    return fails;
}

/* BURST large all_reduces in flight on one communicator plus small ones between them, waited in an order that
 * differs between ranks (odd ranks from the last). */
static int burst(tcomms_comm_t *c, int rank, int size)
{
    pending_t p[2 * BURST];
    int fails = 0, n = 0;
    for (int j = 0; j < 2 * BURST; j++) {
        size_t cnt = j % 2 ? SMALL + (size_t)j : BIG + (size_t)j * 129;
        p[n] = (pending_t){c, NULL, malloc(cnt * sizeof(float)), cnt, j, j % 2 ? "burst small" : "burst large"};
        if (p[n].buf == NULL) {
            fails = mrank_failf("FAIL rank %d: out of memory", rank);
            break;
        }
        fails += post(&p[n++], rank);
    }
    for (int j = 0; j < n; j++) {
        pending_t *q = &p[rank % 2 ? n - 1 - j : j];
        if (q->work != NULL)
            fails += finish(q, rank, size);
        free(q->buf);
    }
    return fails;
}

/* MANY small all_reduces in flight (a thirtieth of that on Gloo), in place and out of place by turns (out of place: the result into the second
 * half of the slot), waited from the first on even ranks and from the last on odd ones, then one blocking call
 * (an idle moment between busy spells), MANY_ROUNDS times with other values each round. */
static int many(tcomms_comm_t *c, const char *backend, int rank, int size)
{
    int many = strcmp(backend, "ucx") == 0 ? MANY : MANY / 30; /* Gloo takes about 1 ms a call on 4 ranks */
    float *buf = malloc((size_t)many * 2 * SMALL * sizeof(float));
    tcomms_work_t **w = calloc((size_t)many, sizeof(*w));
    int fails = buf == NULL || w == NULL ? mrank_failf("FAIL rank %d: out of memory", rank) : 0;
    for (int k = 0; k < MANY_ROUNDS && fails == 0; k++) {
        int posted = 0;
        for (int j = 0; j < many && fails == 0; j++, posted++) {
            float *slot = buf + (size_t)j * 2 * SMALL;
            fill(slot, SMALL, rank, k * MANY + j);
            float *out = j % 2 ? slot + SMALL : slot;
            tcomms_status_t st = tcomms_all_reduce(c, slot, out, SMALL, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, &w[j]);
            if (st != TCOMMS_SUCCESS)
                fails = mrank_failf("FAIL rank %d many round %d: post %d: %s", rank, k, j, tcomms_last_error());
        }
        for (int i = 0; i < posted; i++) {
            int j = rank % 2 ? posted - 1 - i : i;
            tcomms_status_t st = tcomms_work_wait(w[j], 0);
            tcomms_work_free(w[j]);
            if (st != TCOMMS_SUCCESS && fails == 0)
                fails = mrank_failf("FAIL rank %d many round %d: wait %d: %s", rank, k, j, tcomms_last_error());
            else if (fails == 0)
                fails = check_sum(buf + (size_t)j * 2 * SMALL + (j % 2 ? SMALL : 0), SMALL, size, k * MANY + j,
                                  "many", rank);
        }
        fill(buf, SMALL, rank, -1 - k);
        tcomms_status_t st = tcomms_all_reduce(c, buf, buf, SMALL, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL);
        if (fails == 0)
            fails = st == TCOMMS_SUCCESS ? check_sum(buf, SMALL, size, -1 - k, "many, blocking", rank)
                                         : mrank_failf("FAIL rank %d many round %d: %s", rank, k, tcomms_last_error());
    }
    free(w);
    free(buf);
    return fails;
}

typedef struct thread_job {
    tcomms_comm_t *comm;
    int rank, size, salt, fails;
} thread_job_t;

static void *drive(void *arg)
{
    thread_job_t *t = arg;
    float *buf = malloc(BIG * sizeof(float));
    if (buf == NULL) {
        t->fails = mrank_failf("FAIL rank %d: out of memory", t->rank);
        return NULL;
    }
    for (int k = 0; k < 60 && t->fails == 0; k++) {
        size_t n = (size_t)(k * 997 + t->salt) % BIG + 1;
        fill(buf, n, t->rank, k + t->salt);
        tcomms_status_t st = tcomms_all_reduce(t->comm, buf, buf, n, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL);
        t->fails += st == TCOMMS_SUCCESS
                        ? check_sum(buf, n, t->size, k + t->salt, "threaded", t->rank)
                        : mrank_failf("FAIL rank %d thread %d call %d: %s", t->rank, t->salt, k, tcomms_last_error());
    }
    free(buf);
    return NULL;
}

/* Two threads, each on its own communicator, at the same time (the API allows separate communicators on separate
 * threads). */
static int threaded(tcomms_comm_t *a, tcomms_comm_t *b, int rank, int size)
{
    thread_job_t ja = {a, rank, size, 1, 0}, jb = {b, rank, size, 2, 0};
    pthread_t t;
    if (pthread_create(&t, NULL, drive, &ja) != 0)
        return mrank_failf("FAIL rank %d: pthread_create", rank);
    drive(&jb);
    pthread_join(t, NULL);
    return ja.fails + jb.fails;
}

typedef enum { T_INTERLEAVED, T_BURST, T_THREADED, T_MANY, T_KINDS } kind_t;
static const char *const kind_names[T_KINDS] = {"interleaved", "burst", "threaded", "many"};

static int concurrent_rank(int rank, int size, void *arg)
{
    const int *a = arg;
    const char *backend = mrank_backend(a[0]);
    kind_t kind = (kind_t)a[1];
    tcomms_comm_t *world = mrank_world(backend, OP_TIMEOUT_MS, rank);
    if (world == NULL)
        return 1;
    /* The second communicator: a split over every rank, in reverse order, so ranks differ between the two. */
    tcomms_comm_t *other = NULL;
    int fails = 0;
    tcomms_status_t st = tcomms_comm_split_color(world, 0, size - rank, "other", NULL, &other);
    if (st != TCOMMS_SUCCESS)
        fails = mrank_failf("FAIL rank %d: split_color: %s", rank, tcomms_last_error());
    if (fails == 0) {
        int r2 = -1;
        tcomms_comm_rank(other, &r2);
        if (r2 != size - 1 - rank)
            fails = mrank_failf("FAIL rank %d: rank %d in the reversed split, expected %d", rank, r2,
                                size - 1 - rank);
    }
    if (fails == 0) {
        double t0 = mrank_now();
        /* Results use the communicator's own rank numbering: the sums do not depend on it. */
        if (kind == T_INTERLEAVED)
            fails += interleaved(world, other, rank, size);
        else if (kind == T_BURST)
            fails += burst(world, rank, size) + burst(other, size - 1 - rank, size);
        else if (kind == T_THREADED)
            fails += threaded(world, other, rank, size);
        else
            fails += many(world, backend, rank, size);
        if (rank == 0)
            mrank_logf("test_concurrent: %s %s on %d ranks: %d failure(s), %.1f s", backend, kind_names[kind], size,
                       fails, mrank_now() - t0);
    }
    tcomms_comm_destroy(other);
    tcomms_comm_destroy(world);
    return fails;
}

START_TEST(test_concurrent)
{
    int nsizes = MAX_RANKS - MIN_RANKS + 1;
    int b = _i / (T_KINDS * nsizes), kind = _i / nsizes % T_KINDS, nranks = MIN_RANKS + _i % nsizes;
    int *arg = mrank_shared_alloc(4096);
    ck_assert_ptr_nonnull(arg);
    arg[0] = b;
    arg[1] = kind;
    int failing = mrank_run(nranks, concurrent_rank, arg, JOB_TIMEOUT_S);
    mrank_shared_free(arg, 4096);
    ck_assert_msg(failing == 0, "%s %s on %d ranks: %d rank(s) failed (see stderr)", mrank_backend(b), kind_names[kind],
                  nranks, failing);
}
END_TEST

static void add_tests(Suite *s, int nbackends)
{
    TCase *tc = mrank_tcase(s, "concurrent", JOB_TIMEOUT_S + 30);
    tcase_add_loop_test(tc, test_concurrent, 0, nbackends * T_KINDS * (MAX_RANKS - MIN_RANKS + 1));
}

int main(void)
{
    return mrank_main("concurrent", MRANK_BACKEND, add_tests);
}
