/* SPDX-License-Identifier: BSD-3-Clause */
/* A rank whose operations are done leaves tcomms (a barrier over shared memory, a sleep) while a peer's large send to
 * it still waits for what the receiver owes it (the end of a rendezvous): the send must complete anyway, promptly,
 * on every CPU backend. Two forms: rounds of {send/recv of 1 MiB + 3 shifted by 2, gather of 256 KiB to root 1}, then
 * the outside barrier; and a sender whose receive queue a third rank floods with eager messages, so that the
 * receiver's acknowledgement of the rendezvous must wait for room (UCX queues it, and only progress sends it). Every
 * wait must end within its bound, and every byte must be the sender's. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tcomms/tcomms.h>

#include "mrank.h"

#define ROUNDS 300
#define P2P_BYTES ((1u << 20) + 3)
#define GATHER_BYTES (256u << 10)
#define OP_TIMEOUT_MS 4000u /* a stuck send shows as a wait past AWAY_BOUND_S, or this timeout */
#define AWAY_BOUND_S 1.0
#define JOB_S 100

typedef struct shared {
    int backend, nranks;
    volatile int barrier;
} shared_t;

/* The byte at `i` of what `rank` sends in `round` (p2p: salt 0, gather: salt 1): computed, never copied. */
static unsigned char pattern(int rank, int round, int salt, size_t i)
{
    uint64_t x = ((uint64_t)rank * 1000003u + (uint64_t)round * 7919u + (uint64_t)salt * 104729u) ^ (i * 2654435761u);
    return (unsigned char)(x ^ (x >> 13) ^ (x >> 29));
}

static void fill(unsigned char *p, size_t n, int rank, int round, int salt)
{
    for (size_t i = 0; i < n; i++)
        p[i] = pattern(rank, round, salt, i);
}

/* Index of the first byte that is not `rank`'s, or n. */
static size_t first_wrong(const unsigned char *p, size_t n, int rank, int round, int salt)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != pattern(rank, round, salt, i))
            return i;
    return n;
}

/* Wait for `w`, failing when it takes longer than the bound. */
static int timed_wait(tcomms_work_t *w, int rank, int round, const char *what, double *worst)
{
    double t0 = mrank_now();
    tcomms_status_t st = tcomms_work_wait(w, 0);
    double took = mrank_now() - t0;
    tcomms_work_free(w);
    if (took > *worst)
        *worst = took;
    if (st != TCOMMS_SUCCESS)
        return mrank_failf("FAIL rank %d, round %d: %s: status %d after %.2f s: %s", rank, round, what, st, took,
                           tcomms_last_error());
    if (took > AWAY_BOUND_S)
        return mrank_failf("FAIL rank %d, round %d: %s took %.2f s (its peer was away)", rank, round, what, took);
    return 0;
}

static int gather(tcomms_comm_t *comm, const void *mine, void *all, int root, int rank, int round, double *worst)
{
    tcomms_work_t *w = NULL;
    if (tcomms_gather(comm, mine, all, GATHER_BYTES, TCOMMS_UINT8, root, NULL, &w) != TCOMMS_SUCCESS)
        return mrank_failf("FAIL rank %d, round %d: posting the gather: %s", rank, round, tcomms_last_error());
    return timed_wait(w, rank, round, "the gather", worst);
}

/* A communicator on `backend` with OP_TIMEOUT_MS, or NULL (reported). */
static tcomms_comm_t *open_comm(int rank, const char *backend)
{
    tcomms_comm_params_t p = {0};
    p.field_mask = TCOMMS_COMM_PARAM_BACKEND | TCOMMS_COMM_PARAM_TIMEOUT;
    p.backend = backend;
    p.timeout_ms = OP_TIMEOUT_MS;
    tcomms_comm_t *comm = NULL;
    if (tcomms_comm_create(&p, &comm) != TCOMMS_SUCCESS) {
        mrank_failf("FAIL rank %d, %s: tcomms_comm_create: %s", rank, backend, tcomms_last_error());
        return NULL;
    }
    return comm;
}

