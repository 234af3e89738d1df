/* SPDX-License-Identifier: BSD-3-Clause */
/* A collective's shape: 8 bits of its tag that every rank making the same call computes alike, so that ranks that
 * disagree about the type, dtype, op or root of a collective whose message sizes happen to match post messages the
 * other side never takes (docs/ucx.md, "Ranks that disagree"). The message length already tells counts apart. */
#include <stdio.h>

#include "ucx.h"

/* The code is exact, not a hash, where a disagreement would otherwise move data silently:
 *   0-159    the four reducing collectives: 40 * kind + 5 * dtype + op (every dtype and op told apart);
 *   160-246  broadcast, gather, scatter: 160 + 29 * kind + root % 29;
 *   247-251  all_gather, all_gather_v, all_to_all, all_to_all_v, barrier.
 * A reduce's root needs no bits: ranks with another root wait for other senders. */
#define REDUCING 4
#define ROOTED 3
#define ROOT_CLASSES 29
#define ROOTED_BASE (REDUCING * TCOMMS_DTYPE_COUNT * TCOMMS_OP_COUNT)
#define OTHER_BASE (ROOTED_BASE + ROOTED * ROOT_CLASSES)

_Static_assert(TCOMMS_DTYPE_COUNT <= 8 && TCOMMS_OP_COUNT <= 5, "new dtypes or ops: the shape code needs new room");

static const tcomms_coll_type_t reducing[REDUCING] = {TCOMMS_COLL_ALL_REDUCE, TCOMMS_COLL_REDUCE_SCATTER,
                                                      TCOMMS_COLL_REDUCE_SCATTER_V, TCOMMS_COLL_REDUCE};
static const tcomms_coll_type_t rooted[ROOTED] = {TCOMMS_COLL_BROADCAST, TCOMMS_COLL_GATHER, TCOMMS_COLL_SCATTER};
static const tcomms_coll_type_t other[] = {TCOMMS_COLL_ALL_GATHER, TCOMMS_COLL_ALL_GATHER_V, TCOMMS_COLL_ALL_TO_ALL,
                                           TCOMMS_COLL_ALL_TO_ALL_V, TCOMMS_COLL_BARRIER};
#define NOTHER ((int)(sizeof(other) / sizeof(other[0])))

_Static_assert(OTHER_BASE + NOTHER <= 256, "the shape code is 8 bits");

static int index_of(const tcomms_coll_type_t *list, int n, tcomms_coll_type_t type)
{
    for (int i = 0; i < n; i++)
        if (list[i] == type)
            return i;
    return -1;
}

int tcu_shape_rooted(tcomms_coll_type_t type)
{
    return type == TCOMMS_COLL_REDUCE || index_of(rooted, ROOTED, type) >= 0;
}

unsigned tcu_shape(const tcomms_coll_args_t *a)
{
    int i = index_of(reducing, REDUCING, a->type);
    if (i >= 0)
        return (unsigned)((i * TCOMMS_DTYPE_COUNT + (int)a->dtype) * TCOMMS_OP_COUNT + (int)a->op);
    if ((i = index_of(rooted, ROOTED, a->type)) >= 0)
        return (unsigned)(ROOTED_BASE + i * ROOT_CLASSES + a->peer % ROOT_CLASSES);
    i = index_of(other, NOTHER, a->type);
    return (unsigned)(OTHER_BASE + (i >= 0 ? i : NOTHER)); /* send and recv have no shape: never reached */
}

void tcu_shape_describe(const tcomms_core_t *core, unsigned shape, int size, char *buf, size_t len)
{
    if (shape < ROOTED_BASE) {
        int op = (int)shape % TCOMMS_OP_COUNT, dtype = (int)shape / TCOMMS_OP_COUNT % TCOMMS_DTYPE_COUNT;
        snprintf(buf, len, "%s (%s, %s)", tcu_coll_name(reducing[shape / (TCOMMS_OP_COUNT * TCOMMS_DTYPE_COUNT)]),
                 core->dtype_name((tcomms_dtype_t)dtype), core->op_name((tcomms_op_t)op));
    } else if (shape < OTHER_BASE) {
        unsigned k = (shape - ROOTED_BASE) / ROOT_CLASSES, root = (shape - ROOTED_BASE) % ROOT_CLASSES;
        if (size <= ROOT_CLASSES)
            snprintf(buf, len, "%s (root %u)", tcu_coll_name(rooted[k]), root);
        else
            snprintf(buf, len, "%s (a root of %u modulo %d)", tcu_coll_name(rooted[k]), root, ROOT_CLASSES);
    } else if (shape < OTHER_BASE + NOTHER) {
        snprintf(buf, len, "%s", tcu_coll_name(other[shape - OTHER_BASE]));
    } else {
        snprintf(buf, len, "an unknown operation (shape %u)", shape);
    }
}
