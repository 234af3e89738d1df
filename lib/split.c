/* SPDX-License-Identifier: BSD-3-Clause */
/* Splitting a communicator: by an explicit sorted rank list (torchcomms' split) or by color and key (MPI's). Each
 * call checks its arguments, agrees with every parent rank on the outcome (split_agree.c), then creates a child
 * over an ordered member list (non-members only tell the backends that split collectively over the parent); store
 * keys derive from the parent's prefix and its split counter, so every rank computes the same keys without talking. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "error.h"
#include "hints.h"
#include "log.h"
#include "split_agree.h"
#include "topo.h"

static void child_free(tcomms_comm_t *child)
{
    tc_store_ref_release(child->store);
    tcomms_hints_free(child->hints);
    free(child->hosts);
    free(child);
}

/* A child of `parent` as its members (and, for the backends, its non-members) see it before any backend exists:
 * identity, store-key prefix "<parent>/<kind><split>/c<tag>" (kind 's' for a split, 'k' for a shrink; `tag` tells
 * apart the children of one split: a list's first rank, a color) or ".../nonmember" (tag -1), the parent's slots,
 * and its own checked hints. Made before the agreement, so that a failure here is one of the caller's refusals. */
static tcomms_status_t child_new(tcomms_comm_t *parent, char kind, uint64_t split, int tag, const char *name,
                                 const tcomms_hints_t *hints, tcomms_comm_t **out)
{
    tcomms_comm_t *child = calloc(1, sizeof(*child));
    if (child == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "out of memory");
    int len = tag >= 0 ? snprintf(child->prefix, sizeof(child->prefix), "%s/%c%llu/c%d", parent->prefix, kind,
                                  (unsigned long long)split, tag)
                       : snprintf(child->prefix, sizeof(child->prefix), "%s/%c%llu/nonmember", parent->prefix,
                                  kind, (unsigned long long)split);
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
    child->local_rank = parent->local_rank; /* a member gets its own in build() */
    child->local_size = parent->local_size;
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

/* A rank outside every child still takes part where a backend's split is collective over the parent (ncclCommSplit
 * with NCCL_SPLIT_NOCOLOR). It runs within this split call, so its backend calls keep the members' order across
 * successive splits. `child` (freed here) knows neither the members nor the child's prefix: rank -1, size 0, no
 * parent_ranks. */
static tcomms_status_t split_nonmember(tcomms_comm_t *parent, tcomms_comm_t *child)
{
    tcomms_status_t first = TCOMMS_SUCCESS;
    for (int t = 0; t < TCOMMS_DEVICE_TYPE_COUNT; t++) {
        const tcomms_backend_t *be = child->slot[t].be;
        if (be == NULL || be->comm_split_nonmember == NULL || parent->slot[t].bcomm == NULL)
            continue;
        tcomms_backend_comm_args_t args;
        tc_comm_backend_args(child, t, child->prefix, parent, NULL, &args);
        tcomms_status_t st = be->comm_split_nonmember(parent->slot[t].bcomm, &args);
        if (st != TCOMMS_SUCCESS && first == TCOMMS_SUCCESS)
            first = tc_error_prefix(st, "(not a member) on backend '%s': ", be->name);
    }
    child_free(child);
    return first;
}

/* This rank's part of a split the ranks agreed on: a member creates the child over `members` (parent ranks in
 * child-rank order) and hands it to *out; a non-member (n = 0) takes part for the backends. Takes `child`. */
static tcomms_status_t build(tcomms_comm_t *parent, tcomms_comm_t *child, const int *members, int n,
                             tc_derive_t how, tcomms_comm_t **out)
{
    tc_log_refresh(); /* a new communicator reads the log levels again, as a root's creation does */
    if (n == 0)
        return split_nonmember(parent, child);
    child->size = n;
    for (int i = 0; i < n; i++)
        if (members[i] == parent->rank)
            child->rank = i;
    tcomms_status_t st = tc_topo_split(child, parent, members);
    if (st == TCOMMS_SUCCESS)
        st = tc_comm_create_backends(child, parent, members, how);
    if (st != TCOMMS_SUCCESS) {
        child_free(child);
        return st;
    }
    *out = child;
    return TCOMMS_SUCCESS;
}

/* The caller's own arguments, checked before its vote: a failure here is a refusal the others hear about. */
static tcomms_status_t check_list(const tcomms_comm_t *parent, const int *ranks, int nranks, tcomms_comm_t **out)
{
    if (out == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_comm_split: out is NULL");
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
    return TCOMMS_SUCCESS;
}

/* A failure after the caller's own checks passed: name the call and the split. */
static tcomms_status_t split_failed(tcomms_status_t st, const char *who, uint64_t split, const tcomms_comm_t *parent)
{
    return tc_error_prefix(st, "%s: split %llu of '%s': ", who, (unsigned long long)split, parent->name);
}

tcomms_status_t tcomms_comm_split(tcomms_comm_t *parent, const int *ranks, int nranks, const char *name,
                                  const tcomms_hints_t *hints, tcomms_comm_t **out)
{
    if (parent == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_comm_split: parent is NULL");
    if (out != NULL)
        *out = NULL;
    tcomms_status_t live = tc_comm_check(parent, "tcomms_comm_split", "parent");
    if (live != TCOMMS_SUCCESS) /* a released parent has no split counter or store to vote through */
        return live;
    /* Numbered before any check, identically on every rank: a refused call still meets the other ranks' call of the
     * same number (and tells them) instead of their next one. */
    uint64_t split = ++parent->splits;
    tcomms_comm_t *child = NULL;
    tcomms_status_t st = tc_comm_state_check(parent->state, "tcomms_comm_split");
    if (st == TCOMMS_SUCCESS) /* a broken parent still votes, so the other ranks hear why */
        st = check_list(parent, ranks, nranks, out);
    if (st == TCOMMS_SUCCESS &&
        (st = child_new(parent, 's', split, nranks > 0 ? ranks[0] : -1, name, hints, &child)) != TCOMMS_SUCCESS)
        tc_error_prefix(st, "tcomms_comm_split: ");
    tc_split_vote_t vote;
    if (st == TCOMMS_SUCCESS)
        tc_split_vote_list(&vote, ranks, nranks);
    else
        tc_split_vote_refuse(&vote, TC_SPLIT_BY_LIST, st);
    tcomms_status_t agreed = tc_split_agree(parent, split, &vote, NULL);
    if (st != TCOMMS_SUCCESS)
        return agreed; /* the caller's own refusal, as it was */
    if (agreed != TCOMMS_SUCCESS) {
        child_free(child);
        return split_failed(agreed, "tcomms_comm_split", split, parent);
    }
    if ((st = build(parent, child, ranks, nranks, TC_DERIVE_SPLIT, out)) != TCOMMS_SUCCESS)
        return split_failed(st, "tcomms_comm_split", split, parent);
    return TCOMMS_SUCCESS;
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

/* The members of `color` from every rank's (color, key) in `table`, ordered by (key, parent rank), into members[],
 * *n of them (0 for TCOMMS_SPLIT_NOCOLOR). */
static tcomms_status_t color_members(const tcomms_comm_t *parent, const int32_t *table, int color, int *members,
                                     int *n)
{
    color_key_t *all = calloc((size_t)parent->size, sizeof(*all));
    if (all == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "out of memory");
    *n = 0;
    for (int r = 0; r < parent->size; r++)
        if (color != TCOMMS_SPLIT_NOCOLOR && table[2 * r] == color)
            all[(*n)++] = (color_key_t){table[2 * r], table[2 * r + 1], r};
    qsort(all, (size_t)*n, sizeof(*all), by_key_then_rank);
    for (int i = 0; i < *n; i++)
        members[i] = all[i].rank;
    free(all);
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcomms_comm_split_color(tcomms_comm_t *parent, int color, int key, const char *name,
                                        const tcomms_hints_t *hints, tcomms_comm_t **out)
{
    if (parent == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_comm_split_color: parent is NULL");
    if (out != NULL)
        *out = NULL;
    tcomms_status_t live = tc_comm_check(parent, "tcomms_comm_split_color", "parent");
    if (live != TCOMMS_SUCCESS)
        return live;
    uint64_t split = ++parent->splits; /* before any check, as in tcomms_comm_split */
    tcomms_comm_t *child = NULL;
    tcomms_status_t st = out == NULL ? tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_comm_split_color: out is NULL")
                                     : tc_comm_check_bound(parent, "tcomms_comm_split_color");
    if (st == TCOMMS_SUCCESS)
        st = tc_comm_state_check(parent->state, "tcomms_comm_split_color");
    if (st == TCOMMS_SUCCESS && color < 0 && color != TCOMMS_SPLIT_NOCOLOR)
        st = tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_comm_split_color: color %d must be >= 0 or "
                      "TCOMMS_SPLIT_NOCOLOR", color);
    if (st == TCOMMS_SUCCESS && (st = child_new(parent, 's', split, color, name, hints, &child)) != TCOMMS_SUCCESS)
        tc_error_prefix(st, "tcomms_comm_split_color: ");
    tc_split_vote_t vote;
    if (st == TCOMMS_SUCCESS)
        tc_split_vote_color(&vote, color, key);
    else
        tc_split_vote_refuse(&vote, TC_SPLIT_BY_COLOR, st);
    int32_t *table = NULL;
    tcomms_status_t agreed = tc_split_agree(parent, split, &vote, &table);
    if (st != TCOMMS_SUCCESS)
        return agreed;
    int *members = NULL, n = 0;
    if (agreed == TCOMMS_SUCCESS && (members = calloc((size_t)parent->size, sizeof(*members))) == NULL)
        agreed = tc_error(TCOMMS_ERR_NO_MEMORY, "out of memory");
    if (agreed == TCOMMS_SUCCESS)
        agreed = color_members(parent, table, color, members, &n);
    if (agreed == TCOMMS_SUCCESS)
        agreed = build(parent, child, members, n, TC_DERIVE_SPLIT, out);
    else
        child_free(child);
    free(table);
    free(members);
    return agreed == TCOMMS_SUCCESS ? TCOMMS_SUCCESS : split_failed(agreed, "tcomms_comm_split_color", split, parent);
}

/* The survivors of a shrink: the parent ranks not in `exclude`, in order, into members[] (parent->size entries),
 * *n of them; checked as the caller's own arguments. */
static tcomms_status_t survivors(const tcomms_comm_t *parent, const int *exclude, int nexclude, tcomms_comm_t **out,
                                 int *members, int *n)
{
    *n = 0;
    if (out == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_comm_shrink: out is NULL");
    tcomms_status_t st = tc_comm_check_bound(parent, "tcomms_comm_shrink");
    if (st != TCOMMS_SUCCESS)
        return st;
    if (nexclude < 0 || nexclude >= parent->size)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_comm_shrink: nexclude %d is not in [0, %d): the caller "
                        "survives", nexclude, parent->size);
    if (nexclude > 0 && exclude == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_comm_shrink: exclude is NULL with nexclude %d", nexclude);
    for (int r = 0; r < parent->size; r++)
        members[r] = 1;
    for (int i = 0; i < nexclude; i++) {
        int r = exclude[i];
        if (r < 0 || r >= parent->size)
            return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_comm_shrink: exclude[%d] = %d is out of range [0, %d)",
                            i, r, parent->size);
        if (!members[r])
            return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_comm_shrink: exclude[%d] = %d is listed twice", i, r);
        if (r == parent->rank)
            return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_comm_shrink: exclude[%d] is the caller (parent rank %d): "
                            "a rank left out does not call tcomms_comm_shrink", i, r);
        members[r] = 0;
    }
    for (int r = 0; r < parent->size; r++)
        if (members[r])
            members[(*n)++] = r;
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcomms_comm_shrink(tcomms_comm_t *parent, const int *exclude, int nexclude, const char *name,
                                   const tcomms_hints_t *hints, tcomms_comm_t **out)
{
    if (parent == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_comm_shrink: parent is NULL");
    if (out != NULL)
        *out = NULL;
    tcomms_status_t live = tc_comm_check(parent, "tcomms_comm_shrink", "parent");
    if (live != TCOMMS_SUCCESS)
        return live;
    /* Counted apart from the splits, before any check: the excluded ranks make no call, and the parent's ranks
     * must still number their splits alike afterwards. */
    uint64_t shrink = ++parent->shrinks;
    int *members = calloc((size_t)parent->size, sizeof(*members)), n = 0;
    if (members == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "out of memory");
    tcomms_comm_t *child = NULL;
    /* No failure-state check: a failed parent is what a shrink is for. */
    tcomms_status_t st = survivors(parent, exclude, nexclude, out, members, &n);
    if (st == TCOMMS_SUCCESS &&
        (st = child_new(parent, 'k', shrink, members[0], name, hints, &child)) != TCOMMS_SUCCESS)
        tc_error_prefix(st, "tcomms_comm_shrink: ");
    tc_split_vote_t vote;
    if (st == TCOMMS_SUCCESS)
        tc_split_vote_shrink(&vote, members, n, tc_comm_state_failed(parent->state, NULL) != TCOMMS_SUCCESS);
    else
        tc_split_vote_refuse(&vote, TC_SPLIT_SHRINK, st);
    int any_failed = 0;
    tcomms_status_t agreed = tc_shrink_agree(parent, shrink, &vote, n > 0 ? members : NULL, n, &any_failed);
    if (st != TCOMMS_SUCCESS) {
        free(members);
        return agreed; /* the caller's own refusal, as it was */
    }
    if (agreed == TCOMMS_ERR_REMOTE && parent->master_addr[0] != '\0') { /* the built-in store failed */
        char why[512];
        snprintf(why, sizeof(why), "%s", tcomms_last_error());
        tc_error(agreed, "%s (the store lives in the process of rank 0 of the root communicator: with that process "
                 "gone, the survivors need a new rendezvous, or a root made with a store of their own, "
                 "TCOMMS_COMM_PARAM_STORE)", why);
    }
    if (agreed != TCOMMS_SUCCESS)
        child_free(child);
    else
        agreed = build(parent, child, members, n, any_failed ? TC_DERIVE_AFRESH : TC_DERIVE_SHRINK, out);
    free(members);
    if (agreed != TCOMMS_SUCCESS)
        tc_error_prefix(agreed, "tcomms_comm_shrink: shrink %llu of '%s': ", (unsigned long long)shrink,
                        parent->name);
    return agreed;
}
