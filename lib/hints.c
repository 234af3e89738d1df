/* Hints (CommOptions): a small ordered key/value set. Every key and value is validated here, once, so backends
 * only ever see canonical keys with well-formed values. */
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "error.h"
#include "hints.h"

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
};
#define N_HINT_DEFS (sizeof(hint_defs) / sizeof(hint_defs[0]))

const char *const tc_hint_keys[] = {"high_priority_stream", "cga_cluster_size", "min_ctas", "max_ctas", "blocking",
                                    "split_share", NULL};

static const char *const namespaces[] = {"nccl.", "gloo.", "ucx."};

#define TC_HINT_MAX_LEN 256

struct tcomms_hints {
    size_t count, cap;
    struct entry {
        char *key, *value;
    } *entries;
};

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

static int is_namespaced(const char *key)
{
    for (size_t i = 0; i < sizeof(namespaces) / sizeof(namespaces[0]); i++) {
        size_t n = strlen(namespaces[i]);
        if (strncmp(key, namespaces[i], n) == 0 && key[n] != '\0')
            return 1;
    }
    return 0;
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
    return *out ? TCOMMS_SUCCESS : tc_error(TCOMMS_ERR_NO_MEMORY, "tcomms_hints_create: out of memory");
}

void tcomms_hints_free(tcomms_hints_t *hints)
{
    if (hints == NULL)
        return;
    for (size_t i = 0; i < hints->count; i++) {
        free(hints->entries[i].key);
        free(hints->entries[i].value);
    }
    free(hints->entries);
    free(hints);
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
    const struct hint_def *def = find_def(key);
    if (def == NULL) {
        if (!is_namespaced(key))
            return tc_error(TCOMMS_ERR_INVALID_ARG,
                            "unknown hint '%s' (known: high_priority_stream, cga_cluster_size, min_ctas, max_ctas, "
                            "blocking, split_share, or a backend key nccl.*, gloo.*, ucx.*)",
                            key);
        *canonical = key; /* the backend validates its own keys */
        return TCOMMS_SUCCESS;
    }
    *canonical = def->key;
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
    for (size_t i = 0; i < hints->count; i++)
        if (strcmp(hints->entries[i].key, canonical) == 0)
            return &hints->entries[i];
    return NULL;
}

tcomms_status_t tcomms_hints_set(tcomms_hints_t *hints, const char *key, const char *value)
{
    if (hints == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_hints_set: hints is NULL");
    const char *canonical;
    tcomms_status_t st = check_pair(key, value, &canonical);
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
    char *k = strdup(canonical);
    if (k == NULL) {
        free(v);
        return tc_error(TCOMMS_ERR_NO_MEMORY, "tcomms_hints_set: out of memory");
    }
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
    if (hints == NULL || spec == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_hints_parse: %s is NULL", hints ? "spec" : "hints");
    char *copy = strdup(spec);
    if (copy == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "tcomms_hints_parse: out of memory");
    /* Validate the whole spec before changing `hints`, so a bad spec leaves it untouched. */
    tcomms_status_t st = TCOMMS_SUCCESS;
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
    if (hints == NULL || key == NULL || value == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_hints_get: %s is NULL",
                        hints == NULL ? "hints" : key == NULL ? "key" : "value");
    const char *canonical = tc_hint_canonical(key);
    struct entry *e = find_entry(hints, canonical ? canonical : key);
    if (e == NULL)
        return tc_error(TCOMMS_ERR_NOT_FOUND, "hint '%s' is not set", key);
    *value = e->value;
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcomms_hints_count(const tcomms_hints_t *hints, size_t *count)
{
    if (hints == NULL || count == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_hints_count: %s is NULL", hints ? "count" : "hints");
    *count = hints->count;
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcomms_hints_entry(const tcomms_hints_t *hints, size_t i, const char **key, const char **value)
{
    if (hints == NULL || key == NULL || value == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_hints_entry: an argument is NULL");
    if (i >= hints->count)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_hints_entry: index %zu out of range (count %zu)", i,
                        hints->count);
    *key = hints->entries[i].key;
    *value = hints->entries[i].value;
    return TCOMMS_SUCCESS;
}

tcomms_status_t tc_hints_merge(tcomms_hints_t *dst, const tcomms_hints_t *src)
{
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
