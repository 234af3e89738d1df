/* all_reduce algorithms. ring: a reduce-scatter then an all-gather around the ring, each n-1 steps moving one of n
 * near-equal blocks (tcu_block) to the right neighbour; bandwidth-optimal, 2(n-1) latencies. Results build up in
 * recvbuf, with one block of scratch for the incoming data; sendbuf is read where recvbuf has nothing yet, so the
 * out-of-place form needs no copy. */
#include "engine.h"

/* Step k: k in [0, n-1) is reduce-scatter step k, k in [n-1, 2n-2) all-gather step k-(n-1). Rank r sends block
 * (r - k) and receives block (r - k - 1) in reduce-scatter step k, so after it r holds block (r + 1) reduced; the
 * all-gather then forwards the finished blocks: send (r + 1 - j), receive (r - j). Every block but r is received
 * and folded exactly once in the reduce-scatter (recvbuf = sendbuf op incoming), and block r is sent from sendbuf
 * at step 0 and arrives finished in the all-gather. */
static int ring_step(tcu_task_t *t)
{
    int n = t->size, r = t->rank, k = t->round, steps = 2 * (n - 1);
    size_t es = t->esize, first, len;
    unsigned char *buf = t->a.recvbuf, *tmp;
    if (t->a.count == 0)
        return TCU_DONE;
    if (k == 0) {
        tcu_block(t->a.count, n, 0, &first, &len); /* block 0 is the longest */
        if ((tmp = tcu_scratch(t, len * es)) == NULL)
            return TCOMMS_ERR_NO_MEMORY;
    } else if (k - 1 < n - 1) { /* fold in what reduce-scatter step k-1 brought */
        tcu_block(t->a.count, n, tcu_mod(r - k, n), &first, &len);
        t->reduce(tcu_at(buf, first, es), tcu_at(t->a.sendbuf, first, es), t->scratch, len);
    }
    if (k == steps)
        return TCU_DONE;
    int right = (r + 1) % n, left = tcu_mod(r - 1, n);
    if (k < n - 1) {
        tcu_block(t->a.count, n, tcu_mod(r - k, n), &first, &len);
        tcu_send(t, right, (unsigned)k, tcu_at(k == 0 ? t->a.sendbuf : buf, first, es), len * es);
        tcu_block(t->a.count, n, tcu_mod(r - k - 1, n), &first, &len);
        tcu_recv(t, left, (unsigned)k, t->scratch, len * es);
    } else {
        int j = k - (n - 1);
        tcu_block(t->a.count, n, tcu_mod(r + 1 - j, n), &first, &len);
        tcu_send(t, right, (unsigned)k, tcu_at(buf, first, es), len * es);
        tcu_block(t->a.count, n, tcu_mod(r - j, n), &first, &len);
        tcu_recv(t, left, (unsigned)k, tcu_at(buf, first, es), len * es);
    }
    return TCU_MORE;
}

const tcu_algo_t tcu_allreduce_ring = {"ring", ring_step};
