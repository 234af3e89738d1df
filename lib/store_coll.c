/* Small exchanges over the store through rank 0, for agreements that must not cost N^2 store requests: every
 * other rank sets one key and reads one key, rank 0 reads N - 1 keys and sets one (3N requests in all). Used by
 * split_color (the color table) and the call check (descriptions of a call, then the verdict). */
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

void tc_store_free_values(void **vals, int n)
{
    for (int r = 0; r < n; r++) {
        free(vals[r]);
        vals[r] = NULL;
    }
}