static int away_rank(int rank, int size, void *arg)
{
    shared_t *sh = arg;
    tcomms_comm_t *comm = open_comm(rank, mrank_backend(sh->backend));
    if (comm == NULL)
        return 1;
    unsigned char *out = malloc(P2P_BYTES), *in = malloc(P2P_BYTES), *mine = malloc(GATHER_BYTES);
    unsigned char *all = malloc((size_t)size * GATHER_BYTES);
    int to = (rank + 2) % size, from = (rank - 2 + 2 * size) % size, root = 1 % size, fails = 0;
    double worst = 0;
    for (int round = 1; round <= ROUNDS && fails == 0 && out && in && mine && all; round++) {
        fill(out, P2P_BYTES, rank, round, 0);
        fill(mine, GATHER_BYTES, rank, round, 1);
        memset(in, 0, P2P_BYTES);
        /* Two orders: the receive posted before the peer's send arrives (the rendezvous ends in progress), or
         * after it had time to arrive as an unexpected message (the rendezvous ends inside the post). */
        int late = round % 2;
        tcomms_work_t *rw = NULL, *sw = NULL;
        tcomms_status_t st = TCOMMS_SUCCESS;
        if (!late)
            st = tcomms_recv(comm, in, P2P_BYTES, TCOMMS_UINT8, from, NULL, &rw);
        if (st == TCOMMS_SUCCESS)
            st = tcomms_send(comm, out, P2P_BYTES, TCOMMS_UINT8, to, NULL, &sw);
        if (st == TCOMMS_SUCCESS && late)
            mrank_sleep_ms(3);
        if (st == TCOMMS_SUCCESS && late)
            st = tcomms_recv(comm, in, P2P_BYTES, TCOMMS_UINT8, from, NULL, &rw);
        if (st != TCOMMS_SUCCESS) {
            fails += mrank_failf("FAIL rank %d, round %d: posting send/recv: %s", rank, round, tcomms_last_error());
            tcomms_work_free(rw);
            tcomms_work_free(sw);
            break;
        }
        fails += timed_wait(rw, rank, round, "the receive", &worst);
        fails += timed_wait(sw, rank, round, "the send", &worst);
        if (fails == 0)
            fails += gather(comm, mine, all, root, rank, round, &worst);
        size_t bad = first_wrong(in, P2P_BYTES, from, round, 0);
        if (fails == 0 && bad < P2P_BYTES)
            fails += mrank_failf("FAIL rank %d, round %d: received byte %zu is not rank %d's", rank, round, bad, from);
        for (int r = 0; fails == 0 && rank == root && r < size; r++) {
            bad = first_wrong(all + (size_t)r * GATHER_BYTES, GATHER_BYTES, r, round, 1);
            if (bad < GATHER_BYTES)
                fails += mrank_failf("FAIL rank %d, round %d: gathered byte %zu of rank %d is not its", rank, round,
                                     bad, r);
        }
        /* Leave tcomms for a barrier of our own: whatever this rank still owes its peers must not wait for its
         * next call. */
        if (fails == 0 && mrank_host_barrier(&sh->barrier, size, round, 20) != 0)
            fails += mrank_failf("FAIL rank %d, round %d: the outside barrier timed out", rank, round);
    }
    if (!(out && in && mine && all))
        fails += mrank_failf("FAIL rank %d: out of memory", rank);
    mrank_logf("test_away: %s, %d ranks, rank %d: longest wait %.3f s", mrank_backend(sh->backend), size, rank, worst);
    free(out);
    free(in);
    free(mine);
    free(all);
    tcomms_comm_destroy(comm);
    return fails;
}

/* ---- the flooded sender: rank 0 sends 1 MiB + 3 to rank 1 while rank 2 sends it FLOOD_MSGS eager messages; rank 1
 * leaves for FLOOD_AWAY_MS as soon as its receive completed ---- */
#define FLOOD_ROUNDS 16
#define FLOOD_MSGS 64
#define FLOOD_BYTES (256u << 10)
#define FLOOD_AWAY_MS 700
#define FLOOD_BOUND_S 0.5

