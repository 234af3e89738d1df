/* all_gather and all_gather_v algorithms. ring: n-1 steps; in step j rank r forwards block (r - j) to its right
 * neighbour and receives block (r - j - 1) from its left one straight into place, so displacements with gaps or in
 * any order cost nothing. Blocks are tcu_vcount/tcu_vdispl, so one step function serves both operations. */
#include <string.h>

#include "engine.h"

static int ring_step(tcu_task_t *t)
{
    int n = t->size, r = t->rank, j = t->round;
    size_t es = t->esize;
    unsigned char *buf = t->a.recvbuf;
    if (t->a.type == TCOMMS_COLL_ALL_GATHER && t->a.count == 0)
        return TCU_DONE;
    if (j == 0) {
        unsigned char *own = tcu_at(buf, tcu_vdispl(t, 0, r), es);
        size_t mine = tcu_vcount(t, 0, r);
        if (mine && (const void *)own != t->a.sendbuf)
            memcpy(own, t->a.sendbuf, mine * es);
    }
    if (j == n - 1)
        return TCU_DONE;
    int out = tcu_mod(r - j, n), in = tcu_mod(r - j - 1, n);
    tcu_send(t, (r + 1) % n, (unsigned)j, tcu_at(buf, tcu_vdispl(t, 0, out), es), tcu_vcount(t, 0, out) * es);
    tcu_recv(t, tcu_mod(r - 1, n), (unsigned)j, tcu_at(buf, tcu_vdispl(t, 0, in), es), tcu_vcount(t, 0, in) * es);
    return TCU_MORE;
}

const tcu_algo_t tcu_allgather_ring = {"ring", ring_step};
