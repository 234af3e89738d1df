/* SPDX-License-Identifier: BSD-3-Clause */
/* reduce_scatter and reduce_scatter_v algorithms. ring: n-1 steps; a partial sum travels right around the ring
 * collecting each rank's contribution and ends at the rank owning its block. In step s rank r sends the partial
 * block (r - s - 1) (its own input at s = 0) and receives block (r - s - 2), into which it folds its input; the last
 * step's block is r itself and lands in recvbuf. Two scratch blocks alternate, so the input is never written.
 * recursive_halving (reduce_scatter only): log2(n) rounds, each sending half of what is left to the partner at
 * distance p/2, p/4, ..., 1; non-powers of two are folded (tcu_fold). */
#include "engine.h"

/* The last receive (block r itself, at step n-2) lands straight in recvbuf out of place, and the final reduction
 * runs there in place: on 2 ranks no scratch at all. */
static int ring_step(tcu_task_t *t)
{
    int n = t->size, r = t->rank, s = t->round;
    size_t es = t->esize, maxlen = 0;
    const unsigned char *in = t->a.sendbuf;
    unsigned char *out = t->a.recvbuf;
    if (t->a.type == TCOMMS_COLL_REDUCE_SCATTER && t->a.count == 0)
        return TCU_DONE;
    if (s == 0 && (n > 2 || t->a.in_place)) {
        for (int b = 0; b < n; b++)
            if (tcu_vcount(t, 0, b) > maxlen)
                maxlen = tcu_vcount(t, 0, b);
        if (tcu_scratch(t, 2 * (maxlen ? maxlen : 1) * es) == NULL)
            return TCOMMS_ERR_NO_MEMORY;
        t->state[0] = maxlen * es; /* offset of the second scratch block */
    }
    unsigned char *tmp[2] = {t->scratch, t->scratch + t->state[0]};
    if (s == n - 1 && !t->a.in_place)
        tmp[(s - 1) % 2] = out;
    if (s > 0) { /* fold our input into the block step s-1 brought */
        int b = tcu_mod(r - s - 1, n);
        unsigned char *acc = s == n - 1 ? out : tmp[(s - 1) % 2];
        t->reduce(acc, tmp[(s - 1) % 2], tcu_at(in, tcu_vdispl(t, 0, b), es), tcu_vcount(t, 0, b));
    }
    if (s == n - 1)
        return TCU_DONE;
    int send = tcu_mod(r - s - 1, n), next = tcu_mod(r - s - 2, n);
    const unsigned char *src = s == 0 ? tcu_at(in, tcu_vdispl(t, 0, send), es) : tmp[(s - 1) % 2];
    unsigned char *dst = s == n - 2 && !t->a.in_place ? out : tmp[s % 2];
    /* send first: our message, which the right neighbour waits for, leaves before the time it takes to post the
     * receive (which UCX matches only when this worker next progresses, whichever comes first) */
    tcu_send(t, (r + 1) % n, (unsigned)s, src, tcu_vcount(t, 0, send) * es);
    tcu_recv(t, tcu_mod(r - 1, n), (unsigned)s, dst, tcu_vcount(t, 0, next) * es);
    return TCU_MORE;
}

const tcu_algo_t tcu_reduce_scatter_ring = {"ring", ring_step};

/* Slots of recursive halving: the fold's two messages, then one per round. */
enum { SLOT_FOLD = 0, SLOT_UNFOLD = 1, SLOT_ROUNDS = 2 };

/* First real block owned by virtual rank v (v = p: the end): a folded virtual rank owns its pair's two blocks. */
static int first_block(const tcu_fold_t *f, int v)
{
    return v < f->rem ? 2 * v : v + f->rem;
}

/* Elements [*a, *b) of the blocks virtual rank v keeps after round k (distance p >> (k+1)). */
static void rh_window(const tcu_fold_t *f, size_t count, int v, int k, size_t *a, size_t *b)
{
    int d = f->p >> (k + 1), lo = v & ~(d - 1);
    *a = (size_t)first_block(f, lo) * count;
    *b = (size_t)first_block(f, lo + d) * count;
}

/* Scratch: acc (the partial sums, indexed like the input; n * count elements) then tmp (the receive buffer: the
 * whole input for a folding rank, else the larger half). Rounds: [fold: receive r - 1's input, acc = in + it],
 * halving k = 0..log2p-1, [unfold: send block r - 1 to r - 1]. The last round's reduction writes block r straight
 * into recvbuf (in place that is the input's own block, read in the same reduction only). state[0]: acc holds the
 * partial sums (else the input does). */
static int rh_step(tcu_task_t *t)
{
    int r = t->rank, n = t->size;
    size_t es = t->esize, count = t->a.count, total = (size_t)n * count, a, b, pa, pb;
    tcu_fold_t f = tcu_fold(n, r);
    if (count == 0)
        return TCU_DONE;
    if (f.v < 0) {
        if (t->round > 0)
            return TCU_DONE;
        tcu_recv(t, r + 1, SLOT_UNFOLD, t->a.recvbuf, count * es);
        tcu_send(t, r + 1, SLOT_FOLD, t->a.sendbuf, total * es);
        return TCU_MORE;
    }
    int folds = r < 2 * f.rem, k = t->round - folds;
    if (t->round == 0 && tcu_scratch(t, 2 * total * es) == NULL)
        return TCOMMS_ERR_NO_MEMORY;
    unsigned char *acc = t->scratch, *tmp = t->scratch + total * es;
    const unsigned char *cur = t->state[0] ? acc : (const unsigned char *)t->a.sendbuf;
    if (k == 0 && folds) {
        t->reduce(acc, t->a.sendbuf, tmp, total);
        t->state[0] = 1;
        cur = acc;
    } else if (k > 0 && k <= f.log2p) { /* reduce round k - 1's receive; the last one partly into recvbuf */
        rh_window(&f, count, f.v, k - 1, &a, &b);
        size_t mine = (size_t)r * count;
        if (k < f.log2p || mine < a || mine >= b) {
            t->reduce(acc + a * es, cur + a * es, tmp, b - a);
        } else {
            if (mine > a)
                t->reduce(acc + a * es, cur + a * es, tmp, mine - a);
            t->reduce(t->a.recvbuf, cur + mine * es, tmp + (mine - a) * es, count);
            if (mine + count < b)
                t->reduce(acc + (mine + count) * es, cur + (mine + count) * es, tmp + (mine + count - a) * es,
                          b - mine - count);
        }
        t->state[0] = 1;
        cur = acc;
    }
    if (k < 0) {
        tcu_recv(t, r - 1, SLOT_FOLD, tmp, total * es);
        return TCU_MORE;
    }
    if (k < f.log2p) {
        int partner = f.v ^ (f.p >> (k + 1));
        rh_window(&f, count, f.v, k, &a, &b);
        rh_window(&f, count, partner, k, &pa, &pb);
        tcu_recv(t, tcu_fold_real(&f, partner), SLOT_ROUNDS + (unsigned)k, tmp, (b - a) * es);
        tcu_send(t, tcu_fold_real(&f, partner), SLOT_ROUNDS + (unsigned)k, cur + pa * es, (pb - pa) * es);
        return TCU_MORE;
    }
    if (folds && k == f.log2p) {
        tcu_send(t, r - 1, SLOT_UNFOLD, acc + (size_t)(r - 1) * count * es, count * es);
        return TCU_MORE;
    }
    return TCU_DONE;
}

const tcu_algo_t tcu_reduce_scatter_recursive_halving = {"recursive_halving", rh_step};
