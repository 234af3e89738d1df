/* Splitting a communicator: by an explicit sorted rank list (torchcomms' split) or by color and key (MPI's). Both
 * end in one routine that creates a child over an ordered member list (non-members only tell the backends that
 * split collectively over the parent); store keys derive from the parent's prefix and its split counter, so every
 * rank computes the same keys without talking. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "error.h"
#include "hints.h"
#include "log.h"

/* Check that all members passed the same list: the first member publishes it, the others compare, so a mismatch
 * is a named error rather than a hang in the backend's rendezvous. */
static tcomms_status_t agree_on_members(tcomms_comm_t *parent, const char *prefix, const int *members, int n,
                                        int my_index)
{
    char key[TC_KEY_MAX];
    snprintf(key, sizeof(key), "%.*s/create/members", TC_PREFIX_MAX, prefix);
    size_t bytes = (size_t)n * sizeof(int);
    if (my_index == 0)
        return tc_store_set(parent->store->store, key, members, bytes);
    void *seen = NULL;
    size_t len = 0;
    tcomms_status_t st = tc_store_get(parent->store->store, key, &seen, &len, parent->timeout_ms);
    if (st != TCOMMS_SUCCESS)
        return tc_error_prefix(st, "waiting for the member list from parent rank %d: ", members[0]);
    int same = len == bytes && memcmp(seen, members, bytes) == 0;
    free(seen);
    if (!same)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "the rank list differs from the one parent rank %d passed for the "
                        "same new communicator", members[0]);
    return TCOMMS_SUCCESS;
}

static void child_free(tcomms_comm_t *child)
{
    tc_store_ref_release(child->store);
    tcomms_hints_free(child->hints);
    free(child);
}

/* A child of `parent` as its members (and, for the backends, its non-members) see it before any backend exists:
 * identity, store-key prefix "<parent>/s<split>/<leaf>", the parent's slots, and its own checked hints. */
static tcomms_status_t child_new(tcomms_comm_t *parent, uint64_t split, const char *leaf, const char *name,
                                 const tcomms_hints_t *hints, tcomms_comm_t **out)
{
    tcomms_comm_t *child = calloc(1, sizeof(*child));
    if (child == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "out of memory");
    int len = snprintf(child->prefix, sizeof(child->prefix), "%s/s%llu/%s", parent->prefix,
                       (unsigned long long)split, leaf);
    if (len < 0 || (size_t)len >= sizeof(child->prefix)) {
        free(child);
        return tc_error(TCOMMS_ERR_NOT_SUPPORTED, "splits nested too deeply (store-key prefix over %d characters)",
                        TC_PREFIX_MAX - 1);
    }
    if (name != NULL && *name != '\0')
        snprintf(child->name, sizeof(child->name), "%s", name);
    else
        snprintf(child->name, sizeof(child->name), "%.100s.%llu", parent->name, (unsigned long long)split);
    child->rank = -1;
    child->local_rank = parent->local_rank;
    child->device = parent->device;
    child->timeout_ms = parent->timeout_ms;
    child->check_calls = parent->check_calls;
    snprintf(child->master_addr, sizeof(child->master_addr), "%s", parent->master_addr);
    memcpy(child->slot, parent->slot, sizeof(child->slot));
    for (int t = 0; t < TCOMMS_DEVICE_TYPE_COUNT; t++)
        child->slot[t].bcomm = NULL;
    child->store = parent->store;
    tc_store_ref_acquire(child->store);
    tcomms_status_t st = tcomms_hints_create(&child->hints);
    if (st == TCOMMS_SUCCESS && hints != NULL)
        st = tc_hints_merge(child->hints, hints);
    if (st == TCOMMS_SUCCESS)
        st = tc_hints_check(child->hints);
    if (st != TCOMMS_SUCCESS) {
        child_free(child);
        return st;
    }
    *out = child;
    return TCOMMS_SUCCESS;
}

/* Create the child over `members` (parent ranks in child-rank order); `tag` distinguishes the children of one
 * split call. */
