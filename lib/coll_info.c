/* SPDX-License-Identifier: BSD-3-Clause */
/* The one description of each operation (see tcomms_coll_info_t in backend.h): the core's validation, call check and
 * trace read it, modules get it through tcomms_core_t, tools through tcomms_coll_info. Adding an operation means a
 * row here, its entry point and its validation in coll.c, and each backend's implementation. */
#include <tcomms/backend.h>

#define PER_RANK_OUT (TCOMMS_COLL_RECV_PER_RANK)
#define PER_RANK_IN (TCOMMS_COLL_SEND_PER_RANK)

static const tcomms_coll_info_t rows[TCOMMS_COLL_TYPE_COUNT] = {
    [TCOMMS_COLL_ALL_REDUCE] = {"all_reduce", "tcomms_all_reduce", TCOMMS_COLL_REDUCES | TCOMMS_COLL_IN_PLACE, 0},
    [TCOMMS_COLL_BROADCAST] = {"broadcast", "tcomms_broadcast", TCOMMS_COLL_ROOTED | TCOMMS_COLL_ONE_BUFFER, 0},
    [TCOMMS_COLL_REDUCE] = {"reduce", "tcomms_reduce",
                            TCOMMS_COLL_REDUCES | TCOMMS_COLL_ROOTED | TCOMMS_COLL_IN_PLACE, 0},
    [TCOMMS_COLL_ALL_GATHER] = {"all_gather", "tcomms_all_gather", TCOMMS_COLL_IN_PLACE | PER_RANK_OUT, 0},
    [TCOMMS_COLL_ALL_GATHER_V] = {"all_gather_v", "tcomms_all_gather_v", TCOMMS_COLL_IN_PLACE | PER_RANK_OUT, 1},
    [TCOMMS_COLL_REDUCE_SCATTER] = {"reduce_scatter", "tcomms_reduce_scatter",
                                    TCOMMS_COLL_REDUCES | TCOMMS_COLL_IN_PLACE | PER_RANK_IN, 0},
    [TCOMMS_COLL_REDUCE_SCATTER_V] = {"reduce_scatter_v", "tcomms_reduce_scatter_v",
                                      TCOMMS_COLL_REDUCES | TCOMMS_COLL_IN_PLACE | PER_RANK_IN, 1},
    [TCOMMS_COLL_ALL_TO_ALL] = {"all_to_all", "tcomms_all_to_all",
                                TCOMMS_COLL_IN_PLACE | PER_RANK_IN | PER_RANK_OUT, 0},
    [TCOMMS_COLL_ALL_TO_ALL_V] = {"all_to_all_v", "tcomms_all_to_all_v", PER_RANK_IN | PER_RANK_OUT, 2},
    [TCOMMS_COLL_GATHER] = {"gather", "tcomms_gather", TCOMMS_COLL_ROOTED | TCOMMS_COLL_IN_PLACE | PER_RANK_OUT, 0},
    [TCOMMS_COLL_SCATTER] = {"scatter", "tcomms_scatter", TCOMMS_COLL_ROOTED | TCOMMS_COLL_IN_PLACE | PER_RANK_IN, 0},
    [TCOMMS_COLL_BARRIER] = {"barrier", "tcomms_barrier", 0, 0},
    [TCOMMS_COLL_SEND] = {"send", "tcomms_send", TCOMMS_COLL_P2P, 0},
    [TCOMMS_COLL_RECV] = {"recv", "tcomms_recv", TCOMMS_COLL_P2P, 0},
};

const tcomms_coll_info_t *tcomms_coll_info(tcomms_coll_type_t type)
{
    return (unsigned)type < TCOMMS_COLL_TYPE_COUNT ? &rows[type] : NULL;
}
