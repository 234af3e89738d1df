/* SPDX-License-Identifier: BSD-3-Clause */
/* Small exchanges over the store through rank 0, for agreements that must not cost N^2 store requests: every
 * other rank sets one key and reads one key, rank 0 reads N - 1 keys and sets one (3N requests in all). Used by
 * split_color (the color table), the call check (descriptions of a call, then the verdict), and through the core
 * table by backends (UCX's worker addresses). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "store.h"

tcomms_status_t tc_store_gather0(tcomms_store_t *s, const char *prefix, int rank, int size, const void *mine,
                                 size_t len, uint32_t timeout_ms, void **vals, size_t *lens, int *missing)
{
    char key[TC_STORE_MAX_KEY];
    if (rank != 0) {
        snprintf(key, sizeof(key), "%s%d", prefix, rank);
        return tc_store_set(s, key, mine, len);
    }
    memset(vals, 0, (size_t)size * sizeof(*vals));
    if ((vals[0] = malloc(len ? len : 1)) == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "out of memory");
    memcpy(vals[0], mine, len);
    lens[0] = len;
    for (int r = 1; r < size; r++) {
        snprintf(key, sizeof(key), "%s%d", prefix, r);
        tcomms_status_t st = tc_store_get(s, key, &vals[r], &lens[r], timeout_ms);
        if (st != TCOMMS_SUCCESS) {
            *missing = r;
            tc_store_free_values(vals, size);
            return st;
        }
    }
    return TCOMMS_SUCCESS;
}

tcomms_status_t tc_store_bcast0(tcomms_store_t *s, const char *prefix, int rank, void **val, size_t *len,
                                uint32_t timeout_ms)
{
    char key[TC_STORE_MAX_KEY];
    snprintf(key, sizeof(key), "%sall", prefix);
    if (rank == 0)
        return tc_store_set(s, key, *val, *len);
    *val = NULL;
    return tc_store_get(s, key, val, len, timeout_ms);
}

/* The table rank 0 publishes: size lengths (uint64_t), then the values one after the other. */
static void *pack(void *const *vals, const size_t *lens, int size, size_t *out_len)
{
    size_t total = (size_t)size * sizeof(uint64_t);
    for (int r = 0; r < size; r++)
        total += lens[r];
    unsigned char *t = malloc(total);
    if (t == NULL)
        return NULL;
    unsigned char *at = t + (size_t)size * sizeof(uint64_t);
    for (int r = 0; r < size; r++) {
        uint64_t l = lens[r];
        memcpy(t + (size_t)r * sizeof(l), &l, sizeof(l));
        memcpy(at, vals[r], lens[r]);
        at += lens[r];
    }
    *out_len = total;
    return t;
}

static tcomms_status_t unpack(const unsigned char *t, size_t len, int size, void **vals, size_t *lens)
{
    size_t head = (size_t)size * sizeof(uint64_t), at = head;
    for (int r = 0; r < size && len >= head; r++) {
        uint64_t l;
        memcpy(&l, t + (size_t)r * sizeof(l), sizeof(l));
        if (l > len - at)
            break;
        if ((vals[r] = malloc(l ? l : 1)) == NULL) {
            tc_store_free_values(vals, r);
            return tc_error(TCOMMS_ERR_NO_MEMORY, "out of memory");
        }
        memcpy(vals[r], t + at, l);
        lens[r] = l;
        at += l;
        if (r == size - 1 && at == len)
            return TCOMMS_SUCCESS;
    }
    tc_store_free_values(vals, size);
    return tc_error(TCOMMS_ERR_PROTOCOL, "rank 0's table of %d values is malformed (%zu bytes)", size, len);
}

tcomms_status_t tc_store_allgather(tcomms_store_t *s, const char *prefix, int rank, int size, const void *mine,
                                   size_t len, uint32_t timeout_ms, void **vals, size_t *lens, int *missing)
{
    memset(vals, 0, (size_t)size * sizeof(*vals));
    *missing = -1;
    tcomms_status_t st = tc_store_gather0(s, prefix, rank, size, mine, len, timeout_ms, vals, lens, missing);
    void *table = NULL;
    size_t tlen = 0;
    if (st == TCOMMS_SUCCESS && rank == 0) { /* rank 0 has every value already: it only publishes them */
        table = pack(vals, lens, size, &tlen);
        st = table ? tc_store_bcast0(s, prefix, rank, &table, &tlen, timeout_ms)
                   : tc_error(TCOMMS_ERR_NO_MEMORY, "out of memory");
        if (st != TCOMMS_SUCCESS)
            tc_store_free_values(vals, size);
    } else if (st == TCOMMS_SUCCESS) {
        if ((st = tc_store_bcast0(s, prefix, rank, &table, &tlen, timeout_ms)) != TCOMMS_SUCCESS)
            *missing = 0;
        else
            st = unpack(table, tlen, size, vals, lens);
    }
    free(table);
    return st;
}

void tc_store_free_values(void **vals, int n)
{
    for (int r = 0; r < n; r++) {
        free(vals[r]);
        vals[r] = NULL;
    }
}
