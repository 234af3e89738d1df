/* SPDX-License-Identifier: BSD-3-Clause */
/* gather and scatter algorithms. linear: the root posts every receive (gather) or send (scatter) in one round and
 * copies its own block locally; every other rank posts one message. One latency per message, but the root posts
 * n-1 of them. binomial: the tree of tree.h; each subtree's blocks travel as one message, so the root handles
 * ceil(log2 n) messages and inner ranks forward through scratch (one extra copy per level): small messages. */
#include <string.h>

#include "tree.h"

static int gather_step(tcu_task_t *t)
{
    int n = t->size, root = t->a.peer;
    size_t bytes = t->a.count * t->esize;
    if (bytes == 0 || t->round > 0)
        return TCU_DONE;
    if (t->rank != root) {
        tcu_send(t, root, 0, t->a.sendbuf, bytes);
        return TCU_MORE;
    }
    unsigned char *out = t->a.recvbuf;
    for (int q = 0; q < n; q++)
        if (q != root)
            tcu_recv(t, q, 0, out + (size_t)q * bytes, bytes);
    if (!t->a.in_place) /* after posting: the copy overlaps the transfers */
        memcpy(out + (size_t)root * bytes, t->a.sendbuf, bytes);
    return TCU_MORE;
}

const tcu_algo_t tcu_gather_linear = {"linear", gather_step};

static int scatter_step(tcu_task_t *t)
{
    int n = t->size, root = t->a.peer;
    size_t bytes = t->a.count * t->esize;
    if (bytes == 0 || t->round > 0)
        return TCU_DONE;
    if (t->rank != root) {
        tcu_recv(t, root, 0, t->a.recvbuf, bytes);
        return TCU_MORE;
    }
    const unsigned char *in = t->a.sendbuf;
    for (int q = 1; q < n; q++) { /* start with the rank after the root, as every rank waits on its own */
        int to = (root + q) % n;
        tcu_send(t, to, 0, in + (size_t)to * bytes, bytes);
    }
    if (!t->a.in_place)
        memcpy(t->a.recvbuf, in + (size_t)root * bytes, bytes);
    return TCU_MORE;
}

const tcu_algo_t tcu_scatter_linear = {"linear", scatter_step};

/* ---- binomial ------------------------------------------------------------------------------------------------ */

/* The root sends to (scatter) or receives from (gather) each child v its subtree's blocks: real ranks start, start
 * + 1, ... for span blocks, a run of the root's buffer unless it wraps past rank n-1. At most one child's run wraps
 * (the children's runs tile virtual ranks [1, n)); it travels through scratch. */
static int run_wraps(const tcu_task_t *t, int v, int *start, int *span)
{
    *start = tcu_tree_real(v, t->a.peer, t->size);
    *span = tcu_tree_span(v, t->size);
    return *start + *span > t->size;
}

/* The bytes of a wrapped run before it wraps (real ranks start .. n-1). */
static size_t run_head(const tcu_task_t *t, int start)
{
    return (size_t)(t->size - start) * t->a.count * t->esize;
}

static int parent_of(const tcu_task_t *t, int v)
{
    return tcu_tree_real(tcu_tree_parent(v), t->a.peer, t->size);
}

/* The root, round 0: our block into place; every child's run straight into recvbuf, a wrapped one into scratch
 * (state[0] = that child's virtual rank, unpacked at round 1). */
static int gather_root(tcu_task_t *t)
{
    int n = t->size, root = t->a.peer, start, span;
    size_t b = t->a.count * t->esize;
    unsigned char *out = t->a.recvbuf;
    if (t->round > 0) {
        if (t->state[0]) {
            run_wraps(t, (int)t->state[0], &start, &span);
            size_t head = run_head(t, start);
            memcpy(out + (size_t)start * b, t->scratch, head);
            memcpy(out, t->scratch + head, (size_t)span * b - head);
        }
        return TCU_DONE;
    }
    for (int m = tcu_tree_top(0, n) >> 1; m > 0; m >>= 1) {
        unsigned char *into = out;
        if (run_wraps(t, m, &start, &span)) {
            if ((into = tcu_scratch(t, (size_t)span * b)) == NULL)
                return tcu_fail(t, TCOMMS_ERR_NO_MEMORY, "out of memory for %zu bytes of scratch", (size_t)span * b);
            t->state[0] = (size_t)m;
        } else {
            into += (size_t)start * b;
        }
        tcu_recv(t, tcu_tree_real(m, root, n), 0, into, (size_t)span * b);
    }
    if (!t->a.in_place)
        memcpy(out + (size_t)root * b, t->a.sendbuf, b);
    return TCU_MORE;
}

