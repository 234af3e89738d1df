/* SPDX-License-Identifier: BSD-3-Clause */
/* all_gather and all_gather_v algorithms; blocks are tcu_vcount/tcu_vdispl, so each step function serves both.
 * ring: n-1 steps moving one block each, bandwidth-optimal (large messages). linear: our block to every peer and
 * every peer's block into place in one step, the same bytes as ring without its n-1 hand-offs (few ranks).
 * recursive_doubling (powers of two) and bruck (any n): ceil(log2 n) steps, each moving a run of consecutive ranks'
 * blocks as one message (small ones). */
#include <string.h>

#include "engine.h"

/* ---- ring ---------------------------------------------------------------------------------------------------- */

/* Out of place, our own block is copied into recvbuf after the first round is posted, and that round sends it from
 * sendbuf, so that the copy overlaps the transfer (docs/perf.md, "Measurements behind the code"). */
static void copy_own(tcu_task_t *t, void *own, size_t bytes)
{
    if (bytes && own != t->a.sendbuf)
        memcpy(own, t->a.sendbuf, bytes);
}

/* Step j: rank r forwards block (r - j) to its right neighbour and receives block (r - j - 1) from its left one
 * straight into place, so displacements with gaps or in any order cost nothing. */
static int ring_step(tcu_task_t *t)
{
    int n = t->size, r = t->rank, j = t->round;
    size_t es = t->esize;
    unsigned char *buf = t->a.recvbuf;
    if ((t->a.type == TCOMMS_COLL_ALL_GATHER && t->a.count == 0) || j == n - 1)
        return TCU_DONE;
    int out = tcu_mod(r - j, n), in = tcu_mod(r - j - 1, n);
    const void *from = j == 0 ? t->a.sendbuf : tcu_at(buf, tcu_vdispl(t, 0, out), es);
    tcu_send(t, (r + 1) % n, (unsigned)j, from, tcu_vcount(t, 0, out) * es);
    tcu_recv(t, tcu_mod(r - 1, n), (unsigned)j, tcu_at(buf, tcu_vdispl(t, 0, in), es), tcu_vcount(t, 0, in) * es);
    if (j == 0)
        copy_own(t, tcu_at(buf, tcu_vdispl(t, 0, r), es), tcu_vcount(t, 0, r) * es);
    return TCU_MORE;
}

const tcu_algo_t tcu_allgather_ring = {"ring", ring_step};

/* ---- linear -------------------------------------------------------------------------------------------------- */

/* Peers in ring order (r + s, r - s), so that the first message each rank waits for is the first one sent to it.
 * Every block goes from sendbuf and lands in place. */
static int linear_step(tcu_task_t *t)
{
    int n = t->size, r = t->rank;
    size_t es = t->esize;
    unsigned char *buf = t->a.recvbuf;
    if ((t->a.type == TCOMMS_COLL_ALL_GATHER && t->a.count == 0) || t->round > 0)
        return TCU_DONE;
    for (int s = 1; s < n; s++) {
        int in = tcu_mod(r - s, n);
        tcu_send(t, (r + s) % n, 0, t->a.sendbuf, tcu_vcount(t, 0, r) * es);
        tcu_recv(t, in, 0, tcu_at(buf, tcu_vdispl(t, 0, in), es), tcu_vcount(t, 0, in) * es);
    }
    copy_own(t, tcu_at(buf, tcu_vdispl(t, 0, r), es), tcu_vcount(t, 0, r) * es);
    return TCU_MORE;
}

const tcu_algo_t tcu_allgather_linear = {"linear", linear_step};

/* ---- the packed work area of the logarithmic algorithms ------------------------------------------------------ */

/* They send runs of consecutive ranks' blocks, so the blocks must lie packed in rank order: block q at work +
 * pre(q), pre(q) being the bytes of the blocks before q. That is recvbuf itself for all_gather (layout EQUAL) and
 * for all_gather_v with packed displacements (V_PACKED: work at recvbuf + state[1]); other displacements gather in
 * scratch and are unpacked at the end (V_SCRATCH: work at scratch + state[1]). The v layouts keep pre() as n + 1
 * prefix sums at the start of scratch. Each rank decides alone: the messages are the same either way. */
enum { EQUAL, V_PACKED, V_SCRATCH };

static size_t pre(const tcu_task_t *t, int q)
{
    return t->state[0] == EQUAL ? (size_t)q * t->a.count * t->esize : ((const size_t *)(const void *)t->scratch)[q];
}

static unsigned char *work(const tcu_task_t *t)
{
    return (t->state[0] == V_SCRATCH ? t->scratch : (unsigned char *)t->a.recvbuf) + t->state[1];
}

static size_t block_off(const tcu_task_t *t, int q)
{
    return tcu_vdispl(t, 0, q) * t->esize;
}

/* Round 0: choose the layout. TCU_MORE to go on, TCU_DONE when there is nothing to move (every rank knows every
 * count), or an error. */
