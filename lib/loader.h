/* SPDX-License-Identifier: BSD-3-Clause */
/* Finding, loading and checking backend modules. Modules are loaded at most once per process and never unloaded
 * (unloading C++ modules during process teardown is a known source of crashes). */
#ifndef TC_LOADER_H
#define TC_LOADER_H

#include <tcomms/backend.h>

/* The services table handed to every backend. */
extern const tcomms_core_t tc_core;

typedef struct tc_module_info {
    const char *name;
    char path[4096];           /* "" when no file was found */
    const tcomms_backend_t *backend; /* NULL when it did not load or declined */
    tcomms_status_t status;
    char reason[512];          /* dlerror(), ABI mismatch, or the backend's reason for declining */
} tc_module_info_t;

/* Load backend `name` (searching TCOMMS_BACKEND_PATH, then the module dir). On failure returns
 * TCOMMS_ERR_BACKEND_UNAVAILABLE (or TCOMMS_ERR_ABI) with the reason in the thread's message. */
tcomms_status_t tc_backend_load(const char *name, const tcomms_backend_t **out);
/* Every module file found (a name appears once: the first in search order), each loaded and queried. The array
 * is static and stays valid; *count is set. */
tcomms_status_t tc_backend_list(const tc_module_info_t **mods, size_t *count);
/* The directories searched, in order, joined by ':', in memory the caller frees; NULL when out of memory. */
char *tc_backend_search_path(void);

/* Backend selection: which backend name serves each device type.
 * spec is "gloo", "cpu:gloo,cuda:nccl", or NULL/"" for defaults. A name without a device prefix applies to every
 * device type that backend serves (known from the module, or cpu for unknown names). names[t] stays NULL where
 * the spec says nothing; explicit[t] tells whether names[t] came from the spec. */
typedef struct tc_selection {
    char names[TCOMMS_DEVICE_TYPE_COUNT][64];
    int explicit_[TCOMMS_DEVICE_TYPE_COUNT];
} tc_selection_t;
tcomms_status_t tc_selection_parse(const char *spec, tc_selection_t *sel);

#endif
