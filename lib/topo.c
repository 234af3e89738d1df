/* SPDX-License-Identifier: BSD-3-Clause */
/* Node-local ranks from the rendezvous: every rank of a root publishes its host id through the store, and the
 * ranks sharing one are that host's. Launchers name the local rank and size each their own way, or not at all
 * (mpirun -x, a plain ssh loop), so their variables only serve as a cross-check. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "error.h"
#include "log.h"
#include "store/store.h"
#include "topo.h"

#define HOST_ID_MAX 256

void tc_topo_host_id(char *buf, size_t len)
{
    const char *forced = getenv("TCOMMS_HOST_ID");
    if (forced != NULL && *forced != '\0') {
        snprintf(buf, len, "%s", forced);
        return;
    }
    char name[128] = "";
    if (gethostname(name, sizeof(name) - 1) != 0)
        snprintf(name, sizeof(name), "?");
    /* Two machines may share a name (clones, containers left at "localhost"); they never share a boot id. */
    char boot[64] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f != NULL) {
        if (fgets(boot, sizeof(boot), f) == NULL)
            boot[0] = '\0';
        fclose(f);
        boot[strcspn(boot, "\n")] = '\0';
    }
    snprintf(buf, len, "%s/%s", name, boot);
}

typedef struct id_rank {
    const char *id;
    int rank;
} id_rank_t;

static int by_id_then_rank(const void *a, const void *b)
{
    const id_rank_t *x = a, *y = b;
    int c = strcmp(x->id, y->id);
    return c != 0 ? c : (x->rank > y->rank) - (x->rank < y->rank);
}

/* hosts[r] = the lowest rank whose id equals rank r's: sorting makes this N log N, not N^2, at thousands of
 * ranks. */
static tcomms_status_t number_hosts(void **vals, int size, int *hosts)
{
    id_rank_t *all = malloc((size_t)size * sizeof(*all));
    if (all == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "out of memory");
    for (int r = 0; r < size; r++)
        all[r] = (id_rank_t){vals[r], r};
    qsort(all, (size_t)size, sizeof(*all), by_id_then_rank);
    for (int i = 0, first = 0; i < size; i++) {
        if (i > 0 && strcmp(all[i].id, all[i - 1].id) != 0)
            first = i;
        hosts[all[i].rank] = all[first].rank;
    }
    free(all);
    return TCOMMS_SUCCESS;
}

/* local_rank and local_size of `comm` from its host table. */
static void count_local(tcomms_comm_t *comm)
{
    int mine = comm->hosts[comm->rank];
    comm->local_rank = comm->local_size = 0;
    for (int r = 0; r < comm->size; r++)
        if (comm->hosts[r] == mine) {
            comm->local_rank += r < comm->rank;
            comm->local_size++;
        }
}

static void cross_check(const tcomms_comm_t *comm, const tc_topo_claim_t *claim, const char *id)
{
    if ((claim->local_rank < 0 || claim->local_rank == comm->local_rank) &&
        (claim->local_size < 0 || claim->local_size == comm->local_size))
        return;
    char said_rank[16] = "?", said_size[16] = "?";
    if (claim->local_rank >= 0)
        snprintf(said_rank, sizeof(said_rank), "%d", claim->local_rank);
    if (claim->local_size >= 0)
        snprintf(said_size, sizeof(said_size), "%d", claim->local_size);
    tc_log(TCOMMS_LOG_WARN, "core", "communicator '%s', rank %d: %s say local rank %s of %s, but the rendezvous "
           "found %d rank(s) on this host (host id '%s'): using local rank %d of %d", comm->name, comm->rank,
           claim->from, said_rank, said_size, comm->local_size, id, comm->local_rank, comm->local_size);
}

tcomms_status_t tc_topo_root(tcomms_comm_t *comm, const tc_topo_claim_t *claim)
{
    comm->hosts = calloc((size_t)comm->size, sizeof(*comm->hosts));
    if (comm->hosts == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "out of memory for a host table of %d ranks", comm->size);
    char id[HOST_ID_MAX];
    tc_topo_host_id(id, sizeof(id));
    if (comm->size > 1) {
        void **vals = calloc((size_t)comm->size, sizeof(*vals));
        size_t *lens = calloc((size_t)comm->size, sizeof(*lens));
        char prefix[TC_KEY_MAX];
        snprintf(prefix, sizeof(prefix), "%s/create/host", comm->prefix); /* deleted with the creation keys */
        int missing = -1;
        tcomms_status_t st = vals && lens ? tc_store_allgather(comm->store->store, prefix, comm->rank, comm->size, id,
                                                                strlen(id) + 1, comm->timeout_ms, vals, lens, &missing)
                                          : tc_error(TCOMMS_ERR_NO_MEMORY, "out of memory");
        for (int r = 0; st == TCOMMS_SUCCESS && r < comm->size; r++)
            if (lens[r] == 0 || ((char *)vals[r])[lens[r] - 1] != '\0')
                st = tc_error(TCOMMS_ERR_PROTOCOL, "rank %d's host id is not a string", r);
        if (st == TCOMMS_SUCCESS)
            st = number_hosts(vals, comm->size, comm->hosts);
        else if (missing >= 0)
            tc_error_prefix(st, "exchanging host ids (waiting for rank %d): ", missing);
        if (vals != NULL)
            tc_store_free_values(vals, comm->size);
        free(vals);
        free(lens);
        if (st != TCOMMS_SUCCESS)
            return st;
    }
    count_local(comm);
    cross_check(comm, claim, id);
    tc_log(TCOMMS_LOG_DEBUG, "core", "communicator '%s': rank %d is local rank %d of %d on host '%s'", comm->name,
           comm->rank, comm->local_rank, comm->local_size, id);
    return TCOMMS_SUCCESS;
}

tcomms_status_t tc_topo_split(tcomms_comm_t *child, const tcomms_comm_t *parent, const int *members)
{
    child->hosts = malloc((size_t)child->size * sizeof(*child->hosts));
    if (child->hosts == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "out of memory for a host table of %d ranks", child->size);
    for (int i = 0; i < child->size; i++)
        child->hosts[i] = parent->hosts[members[i]];
    count_local(child);
    return TCOMMS_SUCCESS;
}
