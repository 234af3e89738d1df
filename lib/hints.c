/* SPDX-License-Identifier: BSD-3-Clause */
/* Hints (CommOptions): a small ordered key/value set. Every key and value is validated here, once, so backends
 * only ever see canonical keys with well-formed values. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "error.h"
#include "handle.h"
#include "hash.h" /* lib/util/hash.h */
#include "hints.h"
#include "loader.h"

typedef enum { HINT_BOOL, HINT_INT } hint_kind_t;

static const struct hint_def {
    const char *key;          /* canonical */
    const char *aliases[3];   /* other accepted spellings (torchcomms' current and camelCase names) */
    hint_kind_t kind;
    long min, max;
} hint_defs[] = {
    {"high_priority_stream", {"is_high_priority_stream", "highPriorityStream", NULL}, HINT_BOOL, 0, 1},
    {"cga_cluster_size", {"cgaClusterSize", NULL, NULL}, HINT_INT, 0, 8},
    {"min_ctas", {"minCTAs", NULL, NULL}, HINT_INT, 1, 64},
    {"max_ctas", {"maxCTAs", NULL, NULL}, HINT_INT, 1, 64},
    {"blocking", {NULL, NULL, NULL}, HINT_BOOL, 0, 1},
    {"split_share", {"splitShare", NULL, NULL}, HINT_BOOL, 0, 1},
    {"strict_hints", {"strictHints", NULL, NULL}, HINT_BOOL, 0, 1},
};
#define N_HINT_DEFS (sizeof(hint_defs) / sizeof(hint_defs[0]))

#define TC_HINT_MAX_LEN 256

/* Entries in insertion order, found by key through an open-addressing index (so parsing n entries is linear). */
struct tcomms_hints {
    uint32_t magic; /* handle.h */
    size_t count, cap;
    struct entry {
        char *key, *value;
    } *entries;
    size_t *index;    /* entry number + 1 per slot, 0 for an empty slot; no entry is ever removed */
    size_t index_cap; /* a power of two, at least twice count */
};

static tcomms_status_t check(const tcomms_hints_t *hints, const char *who)
{
    return tc_handle_check(hints, TC_HANDLE_HINTS, who, "hints");
}

/* The index slot holding `key`, or the empty slot where it would go. */
static size_t *slot_of(const tcomms_hints_t *hints, const char *key)
{
    size_t mask = hints->index_cap - 1;
    for (size_t i = (size_t)tc_hash_bytes(key, strlen(key)) & mask;; i = (i + 1) & mask) {
        size_t *slot = &hints->index[i];
        if (*slot == 0 || strcmp(hints->entries[*slot - 1].key, key) == 0)
            return slot;
    }
}

/* Room in the index for one more entry: rebuilt twice as large when it would pass half full. */
static int index_reserve(tcomms_hints_t *hints)
{
    if (2 * (hints->count + 1) <= hints->index_cap)
        return 0;
    size_t cap = hints->index_cap ? 2 * hints->index_cap : 16;
    size_t *index = calloc(cap, sizeof(*index)), *old = hints->index;
    if (index == NULL)
        return -1;
    hints->index = index;
    hints->index_cap = cap;
    for (size_t i = 0; i < hints->count; i++)
        *slot_of(hints, hints->entries[i].key) = i + 1;
    free(old);
    return 0;
}

static const struct hint_def *find_def(const char *key)
{
    for (size_t i = 0; i < N_HINT_DEFS; i++) {
        if (strcmp(key, hint_defs[i].key) == 0)
            return &hint_defs[i];
        for (int a = 0; a < 3 && hint_defs[i].aliases[a] != NULL; a++)
            if (strcmp(key, hint_defs[i].aliases[a]) == 0)
                return &hint_defs[i];
    }
    return NULL;
}

/* A key "<module>.<rest>" is a module's own: the core checks only that a module of that name exists in the search
 * path (the file, not opened: setting a hint must not load a GPU library), and the module checks the rest when a
 * communicator is created. Which modules exist is the loader's knowledge; no module is named here. */
