/* SPDX-License-Identifier: BSD-3-Clause */
/* Ranks that disagree about a call get an error on every rank, within the timeout, on every CPU backend: never
 * success with wrong data, never a crash. Rank 0 calls differently from the others: another count or dtype size
 * (the message lengths differ), or, with lengths that match, another dtype, op, root or collective. Gloo itself
 * ends the process when a message is longer than the buffer posted for it; its module keeps the two apart. Each
 * case runs in fresh processes, as a mismatch leaves the communicator unusable. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tcomms/tcomms.h>

#include "mrank.h"
#include "mrank_world.h"

#define OP_TIMEOUT_MS 1500u
#define SLACK_S 3.0 /* an error may come this long after the timeout */
#define JOB_S 30
#define N 1000

typedef enum { ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, BROADCAST, ALL_TO_ALL, SEND_RECV, REDUCE } kind_t;

/* One side's call: what rank 0 passes, or what the others pass. */
typedef struct call {
    kind_t type;
    size_t count;
    tcomms_dtype_t dtype;
    tcomms_op_t op;
    int root;
} call_t;

typedef struct mismatch {
    const char *what;
    int nranks;
    call_t zero, others;
    /* A rank whose every message came from ranks that agree with it may complete (broadcast on 3 ranks: rank 2
     * hears only rank 1); its next collective must then fail. */
    int next_may_tell;
} mismatch_t;

#define F32 TCOMMS_FLOAT32
static const mismatch_t cases[] = {
    {"all_reduce, rank 0 shorter", 2, {ALL_REDUCE, N, F32, TCOMMS_SUM, 0}, {ALL_REDUCE, 2 * N, F32, TCOMMS_SUM, 0}, 0},
    {"all_reduce, rank 0 longer", 2, {ALL_REDUCE, 2 * N, F32, TCOMMS_SUM, 0}, {ALL_REDUCE, N, F32, TCOMMS_SUM, 0}, 0},
    {"all_reduce, float32 against float64", 2, {ALL_REDUCE, N, F32, TCOMMS_SUM, 0},
     {ALL_REDUCE, N, TCOMMS_FLOAT64, TCOMMS_SUM, 0}, 0},
    {"all_gather", 2, {ALL_GATHER, N, F32, TCOMMS_SUM, 0}, {ALL_GATHER, 2 * N, F32, TCOMMS_SUM, 0}, 0},
    {"reduce_scatter", 2, {REDUCE_SCATTER, 2 * N, TCOMMS_INT32, TCOMMS_SUM, 0},
     {REDUCE_SCATTER, N, TCOMMS_INT32, TCOMMS_SUM, 0}, 0},
    {"broadcast from rank 0", 2, {BROADCAST, 2 * N, F32, TCOMMS_SUM, 0}, {BROADCAST, N, F32, TCOMMS_SUM, 0}, 0},
    {"all_to_all", 2, {ALL_TO_ALL, N, F32, TCOMMS_SUM, 0}, {ALL_TO_ALL, 2 * N, F32, TCOMMS_SUM, 0}, 0},
    {"send 2N from rank 0, recv N", 2, {SEND_RECV, 2 * N, F32, TCOMMS_SUM, 0}, {SEND_RECV, N, F32, TCOMMS_SUM, 0}, 0},
    {"send N from rank 0, recv 2N", 2, {SEND_RECV, N, F32, TCOMMS_SUM, 0}, {SEND_RECV, 2 * N, F32, TCOMMS_SUM, 0}, 0},
    /* the same message lengths */
    {"all_reduce, float32 against int32", 2, {ALL_REDUCE, N, F32, TCOMMS_SUM, 0},
     {ALL_REDUCE, N, TCOMMS_INT32, TCOMMS_SUM, 0}, 0},
    {"all_reduce, float32 against int32", 3, {ALL_REDUCE, N, F32, TCOMMS_SUM, 0},
     {ALL_REDUCE, N, TCOMMS_INT32, TCOMMS_SUM, 0}, 0},
    {"all_reduce, sum against max", 2, {ALL_REDUCE, N, F32, TCOMMS_SUM, 0}, {ALL_REDUCE, N, F32, TCOMMS_MAX, 0}, 0},
    {"all_reduce, sum against max", 3, {ALL_REDUCE, N, F32, TCOMMS_SUM, 0}, {ALL_REDUCE, N, F32, TCOMMS_MAX, 0}, 0},
    {"reduce to 0, sum against max", 2, {REDUCE, N, F32, TCOMMS_SUM, 0}, {REDUCE, N, F32, TCOMMS_MAX, 0}, 0},
    {"reduce to 0, sum against max", 3, {REDUCE, N, F32, TCOMMS_SUM, 0}, {REDUCE, N, F32, TCOMMS_MAX, 0}, 0},
    {"broadcast, root 0 against root 1", 2, {BROADCAST, N, F32, TCOMMS_SUM, 0}, {BROADCAST, N, F32, TCOMMS_SUM, 1}, 0},
    {"broadcast, root 0 against root 1", 3, {BROADCAST, N, F32, TCOMMS_SUM, 0}, {BROADCAST, N, F32, TCOMMS_SUM, 1}, 1},
    {"all_gather against reduce_scatter", 2, {ALL_GATHER, N, F32, TCOMMS_SUM, 0},
     {REDUCE_SCATTER, N, F32, TCOMMS_SUM, 0}, 0},
};
#define NCASES ((int)(sizeof(cases) / sizeof(cases[0])))