static int setup(tcu_task_t *t)
{
    int n = t->size;
    size_t es = t->esize;
    if (t->a.type == TCOMMS_COLL_ALL_GATHER) {
        t->state[0] = EQUAL;
        t->state[1] = 0;
        if (t->a.count == 0)
            return TCU_DONE;
    } else {
        size_t pres = ((size_t)n + 1) * sizeof(size_t), total = 0, base = 0;
        int packed = 1, first = -1;
        for (int q = 0; q < n; q++) {
            size_t len = tcu_vcount(t, 0, q) * es;
            if (len && first < 0) {
                first = q;
                base = block_off(t, q);
            } else if (len && block_off(t, q) != base + total) {
                packed = 0;
            }
            total += len;
        }
        if (total == 0)
            return TCU_DONE;
        size_t *p = tcu_scratch(t, pres + (packed ? 0 : total));
        if (p == NULL)
            return tcu_fail(t, TCOMMS_ERR_NO_MEMORY, "out of memory for %zu bytes of scratch",
                            pres + (packed ? 0 : total));
        p[0] = 0;
        for (int q = 0; q < n; q++)
            p[q + 1] = p[q] + tcu_vcount(t, 0, q) * es;
        t->state[0] = packed ? V_PACKED : V_SCRATCH;
        t->state[1] = packed ? base : pres;
    }
    return TCU_MORE;
}

/* The last round's local work: unpack a scratch work area into recvbuf (our own block: from sendbuf, or there
 * already in place). */
static int finish(tcu_task_t *t)
{
    if (t->state[0] != V_SCRATCH)
        return TCU_DONE;
    for (int q = 0; q < t->size; q++) {
        size_t len = pre(t, q + 1) - pre(t, q);
        if (len && q != t->rank)
            memcpy((unsigned char *)t->a.recvbuf + block_off(t, q), work(t) + pre(t, q), len);
    }
    if (!t->a.in_place && pre(t, t->rank + 1) > pre(t, t->rank))
        memcpy((unsigned char *)t->a.recvbuf + block_off(t, t->rank), t->a.sendbuf,
               pre(t, t->rank + 1) - pre(t, t->rank));
    return TCU_DONE;
}

static void move(tcu_task_t *t, int send, int peer, unsigned slot, size_t from, size_t len)
{
    if (len == 0)
        return;
    if (send)
        tcu_send(t, peer, slot, work(t) + from, len);
    else
        tcu_recv(t, peer, slot, work(t) + from, len);
}

/* Send (or receive) the blocks of ranks a, a+1, ..., a+m-1 (mod n) as one message, or two where the run wraps past
 * rank n-1 (slots `slot` and `slot` + 1). Sender and receiver name the same run, so they split it alike; empty
 * pieces are skipped on both sides. */
static void move_run(tcu_task_t *t, int send, int peer, unsigned slot, int a, int m)
{
    int n = t->size, end = a + m < n ? a + m : n;
    move(t, send, peer, slot, pre(t, a), pre(t, end) - pre(t, a));
    if (a + m > n)
        move(t, send, peer, slot + 1, 0, pre(t, a + m - n));
}

/* Round 0 of both algorithms sends just our own block (run [r, r + 1), slot 0): from sendbuf, see copy_own. */
static void send_own(tcu_task_t *t, int peer)
{
    size_t mine = pre(t, t->rank + 1) - pre(t, t->rank);
    if (mine)
        tcu_send(t, peer, 0, t->a.sendbuf, mine);
}

/* ---- bruck --------------------------------------------------------------------------------------------------- */

/* Step k (distance d = 2^k): rank r holds the blocks of ranks [r, r + d) and sends the first min(d, n - d) of them
 * to r - d while receiving those of [r + d, ...) from r + d, so it then holds [r, r + min(2d, n)). No rotation: the
 * runs land where they belong. */
static int bruck_step(tcu_task_t *t)
{
    int n = t->size, r = t->rank, k = t->round;
    if (k == 0) {
        int st = setup(t);
        if (st != TCU_MORE)
            return st;
    }
    if (k >= 30 || (1 << k) >= n)
        return finish(t);
    int d = 1 << k, m = d < n - d ? d : n - d;
    if (k == 0)
        send_own(t, tcu_mod(r - 1, n));
    else
        move_run(t, 1, tcu_mod(r - d, n), 2u * (unsigned)k, r, m);
    move_run(t, 0, (r + d) % n, 2u * (unsigned)k, (r + d) % n, m);
    if (k == 0)
        copy_own(t, work(t) + pre(t, r), pre(t, r + 1) - pre(t, r));
    return TCU_MORE;
}

const tcu_algo_t tcu_allgather_bruck = {"bruck", bruck_step};

/* ---- recursive doubling -------------------------------------------------------------------------------------- */

/* Step k: exchange with r xor 2^k the 2^k blocks each side holds (aligned runs, never wrapping). Only for powers of
 * two; other sizes run bruck (same number of steps), so forcing it is always correct. */
static int rd_step(tcu_task_t *t)
{
    int n = t->size, r = t->rank, k = t->round;
    if (n & (n - 1))
        return bruck_step(t);
    if (k == 0) {
        int st = setup(t);
        if (st != TCU_MORE)
            return st;
    }
    if ((1 << k) >= n)
        return finish(t);
    int d = 1 << k, peer = r ^ d;
    if (k == 0)
        send_own(t, peer);
    else
        move_run(t, 1, peer, 2u * (unsigned)k, r & ~(d - 1), d);
    move_run(t, 0, peer, 2u * (unsigned)k, peer & ~(d - 1), d);
    if (k == 0)
        copy_own(t, work(t) + pre(t, r), pre(t, r + 1) - pre(t, r));
    return TCU_MORE;
}

const tcu_algo_t tcu_allgather_recursive_doubling = {"recursive_doubling", rd_step};
