/* SPDX-License-Identifier: BSD-3-Clause */
/* The store server's key table (table.h): entries of lib/hash.h's growing table, which the server's byte budget
 * accounts for here. */
#include <stdlib.h>
#include <string.h>

#include "table.h"

#define FIRST_BUCKETS 64

/* The link that points at `key`'s entry, or the NULL link ending its chain. The link is an entry's first member. */
static tc_hlink_t **slot_of(tc_store_table_t *t, const uint8_t *key, uint32_t klen, uint64_t h)
{
    tc_hlink_t **p = tc_htable_chain(&t->h, h);
    for (; *p != NULL; p = &(*p)->next) {
        const tc_store_entry_t *e = (const tc_store_entry_t *)*p;
        if (e->link.hash == h && e->klen == klen && memcmp(e->key, key, klen) == 0)
            break;
    }
    return p;
}

int tc_store_table_init(tc_store_table_t *t)
{
    t->bytes = 0;
    return tc_htable_init(&t->h, FIRST_BUCKETS);
}

tc_store_entry_t *tc_store_table_find(tc_store_table_t *t, const uint8_t *key, uint32_t klen)
{
    return (tc_store_entry_t *)*slot_of(t, key, klen, tc_hash_bytes(key, klen));
}

int tc_store_table_set(tc_store_table_t *t, const uint8_t *key, uint32_t klen, const uint8_t *value, uint32_t vlen)
{
    uint8_t *copy = malloc(vlen > 0 ? vlen : 1);
    if (copy == NULL)
        return -1;
    if (vlen > 0)
        memcpy(copy, value, vlen);
    uint64_t h = tc_hash_bytes(key, klen);
    tc_store_entry_t *e = (tc_store_entry_t *)*slot_of(t, key, klen, h);
    if (e == NULL) {
        e = malloc(sizeof(*e) + klen);
        if (e == NULL) {
            free(copy);
            return -1;
        }
        *e = (tc_store_entry_t){.link.hash = h, .klen = klen};
        memcpy(e->key, key, klen);
        tc_htable_insert(&t->h, &e->link);
        t->bytes += TC_STORE_ENTRY_OVERHEAD + klen;
    }
    t->bytes = t->bytes - e->vlen + vlen;
    free(e->value);
    e->value = copy;
    e->vlen = vlen;
    return 0;
}

static void free_entry(tc_hlink_t *link, void *arg)
{
    tc_store_table_t *t = arg;
    tc_store_entry_t *e = (tc_store_entry_t *)link;
    t->bytes -= TC_STORE_ENTRY_OVERHEAD + e->klen + e->vlen;
    free(e->value);
    free(e);
}

void tc_store_table_del(tc_store_table_t *t, const uint8_t *key, uint32_t klen)
{
    tc_hlink_t **slot = slot_of(t, key, klen, tc_hash_bytes(key, klen));
    if (*slot != NULL)
        free_entry(tc_htable_unlink(&t->h, slot), t);
}

int64_t tc_store_table_del_prefix(tc_store_table_t *t, const uint8_t *prefix, uint32_t plen)
{
    int64_t removed = 0;
    for (size_t i = 0; i < t->h.nbuckets; i++) {
        for (tc_hlink_t **p = &t->h.buckets[i]; *p != NULL;) {
            const tc_store_entry_t *e = (const tc_store_entry_t *)*p;
            if (e->klen >= plen && memcmp(e->key, prefix, plen) == 0) {
                free_entry(tc_htable_unlink(&t->h, p), t);
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
    tc_htable_free(&t->h, free_entry, t);
}
