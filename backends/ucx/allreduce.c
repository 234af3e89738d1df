/* SPDX-License-Identifier: BSD-3-Clause */
/* all_reduce and reduce algorithms. ring: a reduce-scatter then an all-gather around the ring, each n-1 steps
 * moving one of n near-equal blocks (tcu_block) to the right neighbour; bandwidth-optimal, 2(n-1) latencies.
 * recursive_doubling: log2(n) exchanges of the whole vector; fewest latencies, for small messages. rabenseifner: a
 * reduce-scatter by recursive halving then an all-gather by recursive doubling; bandwidth-optimal in 2 log2(n)
 * latencies. reduce's rabenseifner: the same reduce-scatter, then a binomial gather of the blocks to the root. The
 * last three fold non-powers of two (tcu_fold). Results build up in recvbuf; sendbuf is read where recvbuf has
 * nothing yet, so the out-of-place form needs no copy; incoming data lands in place where it can (landing()). */
#include "engine.h"

/* Slots: the fold's two messages, then one per exchange round (at most 2 * 18 with 2^18 ranks). */
enum { SLOT_FOLD = 0, SLOT_UNFOLD = 1, SLOT_ROUNDS = 2 };

/* Where a receive meant for acc[first, ...) lands, acc being where the result builds up (recvbuf, or scratch for
 * a reduce's non-root): when `fresh` (that range holds nothing yet) and acc is not the input (in place), straight
 * there, to be reduced in place with our own data; otherwise in scratch. Landing in place saves pulling a scratch
 * buffer through the cache, and the receive's writes bring in the lines the reduction writes (docs/perf.md,
 * "Measurements behind the code"). state[1] remembers the choice. */
static unsigned char *landing(tcu_task_t *t, unsigned char *acc, size_t first, int fresh)
{
    t->state[1] = fresh && acc != t->a.sendbuf;
    return t->state[1] ? tcu_at(acc, first, t->esize) : t->scratch;
}

/* acc[first, +len) = mine[first, +len) op what landed for it. */
static void reduce_landed(tcu_task_t *t, unsigned char *acc, const void *mine, size_t first, size_t len)
{
    unsigned char *dst = tcu_at(acc, first, t->esize);
    t->reduce(dst, tcu_at(mine, first, t->esize), t->state[1] ? dst : t->scratch, len);
}

/* Step k: k in [0, n-1) is reduce-scatter step k, k in [n-1, 2n-2) all-gather step k-(n-1). Rank r sends block
 * (r - k) and receives block (r - k - 1) in reduce-scatter step k, so after it r holds block (r + 1) reduced; the
 * all-gather then forwards the finished blocks: send (r + 1 - j), receive (r - j). Every block but r is received
 * and folded exactly once in the reduce-scatter (recvbuf = sendbuf op incoming), and block r is sent from sendbuf
 * at step 0 and arrives finished in the all-gather. */
static int ring_step(tcu_task_t *t)
{
    int n = t->size, r = t->rank, k = t->round, steps = 2 * (n - 1);
    size_t es = t->esize, first, len;
    unsigned char *buf = t->a.recvbuf;
    if (t->a.count == 0)
        return TCU_DONE;
    if (k == 0 && t->a.in_place) {
        tcu_block(t->a.count, n, 0, &first, &len); /* block 0 is the longest */
        if (tcu_scratch(t, len * es) == NULL)
            return TCOMMS_ERR_NO_MEMORY;
    } else if (k > 0 && k - 1 < n - 1) { /* fold in what reduce-scatter step k-1 brought */
        tcu_block(t->a.count, n, tcu_mod(r - k, n), &first, &len);
        reduce_landed(t, buf, t->a.sendbuf, first, len);
    }
    if (k == steps)
        return TCU_DONE;
    int right = (r + 1) % n, left = tcu_mod(r - 1, n);
    if (k < n - 1) {
        tcu_block(t->a.count, n, tcu_mod(r - k - 1, n), &first, &len);
        tcu_recv(t, left, (unsigned)k, landing(t, buf, first, 1), len * es);
        tcu_block(t->a.count, n, tcu_mod(r - k, n), &first, &len);
        tcu_send(t, right, (unsigned)k, tcu_at(k == 0 ? t->a.sendbuf : buf, first, es), len * es);
    } else {
        int j = k - (n - 1);
        tcu_block(t->a.count, n, tcu_mod(r - j, n), &first, &len);
        tcu_recv(t, left, (unsigned)k, tcu_at(buf, first, es), len * es);
        tcu_block(t->a.count, n, tcu_mod(r + 1 - j, n), &first, &len);
        tcu_send(t, right, (unsigned)k, tcu_at(buf, first, es), len * es);
    }
    return TCU_MORE;
}

