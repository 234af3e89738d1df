/* all_to_all and all_to_all_v algorithms. pairwise: n-1 steps; in step s rank r sends its block for (r + s) and
 * receives the block of (r - s), so each step is one exchange per rank and no rank is flooded. In place (all_to_all
 * only) the input is first copied to scratch, since receives overwrite blocks still to be sent. */
#include <string.h>

#include "engine.h"

static int pairwise_step(tcu_task_t *t)
{
    int n = t->size, r = t->rank, s = t->round + 1;
    size_t es = t->esize;
    const unsigned char *src = t->a.sendbuf;
    if (t->a.type == TCOMMS_COLL_ALL_TO_ALL && t->a.count == 0)
        return TCU_DONE;
    if (t->round == 0) {
        if (t->a.in_place) { /* our own block is already in place */
            size_t all = (size_t)n * t->a.count * es;
            unsigned char *copy = tcu_scratch(t, all);
            if (copy == NULL)
                return TCOMMS_ERR_NO_MEMORY;
            memcpy(copy, src, all);
        } else if (tcu_vcount(t, 1, r)) {
            memcpy(tcu_at(t->a.recvbuf, tcu_vdispl(t, 0, r), es), tcu_at(src, tcu_vdispl(t, 1, r), es),
                   tcu_vcount(t, 1, r) * es);
        }
    }
    if (s == n)
        return TCU_DONE;
    if (t->a.in_place)
        src = t->scratch;
    int to = (r + s) % n, from = tcu_mod(r - s, n);
    tcu_send(t, to, 0, tcu_at(src, tcu_vdispl(t, 1, to), es), tcu_vcount(t, 1, to) * es);
    tcu_recv(t, from, 0, tcu_at(t->a.recvbuf, tcu_vdispl(t, 0, from), es), tcu_vcount(t, 0, from) * es);
    return TCU_MORE;
}

const tcu_algo_t tcu_alltoall_pairwise = {"pairwise", pairwise_step};
