/* SPDX-License-Identifier: BSD-3-Clause */
/* The settings a communicator runs with and where each came from (tcomms_comm_setting, tcomms_comm_hint), and the
 * one rule for a hint that an environment variable overrides (a warning, or an error under strict_hints), lent to
 * backends as core->setting_resolve so that every module applies it alike. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "env.h"
#include "error.h"
#include "hints.h"
#include "log.h"

const char *tcomms_setting_source_name(tcomms_setting_source_t source)
{
    switch (source) {
    case TCOMMS_SETTING_DEFAULT: return "default";
    case TCOMMS_SETTING_HINT: return "hint";
    case TCOMMS_SETTING_ENV: return "environment";
    case TCOMMS_SETTING_BACKEND: return "backend";
    }
    return "unknown";
}

static int strict(const tcomms_hints_t *hints)
{
    const char *v = NULL;
    int on = 0;
    return hints != NULL && tcomms_hints_get(hints, "strict_hints", &v) == TCOMMS_SUCCESS &&
           tc_parse_bool(v, "strict_hints", &on) == TCOMMS_SUCCESS && on;
}

tcomms_status_t tc_setting_resolve(const tcomms_hints_t *hints, const char *who, const char *key, const char *hint,
                                   const char *var, const char *dflt, tcomms_setting_t *out)
{
    memset(out, 0, sizeof(*out));
    const char *env = var != NULL ? getenv(var) : NULL;
    if (env != NULL && *env != '\0') {
        snprintf(out->value, sizeof(out->value), "%s", env);
        out->source = TCOMMS_SETTING_ENV;
        snprintf(out->origin, sizeof(out->origin), "%s", var);
        if (hint == NULL || strcmp(hint, env) == 0)
            return TCOMMS_SUCCESS;
        snprintf(out->overridden, sizeof(out->overridden), "%s", hint);
        if (strict(hints))
            return tc_error(TCOMMS_ERR_BAD_ENV, "%s: hint '%s=%s' is overridden by %s=%s in the environment, and "
                            "strict_hints is set: unset the variable or drop the hint", who, key, hint, var, env);
        tc_log(TCOMMS_LOG_WARN, who, "hint '%s=%s' is overridden by %s=%s in the environment: the communicator runs "
               "with %s (strict_hints=1 makes this an error)", key, hint, var, env, env);
        return TCOMMS_SUCCESS;
    }
    if (hint != NULL) {
        snprintf(out->value, sizeof(out->value), "%s", hint);
        out->source = TCOMMS_SETTING_HINT;
        snprintf(out->origin, sizeof(out->origin), "%s", key);
    } else {
        snprintf(out->value, sizeof(out->value), "%s", dflt != NULL ? dflt : "");
    }
    return TCOMMS_SUCCESS;
}

/* Both public calls; `who` names the one the caller made, for messages. */
static tcomms_status_t setting(const tcomms_comm_t *comm, tcomms_device_type_t type, const char *key,
                               tcomms_setting_t *out, const char *who)
{
    memset(out, 0, sizeof(*out));
    /* The keys tcomms_hints_set accepts, no more: a module's own key needs that module in the search path. */
    const char *canonical = NULL;
    if (tc_hint_check_key(key, &canonical) != TCOMMS_SUCCESS)
        return tc_error_prefix(TCOMMS_ERR_INVALID_ARG, "%s: ", who);
    const tc_slot_t *slot = NULL;
    tcomms_status_t st = tc_comm_slot(comm, type, who, &slot);
    if (st != TCOMMS_SUCCESS)
        return st;
    const tcomms_backend_t *be = slot->be;
    if (be->comm_setting != NULL) {
        st = be->comm_setting(slot->bcomm, canonical, out);
    } else if (be->comm_hint != NULL) {
        st = be->comm_hint(slot->bcomm, canonical, out->value, sizeof(out->value));
        const char *given = NULL;
        if (st == TCOMMS_SUCCESS && tcomms_hints_get(comm->hints, canonical, &given) == TCOMMS_SUCCESS) {
            out->source = TCOMMS_SETTING_HINT;
            snprintf(out->origin, sizeof(out->origin), "%s", canonical);
        }
    } else {
        st = TCOMMS_ERR_NOT_SUPPORTED;
    }
    if (st == TCOMMS_ERR_NOT_SUPPORTED) {
        memset(out, 0, sizeof(*out));
        snprintf(out->value, sizeof(out->value), "not applicable");
        st = TCOMMS_SUCCESS;
    }
    return st;
}

tcomms_status_t tcomms_comm_setting(const tcomms_comm_t *comm, tcomms_device_type_t type, const char *key,
                                    tcomms_setting_t *out)
{
    tcomms_status_t st = tc_comm_check(comm, __func__, "comm");
    if (st != TCOMMS_SUCCESS)
        return st;
    if (key == NULL || out == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: %s is NULL", __func__, key == NULL ? "key" : "out");
    return setting(comm, type, key, out, __func__);
}

tcomms_status_t tcomms_comm_hint(const tcomms_comm_t *comm, tcomms_device_type_t type, const char *key, char *buf,
                                 size_t len)
{
    tcomms_status_t st = tc_comm_check(comm, __func__, "comm");
    if (st != TCOMMS_SUCCESS)
        return st;
    if (buf == NULL || key == NULL || len == 0)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: %s", __func__,
                        buf == NULL ? "buf is NULL" : key == NULL ? "key is NULL" : "len is 0");
    tcomms_setting_t s;
    if ((st = setting(comm, type, key, &s, __func__)) == TCOMMS_SUCCESS)
        snprintf(buf, len, "%s", s.value);
    return st;
}