const tcu_algo_t tcu_allreduce_ring = {"ring", ring_step};

/* An extra rank of the fold (v = -1): its input goes to r + 1, the result comes back from it. */
static int extra_step(tcu_task_t *t)
{
    size_t bytes = t->a.count * t->esize;
    if (t->round > 0)
        return TCU_DONE;
    tcu_recv(t, t->rank + 1, SLOT_UNFOLD, t->a.recvbuf, bytes);
    tcu_send(t, t->rank + 1, SLOT_FOLD, t->a.sendbuf, bytes);
    return TCU_MORE;
}

/* What this rank's result so far is: sendbuf until the first reduction wrote recvbuf (state[0]). */
static const void *partial(const tcu_task_t *t)
{
    return t->state[0] ? t->a.recvbuf : t->a.sendbuf;
}

/* Rounds: [fold: receive r - 1's input], exchange k = 0..log2p-1 with virtual v ^ 2^k, [unfold: send the result
 * to r - 1]. Every receive is reduced into recvbuf at the start of the next step. */
static int rd_step(tcu_task_t *t)
{
    size_t bytes = t->a.count * t->esize;
    tcu_fold_t f = tcu_fold(t->size, t->rank);
    if (bytes == 0)
        return TCU_DONE;
    if (f.v < 0)
        return extra_step(t);
    int folds = t->rank < 2 * f.rem, k = t->round - folds;
    if (t->round == 0 && (t->a.in_place || t->size > 2) && tcu_scratch(t, bytes) == NULL)
        return TCOMMS_ERR_NO_MEMORY;
    if (t->round > 0 && k <= f.log2p) {
        reduce_landed(t, t->a.recvbuf, partial(t), 0, t->a.count);
        t->state[0] = 1;
    }
    if (k < 0) {
        tcu_recv(t, t->rank - 1, SLOT_FOLD, landing(t, t->a.recvbuf, 0, 1), bytes);
        return TCU_MORE;
    }
    if (k < f.log2p) {
        int peer = tcu_fold_real(&f, f.v ^ (1 << k));
        /* send first: the message leaves before the time it takes to post the receive */
        tcu_send(t, peer, SLOT_ROUNDS + (unsigned)k, partial(t), bytes);
        tcu_recv(t, peer, SLOT_ROUNDS + (unsigned)k, landing(t, t->a.recvbuf, 0, !t->state[0]), bytes);
        return TCU_MORE;
    }
    if (folds && k == f.log2p) {
        tcu_send(t, t->rank - 1, SLOT_UNFOLD, t->a.recvbuf, bytes);
        return TCU_MORE;
    }
    return TCU_DONE;
}

const tcu_algo_t tcu_allreduce_recursive_doubling = {"recursive_doubling", rd_step};

/* First element of block b of p (tcu_block), b == p giving the end. */
static size_t block_start(size_t count, int p, int b)
{
    size_t first, len;
    if (b >= p)
        return count;
    tcu_block(count, p, b, &first, &len);
    return first;
}

