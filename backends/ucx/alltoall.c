/* SPDX-License-Identifier: BSD-3-Clause */
/* all_to_all and all_to_all_v algorithms. pairwise: n-1 steps; in step s rank r sends its block for (r + s) and
 * receives the block of (r - s), so each step is one exchange per rank and no rank is flooded (large messages).
 * linear: every receive and send posted in one round, one latency instead of n-1 (small messages). In place
 * (all_to_all only) blocks arrive in scratch and are copied into place once every block has been sent. */
#include <string.h>

#include "engine.h"

/* Round 0: in place, scratch for the incoming blocks (block q at q * count elements); 0, or -1 when out of memory. */
static int prepare(tcu_task_t *t)
{
    return !t->a.in_place || tcu_scratch(t, (size_t)t->size * t->a.count * t->esize) ? 0 : -1;
}

/* Out of place, our own block, copied after round 0's messages are posted so that the copy overlaps them (as in
 * all_gather's ring, see allgather.c). In place it is where it belongs already. */
static void copy_own(tcu_task_t *t)
{
    int r = t->rank;
    size_t es = t->esize;
    if (!t->a.in_place && tcu_vcount(t, 1, r))
        memcpy(tcu_at(t->a.recvbuf, tcu_vdispl(t, 0, r), es), tcu_at(t->a.sendbuf, tcu_vdispl(t, 1, r), es),
               tcu_vcount(t, 1, r) * es);
}

/* In place, the last round's local work: the received blocks into place, now that every block has been sent. */
static int finish(tcu_task_t *t)
{
    size_t b = t->a.count * t->esize;
    for (int q = 0; t->a.in_place && q < t->size; q++)
        if (q != t->rank)
            memcpy((unsigned char *)t->a.recvbuf + (size_t)q * b, t->scratch + (size_t)q * b, b);
    return TCU_DONE;
}

/* Post the exchange with `to` and `from`: our block for `to` from sendbuf (recvbuf in place: nothing there is
 * overwritten before the end), the block of `from` into place (into scratch in place). */
static void exchange(tcu_task_t *t, int to, int from)
{
    size_t es = t->esize;
    unsigned char *into = t->a.in_place ? t->scratch : (unsigned char *)t->a.recvbuf;
    tcu_send(t, to, 0, tcu_at(t->a.sendbuf, tcu_vdispl(t, 1, to), es), tcu_vcount(t, 1, to) * es);
    tcu_recv(t, from, 0, tcu_at(into, tcu_vdispl(t, 0, from), es), tcu_vcount(t, 0, from) * es);
}

static int pairwise_step(tcu_task_t *t)
{
    int n = t->size, r = t->rank, s = t->round + 1;
    if (t->a.type == TCOMMS_COLL_ALL_TO_ALL && t->a.count == 0)
        return TCU_DONE;
    if (s == n)
        return finish(t);
    if (t->round == 0 && prepare(t) != 0)
        return TCOMMS_ERR_NO_MEMORY;
    exchange(t, (r + s) % n, tcu_mod(r - s, n));
    if (t->round == 0)
        copy_own(t);
    return TCU_MORE;
}

const tcu_algo_t tcu_alltoall_pairwise = {"pairwise", pairwise_step};

/* Peers in the pairwise order, so that the first messages each rank waits for are the first ones sent to it. */
static int linear_step(tcu_task_t *t)
{
    int n = t->size, r = t->rank;
    if (t->a.type == TCOMMS_COLL_ALL_TO_ALL && t->a.count == 0)
        return TCU_DONE;
    if (t->round > 0)
        return finish(t);
    if (prepare(t) != 0)
        return TCOMMS_ERR_NO_MEMORY;
    for (int s = 1; s < n; s++)
        exchange(t, (r + s) % n, tcu_mod(r - s, n));
    copy_own(t);
    return TCU_MORE;
}

const tcu_algo_t tcu_alltoall_linear = {"linear", linear_step};
