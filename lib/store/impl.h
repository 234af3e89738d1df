/* SPDX-License-Identifier: BSD-3-Clause */
/* The store handle behind the opaque tcomms_store_t: a table of operations that client.c (TCP) and
 * user.c (user callbacks) each fill, and that store.c dispatches through after validating arguments once. */
#ifndef TC_STORE_IMPL_H
#define TC_STORE_IMPL_H

#include "store.h"

/* Arguments reach these already checked by store.c (non-NULL, within the protocol limits, nkeys > 0). */
typedef struct tc_store_vtable {
    tcomms_status_t (*set)(tcomms_store_t *s, const char *key, const void *value, size_t len);
    tcomms_status_t (*get)(tcomms_store_t *s, const char *key, void **value, size_t *len, uint32_t timeout_ms);
    tcomms_status_t (*wait)(tcomms_store_t *s, const char *const *keys, size_t nkeys, uint32_t timeout_ms);
    tcomms_status_t (*add)(tcomms_store_t *s, const char *key, int64_t delta, int64_t *result);
    tcomms_status_t (*del)(tcomms_store_t *s, const char *key);
    tcomms_status_t (*del_prefix)(tcomms_store_t *s, const char *prefix);
    tcomms_status_t (*num_keys)(tcomms_store_t *s, int64_t *count);
    void (*destroy)(tcomms_store_t *s);
} tc_store_vtable_t;

/* The base every implementation embeds as its first member. */
struct tcomms_store {
    const tc_store_vtable_t *vt;
};

#endif
