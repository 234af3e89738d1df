/* SPDX-License-Identifier: BSD-3-Clause */
/* barrier algorithms. dissemination: ceil(log2 n) rounds; in round k rank r signals r + 2^k and waits for r - 2^k,
 * so after the last round every rank has heard, directly or through others, from every rank. Empty messages. */
#include "engine.h"

static int dissemination_step(tcu_task_t *t)
{
    int n = t->size, k = t->round;
    if (k >= 31 || (1 << k) >= n)
        return TCU_DONE;
    int d = 1 << k;
    tcu_send(t, (t->rank + d) % n, (unsigned)k, NULL, 0);
    tcu_recv(t, tcu_mod(t->rank - d, n), (unsigned)k, NULL, 0);
    return TCU_MORE;
}

const tcu_algo_t tcu_barrier_dissemination = {"dissemination", dissemination_step};
