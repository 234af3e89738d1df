/* SPDX-License-Identifier: BSD-3-Clause */
/* broadcast and reduce over a binomial tree rooted at a.peer (ranks renumbered so the root is 0): ceil(log2 n)
 * latencies, the whole message on every edge. broadcast: receive from the parent, then send to every child (largest
 * subtree first). reduce: receive every child's partial result, fold them into ours, send the sum to the parent. */
#include <string.h>

#include "engine.h"
#include "tree.h"

/* The shared binomial tree (tree.h) over virtual ranks, the root being virtual rank 0. */
static int real_rank(const tcu_task_t *t, int v)
{
    return tcu_tree_real(v, t->a.peer, t->size);
}

static int bcast_step(tcu_task_t *t)
{
    int n = t->size, v = tcu_tree_virt(t->rank, t->a.peer, n);
    int phase = v == 0 ? t->round + 1 : t->round; /* 0: receive, 1: send, 2: done */
    size_t bytes = t->a.count * t->esize;
    if (bytes == 0 || phase == 2)
        return TCU_DONE;
    if (phase == 0) {
        tcu_recv(t, real_rank(t, tcu_tree_parent(v)), 0, t->a.recvbuf, bytes);
        return TCU_MORE;
    }
    int sent = 0;
    for (int m = tcu_tree_top(v, n) >> 1; m > 0; m >>= 1) {
        if (v + m < n) {
            tcu_send(t, real_rank(t, v + m), 0, t->a.recvbuf, bytes);
            sent = 1;
        }
    }
    return sent ? TCU_MORE : TCU_DONE;
}

const tcu_algo_t tcu_bcast_binomial = {"binomial", bcast_step};

/* Scratch: the partial result (non-root ranks with children), then one receive block per child. */
static int reduce_step(tcu_task_t *t)
{
    int n = t->size, v = tcu_tree_virt(t->rank, t->a.peer, n), root = v == 0;
    size_t bytes = t->a.count * t->esize;
    int parent = root ? -1 : real_rank(t, tcu_tree_parent(v));
    if (bytes == 0)
        return TCU_DONE;
    int kids = 0;
    for (int m = tcu_tree_top(v, n) >> 1; m > 0; m >>= 1)
        kids += v + m < n;
    if (kids == 0) { /* a leaf: our input is our partial result */
        if (t->round > 0)
            return TCU_DONE;
        tcu_send(t, parent, 0, t->a.sendbuf, bytes);
        return TCU_MORE;
    }
    size_t own = root ? 0 : bytes;
    if (t->round == 0) {
        unsigned char *s = tcu_scratch(t, own + (size_t)kids * bytes);
        if (s == NULL)
            return TCOMMS_ERR_NO_MEMORY;
        int i = 0;
        for (int m = tcu_tree_top(v, n) >> 1; m > 0; m >>= 1)
            if (v + m < n)
                tcu_recv(t, real_rank(t, v + m), 0, s + own + (size_t)i++ * bytes, bytes);
        return TCU_MORE;
    }
    if (t->round == 1) {
        unsigned char *acc = root ? t->a.recvbuf : t->scratch;
        const void *cur = t->a.sendbuf; /* in place on the root this is recvbuf */
        for (int i = 0; i < kids; i++) {
            t->reduce(acc, cur, t->scratch + own + (size_t)i * bytes, t->a.count);
            cur = acc;
        }
        if (root)
            return TCU_DONE;
        tcu_send(t, parent, 0, acc, bytes);
        return TCU_MORE;
    }
    return TCU_DONE;
}

const tcu_algo_t tcu_reduce_binomial = {"binomial", reduce_step};
