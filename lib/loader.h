/* SPDX-License-Identifier: BSD-3-Clause */
/* Finding, loading and checking backend modules. Modules are loaded at most once per process and never unloaded
 * (unloading C++ modules during process teardown is a known source of crashes). */
#ifndef TC_LOADER_H
#define TC_LOADER_H

#include <tcomms/backend.h>

/* The services table handed to every backend. */
extern const tcomms_core_t tc_core;

typedef struct tc_module_info {
    const char *name;          /* as in its file name, tcomms_<name>.so */
    char path[4096];           /* "" when no file was found */
    const tcomms_backend_t *table;   /* its table as the core reads it (fields past its declared size 0/NULL);
                                        NULL when it did not open or failed the ABI check */
    const tcomms_backend_t *backend; /* `table` once query() accepted; NULL otherwise */
    tcomms_status_t status;
    char reason[512];          /* dlerror(), ABI mismatch, or the backend's reason for declining */
} tc_module_info_t;

/* Load backend `name` (searching TCOMMS_BACKEND_PATH, then the module dir) and query it. On failure returns
 * TCOMMS_ERR_BACKEND_UNAVAILABLE (or TCOMMS_ERR_ABI) with the reason in the thread's message. The table returned
 * is the core's checked copy, valid for the life of the process. */
tcomms_status_t tc_backend_load(const char *name, const tcomms_backend_t **out);
/* Like tc_backend_load without query(): enough to read a module's device types and priority. */
tcomms_status_t tc_backend_open(const char *name, const tcomms_backend_t **out);
/* Whether a file tcomms_<name>.so is in the search path (nothing is opened). */
int tc_backend_exists(const char *name);
/* The module names in the search path, sorted, ", "-separated, for messages (cut at len). */
void tc_backend_names(char *buf, size_t len);
/* Every module file found (a name appears once: the first in search order), each loaded and queried. The array
 * is static and stays valid; *count is set. */
tcomms_status_t tc_backend_list(const tc_module_info_t **mods, size_t *count);
/* The indices of mods[0..n) whose module serves `type`, in default order (greatest priority first, then by
 * name), into order[] (room for n); only those query() accepted when usable_only. Returns how many. */
size_t tc_backend_order(const tc_module_info_t *mods, size_t n, tcomms_device_type_t type, int usable_only,
                        size_t *order);
/* The default backend for `type`: every module in the search path is opened, and those serving `type` are
 * queried in default order; the first that accepts is loaded. On failure TCOMMS_ERR_BACKEND_UNAVAILABLE with
 * each module's reason. */
tcomms_status_t tc_backend_default(tcomms_device_type_t type, const tcomms_backend_t **out);
/* The directories searched, in order, joined by ':', in memory the caller frees; NULL when out of memory. */
char *tc_backend_search_path(void);

/* Backend selection: which backend name serves each device type.
 * spec is "gloo", "cpu:gloo,cuda:nccl", or NULL/"" for defaults. A name without a device prefix applies to every
 * device type its module declares (the module is opened to read them: a name that does not open fails here). names[t] stays NULL where
 * the spec says nothing; explicit[t] tells whether names[t] came from the spec. */
typedef struct tc_selection {
    char names[TCOMMS_DEVICE_TYPE_COUNT][64];
    int explicit_[TCOMMS_DEVICE_TYPE_COUNT];
} tc_selection_t;
tcomms_status_t tc_selection_parse(const char *spec, tc_selection_t *sel);

#endif
