/* Ranks that disagree about a call (rank 0 passes another count or dtype than the others) get an error on every
 * rank that receives, within the timeout, on every CPU backend: never success with wrong data, never a crash. Gloo
 * itself ends the process when a message is longer than the buffer posted for it; its module keeps the two apart.
 * Each case runs in fresh processes, as a mismatch leaves the communicator unusable. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tcomms/tcomms.h>

#include "mrank.h"
#include "check_run.h"

#define NRANKS 2
#define MAX_BACKENDS 8
#define OP_TIMEOUT_MS 1500u
#define SLACK_S 3.0 /* an error may come this long after the timeout */
#define JOB_S 30
#define N 1000

typedef enum { ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, BROADCAST, ALL_TO_ALL, SEND_RECV } kind_t;

typedef struct mismatch {
    const char *what;
    kind_t type;
    size_t count0, count;          /* rank 0's count, the others' */
    tcomms_dtype_t dtype0, dtype;  /* rank 0's dtype, the others' */
} mismatch_t;

static const mismatch_t cases[] = {
    {"all_reduce, rank 0 shorter", ALL_REDUCE, N, 2 * N, TCOMMS_FLOAT32, TCOMMS_FLOAT32},
    {"all_reduce, rank 0 longer", ALL_REDUCE, 2 * N, N, TCOMMS_FLOAT32, TCOMMS_FLOAT32},
    {"all_reduce, float32 against float64", ALL_REDUCE, N, N, TCOMMS_FLOAT32, TCOMMS_FLOAT64},
    {"all_gather", ALL_GATHER, N, 2 * N, TCOMMS_FLOAT32, TCOMMS_FLOAT32},
    {"reduce_scatter", REDUCE_SCATTER, 2 * N, N, TCOMMS_INT32, TCOMMS_INT32},
    {"broadcast from rank 0", BROADCAST, 2 * N, N, TCOMMS_FLOAT32, TCOMMS_FLOAT32},
    {"all_to_all", ALL_TO_ALL, N, 2 * N, TCOMMS_FLOAT32, TCOMMS_FLOAT32},
    {"send 2N from rank 0, recv N", SEND_RECV, 2 * N, N, TCOMMS_FLOAT32, TCOMMS_FLOAT32},
    {"send N from rank 0, recv 2N", SEND_RECV, N, 2 * N, TCOMMS_FLOAT32, TCOMMS_FLOAT32},
};
#define NCASES ((int)(sizeof(cases) / sizeof(cases[0])))

static char backends[MAX_BACKENDS][32];
static int nbackends;

typedef struct shared {
    int backend, which;
} shared_t;

/* The call of case `m` as this rank makes it; buf holds room for any count of any case. */
static tcomms_status_t call(tcomms_comm_t *comm, const mismatch_t *m, int rank, void *in, void *out)
{
    size_t n = rank == 0 ? m->count0 : m->count;
    tcomms_dtype_t dt = rank == 0 ? m->dtype0 : m->dtype;
    switch (m->type) {
    case ALL_REDUCE: return tcomms_all_reduce(comm, in, out, n, dt, TCOMMS_SUM, NULL, NULL);
    case ALL_GATHER: return tcomms_all_gather(comm, in, out, n, dt, NULL, NULL);
    case REDUCE_SCATTER: return tcomms_reduce_scatter(comm, in, out, n, dt, TCOMMS_SUM, NULL, NULL);
    case BROADCAST: return tcomms_broadcast(comm, out, n, dt, 0, NULL, NULL);
    case ALL_TO_ALL: return tcomms_all_to_all(comm, in, out, n, dt, NULL, NULL);
    default: /* rank 0 sends, rank 1 receives */
        return rank == 0 ? tcomms_send(comm, in, n, dt, 1, NULL, NULL) : tcomms_recv(comm, out, n, dt, 0, NULL, NULL);
    }
}

static int mismatch_rank(int rank, int size, void *arg)
{
    const shared_t *sh = arg;
    const mismatch_t *m = &cases[sh->which];
    tcomms_comm_params_t p = {0};
    p.field_mask = TCOMMS_COMM_PARAM_BACKEND | TCOMMS_COMM_PARAM_TIMEOUT;
    p.backend = backends[sh->backend];
    p.timeout_ms = OP_TIMEOUT_MS;
    tcomms_comm_t *comm = NULL;
    tcomms_status_t st = tcomms_comm_create(&p, &comm);
    if (st != TCOMMS_SUCCESS)
        return mrank_failf("FAIL rank %d, %s: tcomms_comm_create: %s", rank, p.backend, tcomms_last_error());
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
    st = call(comm, m, rank, in, out);
    double took = mrank_now() - t0;
    const char *msg = tcomms_last_error();
    /* A rank that only sends (the sender of send/recv, broadcast's root) may see its message delivered: only the
     * receiving side can tell. */
    int must_fail = (m->type != SEND_RECV && m->type != BROADCAST) || rank != 0;
    if (must_fail && (st == TCOMMS_SUCCESS || msg == NULL || *msg == '\0'))
        fails += mrank_failf("FAIL rank %d, %s, %s: status %d (\"%s\"), expected an error", rank, p.backend, m->what,
                             st, msg ? msg : "(null)");
    else
        mrank_logf("test_mismatch: %s, %s, rank %d: status %d after %.1f s: %s", p.backend, m->what, rank, st,
                   took, st == TCOMMS_SUCCESS ? "" : msg);
    if (took > OP_TIMEOUT_MS / 1000.0 + SLACK_S)
        fails += mrank_failf("FAIL rank %d, %s, %s: took %.1f s (timeout %.1f s)", rank, p.backend, m->what, took,
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
    int failing = mrank_run(NRANKS, mismatch_rank, sh, JOB_S);
    mrank_shared_free(sh, sizeof *sh);
    ck_assert_msg(failing == 0, "%s, %s: %d rank(s) failed or died (see stderr)", backends[_i / NCASES],
                  cases[_i % NCASES].what, failing);
}
END_TEST

int main(void)
{
    nbackends = mrank_backends(backends, MAX_BACKENDS);
    if (nbackends == 0) {
        printf("test_mismatch: TCOMMS_TEST_BACKENDS is empty: no CPU backend to test, skipping\n");
        return 77;
    }
    Suite *s = suite_create("mismatch");
    TCase *tc = tcase_create("mismatch");
    tcase_set_timeout(tc, JOB_S + 10);
    tcase_add_loop_test(tc, every_receiver_gets_an_error, 0, nbackends * NCASES);
    suite_add_tcase(s, tc);
    return check_run(s);
}