static tcomms_status_t split_members(tcomms_comm_t *parent, uint64_t split, long tag, const int *members, int n,
                                     const char *name, const tcomms_hints_t *hints, tcomms_comm_t **out)
{
    int my_index = -1;
    for (int i = 0; i < n; i++)
        if (members[i] == parent->rank)
            my_index = i;
    char leaf[32];
    snprintf(leaf, sizeof(leaf), "c%ld", tag);
    tcomms_comm_t *child = NULL;
    tcomms_status_t st = child_new(parent, split, leaf, name, hints, &child);
    if (st == TCOMMS_SUCCESS) {
        child->rank = my_index;
        child->size = n;
        st = agree_on_members(parent, child->prefix, members, n, my_index);
        if (st == TCOMMS_SUCCESS)
            st = tc_comm_create_backends(child, parent, members);
        if (st != TCOMMS_SUCCESS)
            child_free(child);
    }
    if (st != TCOMMS_SUCCESS)
        return tc_error_prefix(st, "split of '%s': ", parent->name);
    *out = child;
    return TCOMMS_SUCCESS;
}

/* A rank outside every child still takes part where a backend's split is collective over the parent (ncclCommSplit
 * with NCCL_SPLIT_NOCOLOR). It runs within this split call, so its backend calls keep the members' order across
 * successive splits. It knows neither the members nor the child's prefix: rank -1, size 0, no parent_ranks. */
static tcomms_status_t split_nonmember(tcomms_comm_t *parent, uint64_t split, const char *name,
                                       const tcomms_hints_t *hints)
{
    tcomms_comm_t *child = NULL;
    tcomms_status_t first = child_new(parent, split, "nonmember", name, hints, &child);
    if (first != TCOMMS_SUCCESS)
        return tc_error_prefix(first, "split of '%s': ", parent->name);
    for (int t = 0; t < TCOMMS_DEVICE_TYPE_COUNT; t++) {
        const tcomms_backend_t *be = child->slot[t].be;
        if (be == NULL || be->comm_split_nonmember == NULL || parent->slot[t].bcomm == NULL)
            continue;
        tcomms_backend_comm_args_t args;
        tc_comm_backend_args(child, t, child->prefix, parent, NULL, &args);
        tcomms_status_t st = be->comm_split_nonmember(parent->slot[t].bcomm, &args);
        if (st != TCOMMS_SUCCESS && first == TCOMMS_SUCCESS)
            first = tc_error_prefix(st, "split of '%s' (not a member) on backend '%s': ", parent->name, be->name);
    }
    child_free(child);
    return first;
}

tcomms_status_t tcomms_comm_split(tcomms_comm_t *parent, const int *ranks, int nranks, const char *name,
                                  const tcomms_hints_t *hints, tcomms_comm_t **out)
{
    if (parent == NULL || out == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_comm_split: %s is NULL", parent ? "out" : "parent");
    *out = NULL;
    tcomms_status_t st = tc_comm_check_bound(parent, "tcomms_comm_split");
    if (st != TCOMMS_SUCCESS)
        return st;
    if (nranks < 0 || nranks > parent->size)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_comm_split: nranks %d is not in [0, %d]", nranks,
                        parent->size);
    if (nranks > 0 && ranks == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_comm_split: ranks is NULL with nranks %d", nranks);
    int member = 0;
    for (int i = 0; i < nranks; i++) {
        if (ranks[i] < 0 || ranks[i] >= parent->size)
            return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_comm_split: ranks[%d] = %d is out of range [0, %d)", i,
                            ranks[i], parent->size);
        if (i > 0 && ranks[i] <= ranks[i - 1])
            return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_comm_split: ranks[%d] = %d after %d: the list must be "
                            "sorted without duplicates", i, ranks[i], ranks[i - 1]);
        member |= ranks[i] == parent->rank;
    }
    if (nranks > 0 && !member)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_comm_split: the caller (parent rank %d) is not in ranks; "
                        "a non-member passes nranks = 0", parent->rank);
    uint64_t split = ++parent->splits;
    if (nranks == 0)
        return split_nonmember(parent, split, name, hints);
    return split_members(parent, split, ranks[0], ranks, nranks, name, hints, out);
}