typedef struct shared {
    int backend, which;
} shared_t;

/* The call of case `m` as this rank makes it; buf holds room for any count of any case. */
static tcomms_status_t call(tcomms_comm_t *comm, const mismatch_t *m, int rank, void *in, void *out)
{
    const call_t *c = rank == 0 ? &m->zero : &m->others;
    size_t n = c->count;
    switch (c->type) {
    case ALL_REDUCE: return tcomms_all_reduce(comm, in, out, n, c->dtype, c->op, NULL, NULL);
    case REDUCE: return tcomms_reduce(comm, in, out, n, c->dtype, c->op, c->root, NULL, NULL);
    case ALL_GATHER: return tcomms_all_gather(comm, in, out, n, c->dtype, NULL, NULL);
    case REDUCE_SCATTER: return tcomms_reduce_scatter(comm, in, out, n, c->dtype, c->op, NULL, NULL);
    case BROADCAST: return tcomms_broadcast(comm, out, n, c->dtype, c->root, NULL, NULL);
    case ALL_TO_ALL: return tcomms_all_to_all(comm, in, out, n, c->dtype, NULL, NULL);
    default: /* rank 0 sends, rank 1 receives */
        return rank == 0 ? tcomms_send(comm, in, n, c->dtype, 1, NULL, NULL)
                         : tcomms_recv(comm, out, n, c->dtype, 0, NULL, NULL);
    }
}

static int mismatch_rank(int rank, int size, void *arg)
{
    const shared_t *sh = arg;
    const mismatch_t *m = &cases[sh->which];
    const char *backend = mrank_backend(sh->backend);
    tcomms_comm_t *comm = mrank_world(backend, OP_TIMEOUT_MS, rank);
    if (comm == NULL)
        return 1;
    size_t room = (size_t)size * 2 * N * sizeof(double);
    void *in = calloc(1, room), *out = calloc(1, room);
    if (in == NULL || out == NULL) {
        free(in);
        free(out);
        tcomms_comm_destroy(comm);
        return mrank_failf("FAIL rank %d: out of memory for %zu-byte buffers", rank, room);
    }
    int fails = 0;
    double t0 = mrank_now();
    tcomms_status_t st = call(comm, m, rank, in, out);
    double took = mrank_now() - t0;
    const char *msg = tcomms_last_error();
    /* Where the lengths differ, a rank that only sends (the sender of send/recv, broadcast's root) may see its
     * message taken: only the receiving side can tell. Where they match, no message may be taken at all. */
    int lengths_differ = m->zero.count * tcomms_dtype_size(m->zero.dtype) !=
                         m->others.count * tcomms_dtype_size(m->others.dtype);
    int sender_only = rank == 0 && (m->zero.type == SEND_RECV || (m->zero.type == BROADCAST && m->zero.root == 0));
    int must_fail = !(lengths_differ && sender_only);
    if (st == TCOMMS_SUCCESS && m->next_may_tell) {
        /* this rank heard only from ranks that agree with it: the others broke, so its next collective fails */
        t0 = mrank_now();
        st = tcomms_barrier(comm, NULL, NULL);
        took = mrank_now() - t0;
        msg = tcomms_last_error();
        mrank_logf("test_mismatch: %s, %s, rank %d: the call succeeded, the next barrier: status %d after %.1f s",
                   backend, m->what, rank, st, took);
    }
    if (must_fail && (st == TCOMMS_SUCCESS || msg == NULL || *msg == '\0'))
        fails += mrank_failf("FAIL rank %d, %s, %s, %d ranks: status %d (\"%s\"), expected an error", rank, backend,
                             m->what, size, st, msg ? msg : "(null)");
    else
        mrank_logf("test_mismatch: %s, %s, %d ranks, rank %d: status %d after %.1f s: %s", backend, m->what, size,
                   rank, st, took, st == TCOMMS_SUCCESS ? "" : msg);
    if (took > OP_TIMEOUT_MS / 1000.0 + SLACK_S)
        fails += mrank_failf("FAIL rank %d, %s, %s: took %.1f s (timeout %.1f s)", rank, backend, m->what, took,
                             OP_TIMEOUT_MS / 1000.0);
    tcomms_comm_destroy(comm); /* its status after a failed call is not what this test is about */
    free(in);
    free(out);
    return fails;
}

START_TEST(every_receiver_gets_an_error)
{
    shared_t *sh = mrank_shared_alloc(sizeof *sh);
    ck_assert_ptr_nonnull(sh);
    sh->backend = _i / NCASES;
    sh->which = _i % NCASES;
    const mismatch_t *m = &cases[sh->which];
    int failing = mrank_run(m->nranks, mismatch_rank, sh, JOB_S);
    mrank_shared_free(sh, sizeof *sh);
    ck_assert_msg(failing == 0, "%s, %s, %d ranks: %d rank(s) failed or died (see stderr)", mrank_backend(_i / NCASES),
                  m->what, m->nranks, failing);
}
END_TEST

static void add_tests(Suite *s, int nbackends)
{
    TCase *tc = mrank_tcase(s, "mismatch", JOB_S + 10);
    tcase_add_loop_test(tc, every_receiver_gets_an_error, 0, nbackends * NCASES);
}

int main(void)
{
    return mrank_main("mismatch", MRANK_BACKEND, add_tests);
}
