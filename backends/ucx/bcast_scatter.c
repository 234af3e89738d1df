/* SPDX-License-Identifier: BSD-3-Clause */
/* broadcast for large messages (van de Geijn): the root's buffer, cut into n near-equal blocks (tcu_block) owned by
 * the virtual ranks, is scattered down the binomial tree (tree.h), then a ring all-gather completes every copy. The
 * root sends each byte about once instead of ceil(log2 n) times, at the price of n+1 steps and ~n copies of the
 * message in all: a win where the root's link is the bottleneck, not on one host (docs/ucx.md, broadcast). */
#include "tree.h"

/* First element of block b (b == n: the end of the buffer). */
static size_t block_first(size_t count, int n, int b)
{
    size_t first = count, len;
    if (b < n)
        tcu_block(count, n, b, &first, &len);
    return first;
}

/* Send or receive blocks [a, e) of virtual ranks, one message; nothing when they hold no element (count < n). */
static void move_blocks(tcu_task_t *t, int send, int peer, unsigned slot, int a, int e)
{
    size_t from = block_first(t->a.count, t->size, a), to = block_first(t->a.count, t->size, e);
    if (to == from)
        return;
    unsigned char *p = tcu_at(t->a.recvbuf, from, t->esize);
    if (send)
        tcu_send(t, peer, slot, p, (to - from) * t->esize);
    else
        tcu_recv(t, peer, slot, p, (to - from) * t->esize);
}

/* Round 0: receive our subtree's blocks from the parent. Round 1: send each child its subtree's blocks. Rounds 2
 * to n: ring step j = round - 2 over virtual ranks (v forwards block v - j to v + 1, receives block v - j - 1 from
 * v - 1), slot j + 1. */
static int scatter_allgather_step(tcu_task_t *t)
{
    int n = t->size, root = t->a.peer, v = tcu_tree_virt(t->rank, root, n), k = t->round;
    if (t->a.count == 0 || k > n)
        return TCU_DONE;
    if (k == 0) {
        if (v != 0)
            move_blocks(t, 0, tcu_tree_real(tcu_tree_parent(v), root, n), 0, v, v + tcu_tree_span(v, n));
        return TCU_MORE;
    }
    if (k == 1) {
        for (int m = tcu_tree_top(v, n) >> 1; m > 0; m >>= 1)
            if (v + m < n)
                move_blocks(t, 1, tcu_tree_real(v + m, root, n), 0, v + m, v + m + tcu_tree_span(v + m, n));
        return TCU_MORE;
    }
    int j = k - 2, out = tcu_mod(v - j, n), in = tcu_mod(v - j - 1, n);
    unsigned slot = (unsigned)(j + 1) & 0xFFu;
    move_blocks(t, 1, tcu_tree_real((v + 1) % n, root, n), slot, out, out + 1);
    move_blocks(t, 0, tcu_tree_real(tcu_mod(v - 1, n), root, n), slot, in, in + 1);
    return TCU_MORE;
}

const tcu_algo_t tcu_bcast_scatter_allgather = {"scatter_allgather", scatter_allgather_step};