typedef struct color_key {
    int color, key, rank;
} color_key_t;

static int by_key_then_rank(const void *a, const void *b)
{
    const color_key_t *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Every rank's (color, key) through the store, by way of parent rank 0 (tc_store_allgather): about 3N store
 * requests for a split of N ranks where every rank reading every key would be N^2, at thousands of ranks minutes of
 * the store server's time per split. */
static tcomms_status_t exchange_color_key(tcomms_comm_t *parent, const char *prefix, int color, int key,
                                          color_key_t *all)
{
    int n = parent->size, mine[2] = {color, key}, missing = -1;
    void **vals = calloc((size_t)n, sizeof(*vals));
    size_t *lens = calloc((size_t)n, sizeof(*lens));
    tcomms_status_t st = vals && lens ? TCOMMS_SUCCESS : tc_error(TCOMMS_ERR_NO_MEMORY, "out of memory");
    if (st == TCOMMS_SUCCESS && (st = tc_store_allgather(parent->store->store, prefix, parent->rank, n, mine,
                                                         sizeof(mine), parent->timeout_ms, vals, lens, &missing)) !=
                                    TCOMMS_SUCCESS) {
        if (missing > 0)
            tc_error_prefix(st, "waiting for parent rank %d's color: ", missing);
        else if (missing == 0)
            tc_error_prefix(st, "waiting for every rank's color from parent rank 0: ");
    }
    for (int r = 0; r < n && st == TCOMMS_SUCCESS; r++) {
        int ck[2];
        if (lens[r] != sizeof(ck)) {
            st = tc_error(TCOMMS_ERR_PROTOCOL, "parent rank %d's color takes %zu bytes, expected %zu", r, lens[r],
                          sizeof(ck));
        } else {
            memcpy(ck, vals[r], sizeof(ck));
            all[r] = (color_key_t){ck[0], ck[1], r};
        }
    }
    if (vals != NULL)
        tc_store_free_values(vals, n);
    free(vals);
    free(lens);
    return st;
}

tcomms_status_t tcomms_comm_split_color(tcomms_comm_t *parent, int color, int key, const char *name,
                                        const tcomms_hints_t *hints, tcomms_comm_t **out)
{
    if (parent == NULL || out == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_comm_split_color: %s is NULL", parent ? "out" : "parent");
    *out = NULL;
    tcomms_status_t st = tc_comm_check_bound(parent, "tcomms_comm_split_color");
    if (st != TCOMMS_SUCCESS)
        return st;
    if (color < 0 && color != TCOMMS_SPLIT_NOCOLOR)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_comm_split_color: color %d must be >= 0 or "
                        "TCOMMS_SPLIT_NOCOLOR", color);
    uint64_t split = ++parent->splits;
    char prefix[TC_SUBPREFIX_MAX];
    snprintf(prefix, sizeof(prefix), "%s/s%llu/x/", parent->prefix, (unsigned long long)split);
    color_key_t *all = calloc((size_t)parent->size, sizeof(*all));
    int *members = calloc((size_t)parent->size, sizeof(*members));
    st = all && members ? exchange_color_key(parent, prefix, color, key, all)
                                        : tc_error(TCOMMS_ERR_NO_MEMORY, "out of memory");
    if (st == TCOMMS_SUCCESS) {
        tc_comm_cleanup_keys(parent, prefix, parent->size);
        int n = 0;
        for (int r = 0; r < parent->size; r++)
            if (color != TCOMMS_SPLIT_NOCOLOR && all[r].color == color)
                all[n++] = all[r];
        qsort(all, (size_t)n, sizeof(*all), by_key_then_rank);
        for (int i = 0; i < n; i++)
            members[i] = all[i].rank;
        st = n > 0 ? split_members(parent, split, color, members, n, name, hints, out)
                   : split_nonmember(parent, split, name, hints);
    } else
        tc_error_prefix(st, "tcomms_comm_split_color: ");
    free(all);
    free(members);
    return st;
}