/* Element range [*a, *b) of the blocks virtual rank v holds in exchange round j of rabenseifner: in the
 * reduce-scatter (j < log2p, distance p >> (j+1)) the window it keeps, whose blocks agree with v on every bit from
 * p/2 down to the distance; in the all-gather (distance 2^k, k = j - log2p) the aligned 2^k blocks it owns. */
static void rab_window(const tcu_fold_t *f, size_t count, int v, int j, size_t *a, size_t *b)
{
    int d = j < f->log2p ? f->p >> (j + 1) : 1 << (j - f->log2p);
    int lo = v & ~(d - 1);
    *a = block_start(count, f->p, lo);
    *b = block_start(count, f->p, lo + d);
}

static int rab_partner(const tcu_fold_t *f, int j)
{
    return f->v ^ (j < f->log2p ? f->p >> (j + 1) : 1 << (j - f->log2p));
}

/* Rounds: [fold], exchange j = 0..2 log2p - 1, [unfold]. Reduce-scatter rounds send the partner's window (from
 * our partial result), receive ours into scratch and reduce it; all-gather rounds swap owned windows straight into
 * place. Blocks are tcu_block's over p, so virtual rank v ends the reduce-scatter owning block v. */
static int rab_step(tcu_task_t *t)
{
    size_t es = t->esize, count = t->a.count, a, b, pa, pb;
    tcu_fold_t f = tcu_fold(t->size, t->rank);
    unsigned char *out = t->a.recvbuf;
    if (count == 0)
        return TCU_DONE;
    if (f.v < 0)
        return extra_step(t);
    int folds = t->rank < 2 * f.rem, j = t->round - folds;
    if (t->round == 0 && (t->a.in_place || t->size > 2) &&
        tcu_scratch(t, (folds ? count : block_start(count, f.p, f.p / 2)) * es) == NULL)
        return TCOMMS_ERR_NO_MEMORY;
    if (j == 0 && folds) { /* the fold's receive */
        reduce_landed(t, out, t->a.sendbuf, 0, count);
        t->state[0] = 1;
    } else if (j > 0 && j <= f.log2p) { /* reduce-scatter round j - 1's receive */
        rab_window(&f, count, f.v, j - 1, &a, &b);
        reduce_landed(t, out, partial(t), a, b - a);
        t->state[0] = 1;
    }
    if (j < 0) {
        tcu_recv(t, t->rank - 1, SLOT_FOLD, landing(t, t->a.recvbuf, 0, 1), count * es);
        return TCU_MORE;
    }
    if (j < 2 * f.log2p) {
        int partner = rab_partner(&f, j), peer = tcu_fold_real(&f, partner);
        unsigned slot = SLOT_ROUNDS + (unsigned)j;
        rab_window(&f, count, f.v, j, &a, &b);
        rab_window(&f, count, partner, j, &pa, &pb);
        if (j < f.log2p) {
            tcu_recv(t, peer, slot, landing(t, out, a, !t->state[0]), (b - a) * es);
            tcu_send(t, peer, slot, tcu_at(partial(t), pa, es), (pb - pa) * es);
        } else {
            tcu_recv(t, peer, slot, tcu_at(out, pa, es), (pb - pa) * es);
            tcu_send(t, peer, slot, tcu_at(out, a, es), (b - a) * es);
        }
        return TCU_MORE;
    }
    if (folds && j == 2 * f.log2p) {
        tcu_send(t, t->rank - 1, SLOT_UNFOLD, out, count * es);
        return TCU_MORE;
    }
    return TCU_DONE;
}

const tcu_algo_t tcu_allreduce_rabenseifner = {"rabenseifner", rab_step};

