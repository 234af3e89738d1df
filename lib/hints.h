/* SPDX-License-Identifier: BSD-3-Clause */
/* Hints: parsing and validation live here once; backends read canonical keys through the public getters. */
#ifndef TC_HINTS_H
#define TC_HINTS_H

#include <tcomms/tcomms.h>

/* The canonical snake_case key for any accepted spelling, or NULL if `key` is not a known un-namespaced key. */
const char *tc_hint_canonical(const char *key);
/* Whether `key` is a hint the core accepts: a known key in any spelling (*canonical: its canonical spelling), or
 * "<module>.<key>" for a module tcomms_<module>.so in the search path (*canonical: `key`). Otherwise
 * TCOMMS_ERR_INVALID_ARG naming the key and the modules found. Values are not looked at. */
tcomms_status_t tc_hint_check_key(const char *key, const char **canonical);
/* Copy `src` entries over `dst` (later wins). */
tcomms_status_t tc_hints_merge(tcomms_hints_t *dst, const tcomms_hints_t *src);
/* Cross-key checks (min_ctas <= max_ctas). */
tcomms_status_t tc_hints_check(const tcomms_hints_t *hints);

/* core->setting_resolve (lib/setting.c): what runs, from a hint, an overriding variable or the default. */
tcomms_status_t tc_setting_resolve(const tcomms_hints_t *hints, const char *who, const char *key, const char *hint,
                                   const char *var, const char *dflt, tcomms_setting_t *out);

#endif
