/* SPDX-License-Identifier: BSD-3-Clause */
/* The store operations every caller uses: argument checks done once here, then dispatch to the TCP client
 * (client.c) or the user-callback adapter (user.c) through the handle's table (impl.h). */
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "impl.h"

static tcomms_status_t check_store(const tcomms_store_t *s, const char *op)
{
    if (s == NULL || s->vt == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "store %s: store is NULL", op);
    return TCOMMS_SUCCESS;
}

static tcomms_status_t check_key(const char *key, const char *what, const char *op)
{
    if (key == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "store %s: %s is NULL", op, what);
    size_t n = strlen(key);
    if (n > TC_STORE_MAX_KEY)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "store %s: %s '%.64s...' is %zu bytes, over TC_STORE_MAX_KEY (%u)", op,
                        what, key, n, TC_STORE_MAX_KEY);
    return TCOMMS_SUCCESS;
}

tcomms_status_t tc_store_set(tcomms_store_t *s, const char *key, const void *value, size_t len)
{
    tcomms_status_t st = check_store(s, "set");
    if (st == TCOMMS_SUCCESS)
        st = check_key(key, "key", "set");
    if (st != TCOMMS_SUCCESS)
        return st;
    if (value == NULL && len > 0)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "store set '%s': value is NULL with len %zu", key, len);
    if (len > TC_STORE_MAX_VALUE)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "store set '%s': len %zu is over TC_STORE_MAX_VALUE (%u)", key, len,
                        TC_STORE_MAX_VALUE);
    return s->vt->set(s, key, len > 0 ? value : "", len);
}

tcomms_status_t tc_store_get(tcomms_store_t *s, const char *key, void **value, size_t *len, uint32_t timeout_ms)
{
    tcomms_status_t st = check_store(s, "get");
    if (st == TCOMMS_SUCCESS)
        st = check_key(key, "key", "get");
    if (st != TCOMMS_SUCCESS)
        return st;
    if (value == NULL || len == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "store get '%s': %s is NULL", key, value == NULL ? "value" : "len");
    *value = NULL;
    *len = 0;
    return s->vt->get(s, key, value, len, timeout_ms);
}

tcomms_status_t tc_store_wait(tcomms_store_t *s, const char *const *keys, size_t nkeys, uint32_t timeout_ms)
{
    tcomms_status_t st = check_store(s, "wait");
    if (st != TCOMMS_SUCCESS)
        return st;
    if (nkeys == 0)
        return TCOMMS_SUCCESS;
    if (keys == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "store wait: keys is NULL with nkeys %zu", nkeys);
    if (nkeys > TC_STORE_MAX_KEYS)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "store wait: nkeys %zu is over TC_STORE_MAX_KEYS (%u)", nkeys,
                        TC_STORE_MAX_KEYS);
    for (size_t i = 0; i < nkeys; i++) {
        char what[32];
        snprintf(what, sizeof(what), "keys[%zu]", i);
        if ((st = check_key(keys[i], what, "wait")) != TCOMMS_SUCCESS)
            return st;
    }
    return s->vt->wait(s, keys, nkeys, timeout_ms);
}

tcomms_status_t tc_store_add(tcomms_store_t *s, const char *key, int64_t delta, int64_t *result)
{
    tcomms_status_t st = check_store(s, "add");
    if (st == TCOMMS_SUCCESS)
        st = check_key(key, "key", "add");
    if (st != TCOMMS_SUCCESS)
        return st;
    int64_t ignored;
    return s->vt->add(s, key, delta, result != NULL ? result : &ignored);
}

tcomms_status_t tc_store_del(tcomms_store_t *s, const char *key)
{
    tcomms_status_t st = check_store(s, "del");
    if (st == TCOMMS_SUCCESS)
        st = check_key(key, "key", "del");
    if (st != TCOMMS_SUCCESS)
        return st;
    return s->vt->del(s, key);
}

tcomms_status_t tc_store_del_prefix(tcomms_store_t *s, const char *prefix)
{
    tcomms_status_t st = check_store(s, "del_prefix");
    if (st == TCOMMS_SUCCESS)
        st = check_key(prefix, "prefix", "del_prefix");
    if (st != TCOMMS_SUCCESS)
        return st;
    return s->vt->del_prefix(s, prefix);
}

tcomms_status_t tc_store_num_keys(tcomms_store_t *s, int64_t *count)
{
    tcomms_status_t st = check_store(s, "num_keys");
    if (st != TCOMMS_SUCCESS)
        return st;
    if (count == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "store num_keys: count is NULL");
    return s->vt->num_keys(s, count);
}

void tc_store_free(tcomms_store_t *s)
{
    if (s != NULL && s->vt != NULL)
        s->vt->destroy(s);
}
