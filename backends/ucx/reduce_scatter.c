/* reduce_scatter and reduce_scatter_v algorithms. ring: n-1 steps; a partial sum travels right around the ring
 * collecting each rank's contribution and ends at the rank owning its block. In step s rank r sends the partial
 * block (r - s - 1) (its own input at s = 0) and receives block (r - s - 2), into which it folds its input; the last
 * step's block is r itself and lands in recvbuf. Two scratch blocks alternate, so the input is never written. */
#include "engine.h"

static int ring_step(tcu_task_t *t)
{
    int n = t->size, r = t->rank, s = t->round;
    size_t es = t->esize, maxlen = 0;
    const unsigned char *in = t->a.sendbuf;
    if (t->a.type == TCOMMS_COLL_REDUCE_SCATTER && t->a.count == 0)
        return TCU_DONE;
    if (s == 0) {
        for (int b = 0; b < n; b++)
            if (tcu_vcount(t, 0, b) > maxlen)
                maxlen = tcu_vcount(t, 0, b);
        if (tcu_scratch(t, 2 * (maxlen ? maxlen : 1) * es) == NULL)
            return TCOMMS_ERR_NO_MEMORY;
        t->state[0] = maxlen * es; /* offset of the second scratch block */
    }
    unsigned char *tmp[2] = {t->scratch, t->scratch + t->state[0]};
    if (s > 0) { /* fold our input into the block step s-1 brought */
        int b = tcu_mod(r - s - 1, n);
        unsigned char *acc = s == n - 1 ? (unsigned char *)t->a.recvbuf : tmp[(s - 1) % 2];
        t->reduce(acc, tmp[(s - 1) % 2], tcu_at(in, tcu_vdispl(t, 0, b), es), tcu_vcount(t, 0, b));
    }
    if (s == n - 1)
        return TCU_DONE;
    int out = tcu_mod(r - s - 1, n), next = tcu_mod(r - s - 2, n);
    const unsigned char *src = s == 0 ? tcu_at(in, tcu_vdispl(t, 0, out), es) : tmp[(s - 1) % 2];
    tcu_send(t, (r + 1) % n, (unsigned)s, src, tcu_vcount(t, 0, out) * es);
    tcu_recv(t, tcu_mod(r - 1, n), (unsigned)s, tmp[s % 2], tcu_vcount(t, 0, next) * es);
    return TCU_MORE;
}

const tcu_algo_t tcu_reduce_scatter_ring = {"ring", ring_step};
