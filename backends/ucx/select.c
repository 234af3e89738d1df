/* SPDX-License-Identifier: BSD-3-Clause */
/* Which algorithm runs an operation: TCOMMS_UCX_<COLL>_ALGO=name forces one (read when a communicator is created),
 * otherwise the operation's rule table picks by rank count and message size, first matching row first. Adding an
 * algorithm: declare it below, list it in its operation's `all` array and give it a row in `rules`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ucx.h"

/* The catalogue: one file per family defines these. */
extern const tcu_algo_t tcu_allreduce_ring;
extern const tcu_algo_t tcu_allreduce_recursive_doubling;
extern const tcu_algo_t tcu_allreduce_rabenseifner;
extern const tcu_algo_t tcu_reduce_rabenseifner;
extern const tcu_algo_t tcu_allgather_ring;       /* all_gather and all_gather_v */
extern const tcu_algo_t tcu_allgather_linear;     /* all_gather and all_gather_v */
extern const tcu_algo_t tcu_allgather_bruck;      /* all_gather and all_gather_v */
extern const tcu_algo_t tcu_allgather_recursive_doubling; /* all_gather(_v); bruck unless a power of two */
extern const tcu_algo_t tcu_reduce_scatter_ring;  /* reduce_scatter and reduce_scatter_v */
extern const tcu_algo_t tcu_reduce_scatter_recursive_halving;
extern const tcu_algo_t tcu_bcast_binomial;
extern const tcu_algo_t tcu_bcast_scatter_allgather;
extern const tcu_algo_t tcu_reduce_binomial;
extern const tcu_algo_t tcu_alltoall_pairwise;    /* all_to_all and all_to_all_v */
extern const tcu_algo_t tcu_alltoall_linear;      /* all_to_all and all_to_all_v */
extern const tcu_algo_t tcu_gather_linear;
extern const tcu_algo_t tcu_gather_binomial;
extern const tcu_algo_t tcu_scatter_linear;
extern const tcu_algo_t tcu_scatter_binomial;
extern const tcu_algo_t tcu_barrier_dissemination;

/* A row of a rule table: the algorithm runs when min_ranks <= size (0: any) and the message is below max_bytes
 * (0: no limit). Message size: this rank's count * element size (count per rank for gathers and reduce_scatter,
 * per peer for all_to_all; the mean over ranks for v-variants). The last row must match everything. */
typedef struct tcu_rule {
    const tcu_algo_t *algo;
    int min_ranks;
    size_t max_bytes;
} tcu_rule_t;

typedef struct tcu_choice {
    const char *env;                /* the override variable */
    const tcu_algo_t *const *all;   /* NULL-terminated: every algorithm that runs this operation */
    const tcu_rule_t *rules;
} tcu_choice_t;

#define ALGOS(...) ((const tcu_algo_t *const[]){__VA_ARGS__, NULL})
#define RULES(...) ((const tcu_rule_t[]){__VA_ARGS__})
#define ANY(algo) {&(algo), 0, 0}

