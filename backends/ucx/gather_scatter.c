/* gather and scatter algorithms. linear: the root posts every receive (gather) or send (scatter) in one round and
 * copies its own block locally; every other rank posts one message. One latency, and the root's link carries
 * everything, which is the best one can do for the root's n-1 blocks anyway. */
#include <string.h>

#include "engine.h"

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
    if (!t->a.in_place)
        memcpy(out + (size_t)root * bytes, t->a.sendbuf, bytes);
    for (int q = 0; q < n; q++)
        if (q != root)
            tcu_recv(t, q, 0, out + (size_t)q * bytes, bytes);
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
    if (!t->a.in_place)
        memcpy(t->a.recvbuf, in + (size_t)root * bytes, bytes);
    for (int q = 1; q < n; q++) { /* start with the rank after the root, as every rank waits on its own */
        int to = (root + q) % n;
        tcu_send(t, to, 0, in + (size_t)to * bytes, bytes);
    }
    return TCU_MORE;
}

const tcu_algo_t tcu_scatter_linear = {"linear", scatter_step};