static tcomms_status_t check_namespaced(const char *key)
{
    const char *dot = strchr(key, '.');
    char ns[64];
    if (dot != NULL && dot[1] != '\0' && (size_t)(dot - key) < sizeof(ns)) {
        snprintf(ns, sizeof(ns), "%.*s", (int)(dot - key), key);
        if (tc_backend_exists(ns))
            return TCOMMS_SUCCESS;
    }
    char names[256];
    tc_backend_names(names, sizeof(names));
    if (dot == NULL || dot[1] == '\0' || dot == key) {
        char known[256] = "";
        for (size_t i = 0, at = 0; i < N_HINT_DEFS && at < sizeof(known); i++) {
            int n = snprintf(known + at, sizeof(known) - at, "%s, ", hint_defs[i].key);
            at += n > 0 ? (size_t)n : 0;
        }
        return tc_error(TCOMMS_ERR_INVALID_ARG, "unknown hint '%s' (known: %sor '<module>.<key>' for a module in the "
                        "search path: %s)", key, known, names[0] ? names : "none found");
    }
    return tc_error(TCOMMS_ERR_INVALID_ARG, "hint '%s': no backend module '%.*s' in the search path (modules: %s), so "
                    "nothing would read it", key, (int)(dot - key), key, names[0] ? names : "none found");
}

tcomms_status_t tc_hint_check_key(const char *key, const char **canonical)
{
    const struct hint_def *def = find_def(key);
    if (def != NULL) {
        *canonical = def->key;
        return TCOMMS_SUCCESS;
    }
    *canonical = key; /* the module validates its own keys */
    return check_namespaced(key);
}

const char *tc_hint_canonical(const char *key)
{
    const struct hint_def *def = key ? find_def(key) : NULL;
    return def ? def->key : NULL;
}

tcomms_status_t tcomms_hints_create(tcomms_hints_t **out)
{
    if (out == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_hints_create: out is NULL");
    *out = calloc(1, sizeof(**out));
    if (*out == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "tcomms_hints_create: out of memory");
    (*out)->magic = tc_handle_magic[TC_HANDLE_HINTS];
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcomms_hints_free(tcomms_hints_t *hints)
{
    if (hints == NULL)
        return TCOMMS_SUCCESS;
    tcomms_status_t st = check(hints, "tcomms_hints_free");
    if (st != TCOMMS_SUCCESS)
        return st;
    for (size_t i = 0; i < hints->count; i++) {
        free(hints->entries[i].key);
        free(hints->entries[i].value);
    }
    free(hints->entries);
    free(hints->index);
    tc_handle_retire(hints, TC_HANDLE_HINTS);
    return TCOMMS_SUCCESS;
}

/* Validate one pair; *canonical receives the key to store it under. */
static tcomms_status_t check_pair(const char *key, const char *value, const char **canonical)
{
    if (key == NULL || *key == '\0')
        return tc_error(TCOMMS_ERR_INVALID_ARG, "hint key is %s", key ? "empty" : "NULL");
    if (value == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "hint '%s': value is NULL", key);
    if (strlen(key) >= TC_HINT_MAX_LEN || strlen(value) >= TC_HINT_MAX_LEN)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "hint '%.32s...': key or value longer than %d characters", key,
                        TC_HINT_MAX_LEN - 1);
    tcomms_status_t st = tc_hint_check_key(key, canonical);
    const struct hint_def *def = find_def(key);
    if (st != TCOMMS_SUCCESS || def == NULL)
        return st;
    if (def->kind == HINT_BOOL) {
        int b;
        if (tc_parse_bool(value, key, &b) != TCOMMS_SUCCESS)
            return tc_error(TCOMMS_ERR_INVALID_ARG, "hint '%s': '%s' is not a boolean (1/0, true/false, yes/no)",
                            key, value);
    } else {
        long v;
        if (tc_parse_int(value, def->min, def->max, key, &v) != TCOMMS_SUCCESS)
            return tc_error(TCOMMS_ERR_INVALID_ARG, "hint '%s': '%s' is not an integer in [%ld, %ld]", key, value,
                            def->min, def->max);
    }
    return TCOMMS_SUCCESS;
}

static struct entry *find_entry(const tcomms_hints_t *hints, const char *canonical)
{
    size_t *slot = hints->index_cap ? slot_of(hints, canonical) : NULL;
    return slot != NULL && *slot != 0 ? &hints->entries[*slot - 1] : NULL;
}

tcomms_status_t tcomms_hints_set(tcomms_hints_t *hints, const char *key, const char *value)
{
    tcomms_status_t st = check(hints, "tcomms_hints_set");
    if (st != TCOMMS_SUCCESS)
        return st;
    const char *canonical;
    st = check_pair(key, value, &canonical);
    if (st != TCOMMS_SUCCESS)
        return st;
    char *v = strdup(value);
    if (v == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "tcomms_hints_set: out of memory");
    struct entry *e = find_entry(hints, canonical);
    if (e != NULL) {
        free(e->value);
        e->value = v;
        return TCOMMS_SUCCESS;
    }
    if (hints->count == hints->cap) {
        size_t cap = hints->cap ? hints->cap * 2 : 8;
        struct entry *grown = realloc(hints->entries, cap * sizeof(*grown));
        if (grown == NULL) {
            free(v);
            return tc_error(TCOMMS_ERR_NO_MEMORY, "tcomms_hints_set: out of memory");
        }
        hints->entries = grown;
        hints->cap = cap;
    }
    char *k = index_reserve(hints) == 0 ? strdup(canonical) : NULL;
    if (k == NULL) {
        free(v);
        return tc_error(TCOMMS_ERR_NO_MEMORY, "tcomms_hints_set: out of memory");
    }
    *slot_of(hints, k) = hints->count + 1;
    hints->entries[hints->count++] = (struct entry){k, v};
    return TCOMMS_SUCCESS;
}

/* Trim spaces in place: "  a = b " gives "a" and "b". */
static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = '\0';
    return s;
}

