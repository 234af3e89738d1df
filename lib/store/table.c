/* SPDX-License-Identifier: BSD-3-Clause */
/* The store server's key table (table.h): FNV-1a hashing into chained buckets, doubled once the table holds
 * as many keys as buckets, so lookups stay short without any tuning. */
#include <stdlib.h>
#include <string.h>

#include "table.h"

#define FIRST_BUCKETS 64

static uint64_t hash_key(const uint8_t *key, uint32_t klen)
{
    uint64_t h = 1469598103934665603ull;
    for (uint32_t i = 0; i < klen; i++)
        h = (h ^ key[i]) * 1099511628211ull;
    return h;
}

/* The link that points at `key`'s entry, or the NULL link ending its chain. */
static tc_store_entry_t **slot_of(tc_store_table_t *t, const uint8_t *key, uint32_t klen, uint64_t h)
{
    tc_store_entry_t **p = &t->buckets[h & (t->nbuckets - 1)];
    while (*p != NULL && !((*p)->hash == h && (*p)->klen == klen && memcmp((*p)->key, key, klen) == 0))
        p = &(*p)->next;
    return p;
}

int tc_store_table_init(tc_store_table_t *t)
{
    t->count = 0;
    t->bytes = 0;
    t->nbuckets = FIRST_BUCKETS;
    t->buckets = calloc(t->nbuckets, sizeof(*t->buckets));
    return t->buckets != NULL ? 0 : -1;
}

tc_store_entry_t *tc_store_table_find(tc_store_table_t *t, const uint8_t *key, uint32_t klen)
{
    return *slot_of(t, key, klen, hash_key(key, klen));
}

static void grow(tc_store_table_t *t)
{
    size_t n = t->nbuckets * 2;
    tc_store_entry_t **b = calloc(n, sizeof(*b));
    if (b == NULL)
        return; /* chains just get longer */
    for (size_t i = 0; i < t->nbuckets; i++) {
        for (tc_store_entry_t *e = t->buckets[i], *next; e != NULL; e = next) {
            next = e->next;
            e->next = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
        }
    }
    free(t->buckets);
    t->buckets = b;
    t->nbuckets = n;
}

int tc_store_table_set(tc_store_table_t *t, const uint8_t *key, uint32_t klen, const uint8_t *value, uint32_t vlen)
{
    uint8_t *copy = malloc(vlen > 0 ? vlen : 1);
    if (copy == NULL)
        return -1;
    if (vlen > 0)
        memcpy(copy, value, vlen);
    uint64_t h = hash_key(key, klen);
    tc_store_entry_t **slot = slot_of(t, key, klen, h);
    if (*slot == NULL) {
        tc_store_entry_t *e = malloc(sizeof(*e) + klen);
        if (e == NULL) {
            free(copy);
            return -1;
        }
        *e = (tc_store_entry_t){.hash = h, .klen = klen};
        memcpy(e->key, key, klen);
        if (t->count >= t->nbuckets) {
            grow(t);
            slot = slot_of(t, key, klen, h);
        }
        *slot = e;
        t->count++;
        t->bytes += TC_STORE_ENTRY_OVERHEAD + klen;
    }
    t->bytes = t->bytes - (*slot)->vlen + vlen;
    free((*slot)->value);
    (*slot)->value = copy;
    (*slot)->vlen = vlen;
    return 0;
}

static void unlink_entry(tc_store_table_t *t, tc_store_entry_t **slot)
{
    tc_store_entry_t *e = *slot;
    *slot = e->next;
    t->bytes -= TC_STORE_ENTRY_OVERHEAD + e->klen + e->vlen;
    free(e->value);
    free(e);
    t->count--;
}

void tc_store_table_del(tc_store_table_t *t, const uint8_t *key, uint32_t klen)
{
    tc_store_entry_t **slot = slot_of(t, key, klen, hash_key(key, klen));
    if (*slot != NULL)
        unlink_entry(t, slot);
}

int64_t tc_store_table_del_prefix(tc_store_table_t *t, const uint8_t *prefix, uint32_t plen)
{
    int64_t removed = 0;
    for (size_t i = 0; i < t->nbuckets; i++) {
        for (tc_store_entry_t **p = &t->buckets[i]; *p != NULL;) {
            if ((*p)->klen >= plen && memcmp((*p)->key, prefix, plen) == 0) {
                unlink_entry(t, p);
                removed++;
            } else {
                p = &(*p)->next;
            }
        }
    }
    return removed;
}

void tc_store_table_free(tc_store_table_t *t)
{
    for (size_t i = 0; t->buckets != NULL && i < t->nbuckets; i++)
        while (t->buckets[i] != NULL)
            unlink_entry(t, &t->buckets[i]);
    free(t->buckets);
    t->buckets = NULL;
    t->nbuckets = 0;
}