static int flood_round(tcomms_comm_t *comm, int rank, int round, unsigned char *big, unsigned char *msgs,
                       double *worst)
{
    int fails = 0;
    tcomms_work_t *w[FLOOD_MSGS];
    /* the data first, so that after the barrier rank 0's send and rank 2's flood start together */
    if (rank == 0)
        fill(big, P2P_BYTES, 0, round, 0);
    else if (rank == 1)
        memset(big, 0, P2P_BYTES);
    else
        for (int i = 0; i < FLOOD_MSGS; i++)
            fill(msgs + (size_t)i * FLOOD_BYTES, FLOOD_BYTES, 2, round * FLOOD_MSGS + i, 1);
    if (tcomms_barrier(comm, NULL, NULL) != TCOMMS_SUCCESS)
        return mrank_failf("FAIL rank %d, round %d: barrier: %s", rank, round, tcomms_last_error());
    if (rank == 0) {
        double t0 = mrank_now();
        if (tcomms_send(comm, big, P2P_BYTES, TCOMMS_UINT8, 1, NULL, &w[0]) != TCOMMS_SUCCESS)
            return mrank_failf("FAIL rank 0, round %d: posting the send: %s", round, tcomms_last_error());
        tcomms_status_t st = tcomms_work_wait(w[0], 0);
        double took = mrank_now() - t0;
        tcomms_work_free(w[0]);
        *worst = took > *worst ? took : *worst;
        if (st != TCOMMS_SUCCESS || took > FLOOD_BOUND_S)
            fails += mrank_failf("FAIL rank 0, round %d: the send to rank 1 took %.2f s (status %d; rank 1 left "
                                 "once its receive completed)", round, took, st);
        for (int i = 0; i < FLOOD_MSGS && fails == 0; i++) {
            if (tcomms_recv(comm, msgs + (size_t)i * FLOOD_BYTES, FLOOD_BYTES, TCOMMS_UINT8, 2, NULL, NULL) !=
                TCOMMS_SUCCESS)
                fails += mrank_failf("FAIL rank 0, round %d: receive %d from rank 2: %s", round, i,
                                     tcomms_last_error());
            else if (first_wrong(msgs + (size_t)i * FLOOD_BYTES, FLOOD_BYTES, 2, round * FLOOD_MSGS + i, 1) <
                     FLOOD_BYTES)
                fails += mrank_failf("FAIL rank 0, round %d: message %d is not rank 2's", round, i);
        }
    } else if (rank == 1) {
        if (tcomms_recv(comm, big, P2P_BYTES, TCOMMS_UINT8, 0, NULL, NULL) != TCOMMS_SUCCESS)
            return mrank_failf("FAIL rank 1, round %d: the receive: %s", round, tcomms_last_error());
        size_t bad = first_wrong(big, P2P_BYTES, 0, round, 0);
        if (bad < P2P_BYTES)
            fails += mrank_failf("FAIL rank 1, round %d: received byte %zu is not rank 0's", round, bad);
        mrank_sleep_ms(FLOOD_AWAY_MS); /* away from tcomms, owing rank 0 the rendezvous' end */
    } else {
        for (int i = 0; i < FLOOD_MSGS; i++) {
            if (tcomms_send(comm, msgs + (size_t)i * FLOOD_BYTES, FLOOD_BYTES, TCOMMS_UINT8, 0, NULL, &w[i]) !=
                TCOMMS_SUCCESS) {
                fails += mrank_failf("FAIL rank 2, round %d: send %d: %s", round, i, tcomms_last_error());
                for (int k = 0; k < i; k++)
                    tcomms_work_free(w[k]);
                return fails;
            }
        }
        for (int i = 0; i < FLOOD_MSGS; i++) {
            if (tcomms_work_wait(w[i], 0) != TCOMMS_SUCCESS && fails++ == 0)
                mrank_logf("FAIL rank 2, round %d: send %d: %s", round, i, tcomms_last_error());
            tcomms_work_free(w[i]);
        }
    }
    return fails;
}

static int flood_rank(int rank, int size, void *arg)
{
    (void)size;
    shared_t *sh = arg;
    tcomms_comm_t *comm = open_comm(rank, mrank_backend(sh->backend));
    if (comm == NULL)
        return 1;
    unsigned char *big = malloc(P2P_BYTES), *msgs = malloc((size_t)FLOOD_MSGS * FLOOD_BYTES);
    int fails = big && msgs ? 0 : mrank_failf("FAIL rank %d: out of memory", rank);
    double worst = 0;
    for (int round = 1; round <= FLOOD_ROUNDS && fails == 0; round++)
        fails += flood_round(comm, rank, round, big, msgs, &worst);
    if (rank == 0)
        mrank_logf("test_away: %s, flooded sender: longest send %.3f s", mrank_backend(sh->backend), worst);
    free(big);
    free(msgs);
    tcomms_comm_destroy(comm);
    return fails;
}

START_TEST(flooded_sender_completes_while_the_receiver_is_away)
{
    shared_t *sh = mrank_shared_alloc(sizeof *sh);
    ck_assert_ptr_nonnull(sh);
    sh->backend = _i;
    int failing = mrank_run(3, flood_rank, sh, JOB_S);
    ck_assert_msg(failing == 0, "%s, flooded sender: %d rank(s) failed (see stderr)", mrank_backend(_i), failing);
    mrank_shared_free(sh, sizeof *sh);
}
END_TEST

START_TEST(sends_complete_while_the_receiver_is_away)
{
    shared_t *sh = mrank_shared_alloc(sizeof *sh);
    ck_assert_ptr_nonnull(sh);
    sh->backend = _i / 2;
    sh->nranks = 3 + _i % 2;
    int failing = mrank_run(sh->nranks, away_rank, sh, JOB_S);
    ck_assert_msg(failing == 0, "%s on %d ranks: %d rank(s) failed (see stderr)", mrank_backend(_i / 2), sh->nranks,
                  failing);
    mrank_shared_free(sh, sizeof *sh);
}
END_TEST

static void add_tests(Suite *s, int nbackends)
{
    TCase *tc = mrank_tcase(s, "away", JOB_S + 10);
    tcase_add_loop_test(tc, sends_complete_while_the_receiver_is_away, 0, 2 * nbackends);
    tcase_add_loop_test(tc, flooded_sender_completes_while_the_receiver_is_away, 0, nbackends);
}

int main(void)
{
    return mrank_main("away", MRANK_BACKEND, add_tests);
}