/* reduce, rabenseifner: rounds [fold], reduce-scatter j = 0..log2p-1 as in all_reduce, gather j = log2p..2 log2p-1,
 * [unfold]. In gather round k (distance 2^k) the ranks still holding blocks pair up by relative rank
 * rel = v ^ vroot: the one with bit k set sends its window (the aligned 2^k blocks it owns) and is done, the other
 * receives the partner's window next to its own. The root's virtual rank is vroot; a root that is an extra rank of
 * the fold gets the result from its partner (virtual rank root / 2) at the end. The result builds up in recvbuf on
 * the root and in scratch elsewhere (acc). Halves the root's work against binomial: each rank reduces 1/p of the
 * vector instead of the root reducing all of it. */
static int rab_reduce_step(tcu_task_t *t)
{
    int r = t->rank, root = t->a.peer;
    size_t es = t->esize, count = t->a.count, a, b, pa, pb;
    tcu_fold_t f = tcu_fold(t->size, r), fr = tcu_fold(t->size, root);
    int vroot = fr.v >= 0 ? fr.v : root / 2;
    if (count == 0)
        return TCU_DONE;
    if (f.v < 0) { /* an extra rank: input to r + 1; an extra root gets the result back */
        if (t->round > 0)
            return TCU_DONE;
        if (r == root)
            tcu_recv(t, r + 1, SLOT_UNFOLD, t->a.recvbuf, count * es);
        tcu_send(t, r + 1, SLOT_FOLD, t->a.sendbuf, count * es);
        return TCU_MORE;
    }
    int folds = r < 2 * f.rem, j = t->round - folds, rel = f.v ^ vroot;
    size_t tmp = (folds ? count : block_start(count, f.p, f.p / 2)) * es;
    if (t->round == 0 && tcu_scratch(t, tmp + (r == root ? 0 : count * es)) == NULL)
        return TCOMMS_ERR_NO_MEMORY;
    unsigned char *acc = r == root ? (unsigned char *)t->a.recvbuf : t->scratch + tmp;
    const unsigned char *mine = t->state[0] ? acc : (const unsigned char *)t->a.sendbuf;
    if (j == 0 && folds) { /* the fold's receive */
        reduce_landed(t, acc, t->a.sendbuf, 0, count);
        t->state[0] = 1;
    } else if (j > 0 && j <= f.log2p) { /* reduce-scatter round j - 1's receive */
        rab_window(&f, count, f.v, j - 1, &a, &b);
        reduce_landed(t, acc, mine, a, b - a);
        t->state[0] = 1;
    }
    mine = t->state[0] ? acc : (const unsigned char *)t->a.sendbuf;
    if (j < 0) {
        tcu_recv(t, r - 1, SLOT_FOLD, landing(t, acc, 0, 1), count * es);
        return TCU_MORE;
    }
    if (j >= f.log2p && (rel & ((1 << (j - f.log2p)) - 1)))
        return TCU_DONE; /* sent our window in an earlier gather round */
    if (j < 2 * f.log2p) {
        int partner = rab_partner(&f, j), peer = tcu_fold_real(&f, partner);
        unsigned slot = SLOT_ROUNDS + (unsigned)j;
        rab_window(&f, count, f.v, j, &a, &b);
        rab_window(&f, count, partner, j, &pa, &pb);
        if (j < f.log2p) {
            tcu_recv(t, peer, slot, landing(t, acc, a, !t->state[0]), (b - a) * es);
            tcu_send(t, peer, slot, mine + pa * es, (pb - pa) * es);
        } else if (rel & (1 << (j - f.log2p))) {
            tcu_send(t, peer, slot, acc + a * es, (b - a) * es);
        } else {
            tcu_recv(t, peer, slot, acc + pa * es, (pb - pa) * es);
        }
        return TCU_MORE;
    }
    if (j == 2 * f.log2p && r != root) { /* vroot standing in for an extra root */
        tcu_send(t, root, SLOT_UNFOLD, acc, count * es);
        return TCU_MORE;
    }
    return TCU_DONE;
}

const tcu_algo_t tcu_reduce_rabenseifner = {"rabenseifner", rab_reduce_step};
