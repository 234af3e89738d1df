/* SPDX-License-Identifier: BSD-3-Clause */
/* The key table of the store server (server.c): byte-string keys to byte-string values in the growing hash table
 * of lib/hash.h. Not thread-safe: the server thread alone owns it. */
#ifndef TC_STORE_TABLE_H
#define TC_STORE_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "hash.h" /* lib/util/hash.h */

typedef struct tc_store_entry {
    tc_hlink_t link; /* first: the table's links are entries */
    uint8_t *value; /* never NULL, even for an empty value */
    uint32_t vlen, klen;
    uint8_t key[];
} tc_store_entry_t;

/* What one entry costs the server besides its key and value bytes, as the store's byte budget counts it. */
#define TC_STORE_ENTRY_OVERHEAD sizeof(tc_store_entry_t)

typedef struct tc_store_table {
    tc_htable_t h;  /* h.count: the keys held */
    uint64_t bytes; /* keys, values and TC_STORE_ENTRY_OVERHEAD per entry */
} tc_store_table_t;

/* 0, or -1 when out of memory. */
int tc_store_table_init(tc_store_table_t *t);
tc_store_entry_t *tc_store_table_find(tc_store_table_t *t, const uint8_t *key, uint32_t klen);
/* Store a copy of value: 0, or -1 when out of memory (the table is then unchanged). */
int tc_store_table_set(tc_store_table_t *t, const uint8_t *key, uint32_t klen, const uint8_t *value, uint32_t vlen);
void tc_store_table_del(tc_store_table_t *t, const uint8_t *key, uint32_t klen);
/* Remove every key starting with prefix; returns how many went. */
int64_t tc_store_table_del_prefix(tc_store_table_t *t, const uint8_t *prefix, uint32_t plen);
void tc_store_table_free(tc_store_table_t *t);

#endif
