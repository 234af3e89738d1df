/* SPDX-License-Identifier: BSD-3-Clause */
/* One hash function and one growing hash table, for the store server's keys (lib/store/table.c) and the UCX
 * backend's endpoint cache (backends/ucx/context.c). Header-only, as lib/util/clock.h, so modules use it without
 * linking the core. The table is intrusive: an entry starts with a tc_hlink_t, and its owner compares keys itself
 * while walking a chain (tc_htable_chain), so the table never knows what a key is. */
#ifndef TC_HASH_H
#define TC_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* 64-bit FNV-1a: fast on short keys, no seed. No table here faces keys chosen to collide: the store's clients are
 * the job's own ranks (with a token), UCX addresses come from the store, hint keys from the program. */
#define TC_HASH_INIT 14695981039346656037ull /* FNV-1a's offset basis */

/* Continue hash `h` over `n` more bytes: tc_hash_more(tc_hash_more(TC_HASH_INIT, a, na), b, nb) hashes a then b. */
static inline uint64_t tc_hash_more(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static inline uint64_t tc_hash_bytes(const void *data, size_t n)
{
    return tc_hash_more(TC_HASH_INIT, data, n);
}

/* The first member of an entry. */
typedef struct tc_hlink {
    struct tc_hlink *next;
    uint64_t hash;
} tc_hlink_t;

typedef struct tc_htable {
    tc_hlink_t **buckets;
    size_t nbuckets; /* a power of two */
    size_t count;
} tc_htable_t;

/* 0, or -1 when out of memory. `nbuckets` is a power of two: the table doubles it once it holds as many entries,
 * so lookups stay short without tuning. */
static inline int tc_htable_init(tc_htable_t *t, size_t nbuckets)
{
    t->count = 0;
    t->nbuckets = nbuckets;
    t->buckets = calloc(nbuckets, sizeof(*t->buckets));
    return t->buckets != NULL ? 0 : -1;
}

/* The head of the chain where an entry of hash `h` lives: walk it with `for (l = *tc_htable_chain(t, h); l; l =
 * l->next)`, or through the links (tc_hlink_t **) to unlink one. */
static inline tc_hlink_t **tc_htable_chain(const tc_htable_t *t, uint64_t h)
{
    return &t->buckets[h & (t->nbuckets - 1)];
}

/* Add `e` (its hash set; the caller knows no entry has its key). Growing happens here; when memory for more
 * buckets is lacking the chains just get longer, still correct. */
static inline void tc_htable_insert(tc_htable_t *t, tc_hlink_t *e)
{
    if (t->count >= t->nbuckets) {
        size_t n = t->nbuckets * 2;
        tc_hlink_t **b = calloc(n, sizeof(*b));
        if (b != NULL) {
            for (size_t i = 0; i < t->nbuckets; i++) {
                for (tc_hlink_t *l = t->buckets[i], *next; l != NULL; l = next) {
                    next = l->next;
                    l->next = b[l->hash & (n - 1)];
                    b[l->hash & (n - 1)] = l;
                }
            }
            free(t->buckets);
            t->buckets = b;
            t->nbuckets = n;
        }
    }
    tc_hlink_t **chain = tc_htable_chain(t, e->hash);
    e->next = *chain;
    *chain = e;
    t->count++;
}

/* Take out the entry `*link` points at (a link met while walking a chain) and return it; the caller frees it. */
static inline tc_hlink_t *tc_htable_unlink(tc_htable_t *t, tc_hlink_t **link)
{
    tc_hlink_t *e = *link;
    *link = e->next;
    t->count--;
    return e;
}

/* Hand every entry to `release` (which may free it; NULL for a table known to be empty), then free the buckets.
 * The table is empty after, and may be freed again. */
static inline void tc_htable_free(tc_htable_t *t, void (*release)(tc_hlink_t *e, void *arg), void *arg)
{
    for (size_t i = 0; release != NULL && i < t->nbuckets; i++) {
        for (tc_hlink_t *l = t->buckets[i], *next; l != NULL; l = next) {
            next = l->next;
            release(l, arg);
        }
    }
    free(t->buckets);
    t->buckets = NULL;
    t->nbuckets = t->count = 0;
}

#endif