tcomms_status_t tcomms_hints_parse(tcomms_hints_t *hints, const char *spec)
{
    tcomms_status_t st = check(hints, "tcomms_hints_parse");
    if (st != TCOMMS_SUCCESS)
        return st;
    if (spec == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_hints_parse: spec is NULL");
    char *copy = strdup(spec);
    if (copy == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "tcomms_hints_parse: out of memory");
    /* Validate the whole spec before changing `hints`, so a bad spec leaves it untouched. */
    for (int pass = 0; pass < 2 && st == TCOMMS_SUCCESS; pass++) {
        strcpy(copy, spec);
        char *save = NULL;
        for (char *item = strtok_r(copy, ",", &save); item != NULL && st == TCOMMS_SUCCESS;
             item = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(item, '=');
            if (eq == NULL) {
                if (*trim(item) == '\0')
                    continue; /* tolerate "a=1,,b=2" and a trailing comma */
                st = tc_error(TCOMMS_ERR_INVALID_ARG, "hints '%s': item '%s' is not key=value", spec, trim(item));
                break;
            }
            *eq = '\0';
            const char *key = trim(item), *value = trim(eq + 1), *canonical;
            st = pass == 0 ? check_pair(key, value, &canonical) : tcomms_hints_set(hints, key, value);
        }
    }
    free(copy);
    return st;
}

tcomms_status_t tcomms_hints_get(const tcomms_hints_t *hints, const char *key, const char **value)
{
    tcomms_status_t st = check(hints, "tcomms_hints_get");
    if (st != TCOMMS_SUCCESS)
        return st;
    if (key == NULL || value == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_hints_get: %s is NULL", key == NULL ? "key" : "value");
    const char *canonical = tc_hint_canonical(key);
    struct entry *e = find_entry(hints, canonical ? canonical : key);
    if (e == NULL)
        return tc_error(TCOMMS_ERR_NOT_FOUND, "hint '%s' is not set", key);
    *value = e->value;
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcomms_hints_count(const tcomms_hints_t *hints, size_t *count)
{
    tcomms_status_t st = check(hints, "tcomms_hints_count");
    if (st != TCOMMS_SUCCESS)
        return st;
    if (count == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_hints_count: count is NULL");
    *count = hints->count;
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcomms_hints_entry(const tcomms_hints_t *hints, size_t i, const char **key, const char **value)
{
    tcomms_status_t st = check(hints, "tcomms_hints_entry");
    if (st != TCOMMS_SUCCESS)
        return st;
    if (key == NULL || value == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_hints_entry: %s is NULL", key == NULL ? "key" : "value");
    if (i >= hints->count)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_hints_entry: index %zu out of range (count %zu)", i,
                        hints->count);
    *key = hints->entries[i].key;
    *value = hints->entries[i].value;
    return TCOMMS_SUCCESS;
}

tcomms_status_t tc_hints_merge(tcomms_hints_t *dst, const tcomms_hints_t *src)
{
    if (src != NULL && check(src, "hints given to a communicator") != TCOMMS_SUCCESS)
        return TCOMMS_ERR_INVALID_ARG;
    for (size_t i = 0; src != NULL && i < src->count; i++) {
        tcomms_status_t st = tcomms_hints_set(dst, src->entries[i].key, src->entries[i].value);
        if (st != TCOMMS_SUCCESS)
            return st;
    }
    return TCOMMS_SUCCESS;
}

tcomms_status_t tc_hints_check(const tcomms_hints_t *hints)
{
    const char *lo, *hi;
    if (hints != NULL && tcomms_hints_get(hints, "min_ctas", &lo) == TCOMMS_SUCCESS &&
        tcomms_hints_get(hints, "max_ctas", &hi) == TCOMMS_SUCCESS && atol(lo) > atol(hi))
        return tc_error(TCOMMS_ERR_INVALID_ARG, "hints: min_ctas (%s) is greater than max_ctas (%s)", lo, hi);
    tc_error_clear();
    return TCOMMS_SUCCESS;
}