/* Other ranks: a leaf sends its block up at round 0; an inner rank gathers its own block and its children's runs
 * in scratch at round 0 (child v + m's run lands m blocks in) and sends the whole run up at round 1. */
static int gather_binomial_step(tcu_task_t *t)
{
    int n = t->size, v = tcu_tree_virt(t->rank, t->a.peer, n), span = tcu_tree_span(v, n), k = t->round;
    size_t b = t->a.count * t->esize;
    if (b == 0)
        return TCU_DONE;
    if (v == 0)
        return gather_root(t);
    if (k == 0 && span == 1)
        tcu_send(t, parent_of(t, v), 0, t->a.sendbuf, b);
    if (k == 0 && span > 1) {
        unsigned char *s = tcu_scratch(t, (size_t)span * b);
        if (s == NULL)
            return tcu_fail(t, TCOMMS_ERR_NO_MEMORY, "out of memory for %zu bytes of scratch", (size_t)span * b);
        for (int m = tcu_tree_top(v, n) >> 1; m > 0; m >>= 1)
            if (v + m < n)
                tcu_recv(t, tcu_tree_real(v + m, t->a.peer, n), 0, s + (size_t)m * b,
                         (size_t)tcu_tree_span(v + m, n) * b);
        memcpy(s, t->a.sendbuf, b);
    }
    if (k == 1 && span > 1)
        tcu_send(t, parent_of(t, v), 0, t->scratch, (size_t)span * b);
    return k == 0 || (k == 1 && span > 1) ? TCU_MORE : TCU_DONE;
}

const tcu_algo_t tcu_gather_binomial = {"binomial", gather_binomial_step};

/* The root, round 0: our block into place and every child's run sent from sendbuf (a wrapped one packed into
 * scratch first); largest subtree first, as it has the most forwarding ahead of it. */
static int scatter_root(tcu_task_t *t)
{
    int n = t->size, root = t->a.peer, start, span;
    size_t b = t->a.count * t->esize;
    const unsigned char *in = t->a.sendbuf;
    if (t->round > 0)
        return TCU_DONE;
    for (int m = tcu_tree_top(0, n) >> 1; m > 0; m >>= 1) {
        int wrapped = run_wraps(t, m, &start, &span);
        const unsigned char *from = in + (size_t)start * b;
        if (wrapped) {
            unsigned char *s = tcu_scratch(t, (size_t)span * b);
            if (s == NULL)
                return tcu_fail(t, TCOMMS_ERR_NO_MEMORY, "out of memory for %zu bytes of scratch", (size_t)span * b);
            size_t head = run_head(t, start);
            memcpy(s, in + (size_t)start * b, head);
            memcpy(s + head, in, (size_t)span * b - head);
            from = s;
        }
        tcu_send(t, tcu_tree_real(m, root, n), 0, from, (size_t)span * b);
    }
    if (!t->a.in_place)
        memcpy(t->a.recvbuf, in + (size_t)root * b, b);
    return TCU_MORE;
}

/* Other ranks: a leaf receives its block at round 0; an inner rank receives its run into scratch at round 0, then
 * keeps the first block and sends each child its part at round 1. */
static int scatter_binomial_step(tcu_task_t *t)
{
    int n = t->size, v = tcu_tree_virt(t->rank, t->a.peer, n), span = tcu_tree_span(v, n), k = t->round;
    size_t b = t->a.count * t->esize;
    if (b == 0)
        return TCU_DONE;
    if (v == 0)
        return scatter_root(t);
    if (k == 0 && span == 1)
        tcu_recv(t, parent_of(t, v), 0, t->a.recvbuf, b);
    if (k == 0 && span > 1) {
        unsigned char *s = tcu_scratch(t, (size_t)span * b);
        if (s == NULL)
            return tcu_fail(t, TCOMMS_ERR_NO_MEMORY, "out of memory for %zu bytes of scratch", (size_t)span * b);
        tcu_recv(t, parent_of(t, v), 0, s, (size_t)span * b);
    }
    if (k == 1 && span > 1) {
        for (int m = tcu_tree_top(v, n) >> 1; m > 0; m >>= 1)
            if (v + m < n)
                tcu_send(t, tcu_tree_real(v + m, t->a.peer, n), 0, t->scratch + (size_t)m * b,
                         (size_t)tcu_tree_span(v + m, n) * b);
        memcpy(t->a.recvbuf, t->scratch, b);
    }
    return k == 0 || (k == 1 && span > 1) ? TCU_MORE : TCU_DONE;
}

const tcu_algo_t tcu_scatter_binomial = {"binomial", scatter_binomial_step};
