/* SPDX-License-Identifier: BSD-3-Clause */
/* tc_store_from_ops: the store operations over user callbacks (tcomms_store_ops_t), e.g. a framework's own
 * TCPStore. The callbacks are borrowed, not copied; what they cannot do is TCOMMS_ERR_NOT_SUPPORTED. Callbacks
 * cannot set our detailed message, so every failure here is reworded to name the call and key. */
#include <stdlib.h>

#include "error.h"
#include "impl.h"

#define FIRST_GET_GUESS 256u /* most rendezvous values (addresses, ids) fit */
#define GET_ATTEMPTS 8       /* a value may grow between the size probe and the copy; give up after this many */

typedef struct user_store {
    tcomms_store_t super;
    const tcomms_store_ops_t *ops;
    void *ctx;
} user_store_t;

static tcomms_status_t failed(tcomms_status_t st, const char *what, const char *key)
{
    return tc_error(st, "user store %s('%s') failed: %s", what, key, tcomms_strerror(st));
}

static tcomms_status_t user_set(tcomms_store_t *base, const char *key, const void *value, size_t len)
{
    user_store_t *s = (user_store_t *)base;
    tcomms_status_t st = s->ops->set(s->ctx, key, value, len);
    return st == TCOMMS_SUCCESS ? st : failed(st, "set", key);
}

static tcomms_status_t user_wait(tcomms_store_t *base, const char *const *keys, size_t nkeys, uint32_t timeout_ms)
{
    user_store_t *s = (user_store_t *)base;
    tcomms_status_t st = s->ops->wait(s->ctx, keys, nkeys, timeout_ms);
    if (st != TCOMMS_ERR_TIMEOUT)
        return st == TCOMMS_SUCCESS ? st : failed(st, "wait", keys[0]);
    /* The callback does not say which key is missing: ask get() with no room, which answers NOT_FOUND for it. */
    for (size_t i = 0; i < nkeys; i++) {
        unsigned char none;
        size_t len = 0;
        if (s->ops->get(s->ctx, keys[i], &none, 0, &len) == TCOMMS_ERR_NOT_FOUND)
            return tc_error(TCOMMS_ERR_TIMEOUT, "user store wait: key '%s' not set within %u ms", keys[i],
                            timeout_ms);
    }
    return tc_error(TCOMMS_ERR_TIMEOUT, "user store wait: %zu key(s) starting with '%s' not all set within %u ms",
                    nkeys, keys[0], timeout_ms);
}

static tcomms_status_t user_get(tcomms_store_t *base, const char *key, void **value, size_t *len, uint32_t timeout_ms)
{
    user_store_t *s = (user_store_t *)base;
    tcomms_status_t st = user_wait(base, &key, 1, timeout_ms);
    if (st != TCOMMS_SUCCESS)
        return st;
    size_t cap = FIRST_GET_GUESS;
    for (int attempt = 0; attempt < GET_ATTEMPTS; attempt++) {
        unsigned char *buf = malloc(cap + 1);
        if (buf == NULL)
            return tc_error(TCOMMS_ERR_NO_MEMORY, "user store get('%s'): out of memory for %zu bytes", key, cap);
        size_t n = 0;
        st = s->ops->get(s->ctx, key, buf, cap, &n);
        if ((st == TCOMMS_SUCCESS || st == TCOMMS_ERR_INVALID_ARG) && n > cap) {
            free(buf);
            if (n > TC_STORE_MAX_VALUE)
                return tc_error(TCOMMS_ERR_PROTOCOL, "user store get('%s'): value of %zu bytes is over %u", key, n,
                                TC_STORE_MAX_VALUE);
            cap = n; /* too small: the callback told us the size it needs */
            continue;
        }
        if (st != TCOMMS_SUCCESS) {
            free(buf);
            return failed(st, "get", key);
        }
        buf[n] = '\0';
        *value = buf;
        *len = n;
        return TCOMMS_SUCCESS;
    }
    return tc_error(TCOMMS_ERR_INTERNAL, "user store get('%s'): the value kept growing over %d attempts", key,
                    GET_ATTEMPTS);
}

static tcomms_status_t user_add(tcomms_store_t *base, const char *key, int64_t delta, int64_t *result)
{
    user_store_t *s = (user_store_t *)base;
    if (s->ops->add == NULL)
        return tc_error(TCOMMS_ERR_NOT_SUPPORTED, "user store add('%s'): ops->add is NULL", key);
    tcomms_status_t st = s->ops->add(s->ctx, key, delta, result);
    return st == TCOMMS_SUCCESS ? st : failed(st, "add", key);
}

static tcomms_status_t user_del(tcomms_store_t *base, const char *key)
{
    user_store_t *s = (user_store_t *)base;
    if (s->ops->del == NULL)
        return tc_error(TCOMMS_ERR_NOT_SUPPORTED, "user store del('%s'): ops->del is NULL", key);
    tcomms_status_t st = s->ops->del(s->ctx, key);
    return st == TCOMMS_SUCCESS ? st : failed(st, "del", key);
}

static tcomms_status_t user_del_prefix(tcomms_store_t *base, const char *prefix)
{
    (void)base;
    return tc_error(TCOMMS_ERR_NOT_SUPPORTED, "user store del_prefix('%s'): tcomms_store_ops_t has no such call",
                    prefix);
}

static tcomms_status_t user_num_keys(tcomms_store_t *base, int64_t *count)
{
    (void)base;
    (void)count;
    return tc_error(TCOMMS_ERR_NOT_SUPPORTED, "user store num_keys: tcomms_store_ops_t has no such call");
}

static void user_destroy(tcomms_store_t *base)
{
    free(base);
}

static const tc_store_vtable_t user_vtable = {
    .set = user_set,
    .get = user_get,
    .wait = user_wait,
    .add = user_add,
    .del = user_del,
    .del_prefix = user_del_prefix,
    .num_keys = user_num_keys,
    .destroy = user_destroy,
};

tcomms_status_t tc_store_from_ops(const tcomms_store_ops_t *ops, void *ctx, tcomms_store_t **out)
{
    if (out == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "store from_ops: out is NULL");
    *out = NULL;
    if (ops == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "store from_ops: ops is NULL");
    const char *missing = ops->set == NULL ? "set" : ops->get == NULL ? "get" : ops->wait == NULL ? "wait" : NULL;
    if (missing != NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "store from_ops: ops->%s is NULL (set, get and wait are required)",
                        missing);
    user_store_t *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "store from_ops: out of memory");
    s->super.vt = &user_vtable;
    s->ops = ops;
    s->ctx = ctx;
    *out = &s->super;
    return TCOMMS_SUCCESS;
}