static const tcu_choice_t choices[TCOMMS_COLL_TYPE_COUNT] = {
    [TCOMMS_COLL_ALL_REDUCE] = {"TCOMMS_UCX_ALLREDUCE_ALGO",
                                ALGOS(&tcu_allreduce_ring, &tcu_allreduce_recursive_doubling,
                                      &tcu_allreduce_rabenseifner),
                                RULES({&tcu_allreduce_recursive_doubling, 0, 8192}, ANY(tcu_allreduce_ring))},
    [TCOMMS_COLL_BROADCAST] = {"TCOMMS_UCX_BROADCAST_ALGO", ALGOS(&tcu_bcast_binomial, &tcu_bcast_scatter_allgather),
                               RULES(ANY(tcu_bcast_binomial))},
    [TCOMMS_COLL_REDUCE] = {"TCOMMS_UCX_REDUCE_ALGO", ALGOS(&tcu_reduce_binomial, &tcu_reduce_rabenseifner),
                            RULES({&tcu_reduce_binomial, 0, 1u << 20}, ANY(tcu_reduce_rabenseifner))},
    [TCOMMS_COLL_ALL_GATHER] = {"TCOMMS_UCX_ALLGATHER_ALGO",
                                ALGOS(&tcu_allgather_ring, &tcu_allgather_linear, &tcu_allgather_recursive_doubling,
                                      &tcu_allgather_bruck),
                                RULES({&tcu_allgather_recursive_doubling, 5, 1024}, {&tcu_allgather_ring, 5, 0},
                                      {&tcu_allgather_linear, 0, 16384}, {&tcu_allgather_ring, 0, 131072},
                                      ANY(tcu_allgather_linear))},
    [TCOMMS_COLL_ALL_GATHER_V] = {"TCOMMS_UCX_ALLGATHERV_ALGO",
                                  ALGOS(&tcu_allgather_ring, &tcu_allgather_linear, &tcu_allgather_recursive_doubling,
                                        &tcu_allgather_bruck),
                                  RULES({&tcu_allgather_recursive_doubling, 5, 1024}, {&tcu_allgather_ring, 5, 0},
                                        {&tcu_allgather_linear, 0, 16384}, {&tcu_allgather_ring, 0, 131072},
                                        ANY(tcu_allgather_linear))},
    [TCOMMS_COLL_REDUCE_SCATTER] = {"TCOMMS_UCX_REDUCESCATTER_ALGO",
                                    ALGOS(&tcu_reduce_scatter_ring, &tcu_reduce_scatter_recursive_halving),
                                    RULES({&tcu_reduce_scatter_recursive_halving, 3, 4096},
                                          ANY(tcu_reduce_scatter_ring))},
    [TCOMMS_COLL_REDUCE_SCATTER_V] = {"TCOMMS_UCX_REDUCESCATTERV_ALGO", ALGOS(&tcu_reduce_scatter_ring),
                                      RULES(ANY(tcu_reduce_scatter_ring))},
    [TCOMMS_COLL_ALL_TO_ALL] = {"TCOMMS_UCX_ALLTOALL_ALGO", ALGOS(&tcu_alltoall_pairwise, &tcu_alltoall_linear),
                                RULES({&tcu_alltoall_linear, 0, 32768}, {&tcu_alltoall_pairwise, 5, 0},
                                      ANY(tcu_alltoall_linear))},
    [TCOMMS_COLL_ALL_TO_ALL_V] = {"TCOMMS_UCX_ALLTOALLV_ALGO", ALGOS(&tcu_alltoall_pairwise, &tcu_alltoall_linear),
                                  RULES({&tcu_alltoall_linear, 0, 32768}, {&tcu_alltoall_pairwise, 5, 0},
                                        ANY(tcu_alltoall_linear))},
    [TCOMMS_COLL_GATHER] = {"TCOMMS_UCX_GATHER_ALGO", ALGOS(&tcu_gather_linear, &tcu_gather_binomial),
                            RULES({&tcu_gather_binomial, 5, 1024}, ANY(tcu_gather_linear))},
    [TCOMMS_COLL_SCATTER] = {"TCOMMS_UCX_SCATTER_ALGO", ALGOS(&tcu_scatter_linear, &tcu_scatter_binomial),
                             RULES(ANY(tcu_scatter_linear))},
    [TCOMMS_COLL_BARRIER] = {"TCOMMS_UCX_BARRIER_ALGO", ALGOS(&tcu_barrier_dissemination),
                             RULES(ANY(tcu_barrier_dissemination))},
};

/* One debug line naming what the variables forced, so that a run (and tests/test_ucx_algo) can tell a forced
 * algorithm from a misspelt variable, which is silently "auto". */
static void log_forced(const tcu_comm_t *c)
{
    char line[512] = "";
    size_t at = 0;
    for (int type = 0; type < TCU_COLL_TYPES && at < sizeof(line); type++) {
        if (c->forced[type] == NULL)
            continue;
        int n = snprintf(line + at, sizeof(line) - at, " %s=%s", tcu_coll_name((tcomms_coll_type_t)type),
                         c->forced[type]->name);
        at += n > 0 ? (size_t)n : 0;
    }
    if (at > 0)
        c->core->log(TCOMMS_LOG_DEBUG, "ucx", "'%s': forced algorithms:%s", c->name, line);
}

tcomms_status_t tcu_select_init(tcu_comm_t *c)
{
    for (int type = 0; type < TCU_COLL_TYPES; type++) {
        const tcu_choice_t *ch = &choices[type];
        c->forced[type] = NULL;
        const char *v = ch->env ? getenv(ch->env) : NULL;
        if (v == NULL || *v == '\0' || strcmp(v, "auto") == 0)
            continue;
        for (const tcu_algo_t *const *a = ch->all; *a && !c->forced[type]; a++)
            if (strcmp((*a)->name, v) == 0)
                c->forced[type] = *a;
        if (c->forced[type])
            continue;
        char known[256] = "";
        size_t at = 0;
        for (const tcu_algo_t *const *a = ch->all; *a && at < sizeof(known); a++) {
            int n = snprintf(known + at, sizeof(known) - at, "%s, ", (*a)->name);
            at += n > 0 ? (size_t)n : 0;
        }
        return c->core->error(TCOMMS_ERR_BAD_ENV, "%s='%s': unknown algorithm for %s (known: %sauto)", ch->env, v,
                              tcu_coll_name((tcomms_coll_type_t)type), known);
    }
    log_forced(c);
    return TCOMMS_SUCCESS;
}

static size_t message_bytes(const tcu_comm_t *c, const tcomms_coll_args_t *a, size_t esize)
{
    int arrays = tcu_coll_info(a->type)->count_arrays;
    const size_t *counts = arrays == 2 ? a->sendcounts : a->recvcounts;
    if (arrays == 0)
        return a->count * esize;
    size_t total = 0;
    for (int r = 0; r < c->size; r++)
        total += counts[r];
    return total / (size_t)c->size * esize;
}

const tcu_algo_t *tcu_select(const tcu_comm_t *c, const tcomms_coll_args_t *a, size_t esize)
{
    if (c->forced[a->type])
        return c->forced[a->type];
    size_t bytes = message_bytes(c, a, esize);
    const tcu_rule_t *r = choices[a->type].rules;
    while (!((r->min_ranks == 0 || c->size >= r->min_ranks) && (r->max_bytes == 0 || bytes < r->max_bytes)))
        r++;
    return r->algo;
}
