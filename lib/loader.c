/* Backend modules: search TCOMMS_BACKEND_PATH then the install dir for tcomms_<name>.so, dlopen it, check its ABI
 * version before trusting anything else in it, and ask it whether it can run here. Loaded modules stay loaded. */
#include "config.h"

#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "loader.h"
#include "log.h"

#ifndef TCOMMS_MODULE_DIR
#define TCOMMS_MODULE_DIR "/usr/local/lib/tcomms"
#endif

#define MAX_MODULES 32

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct loaded {
    char path[4096];
    void *handle;
    const tcomms_backend_t *backend; /* NULL when the ABI check failed */
    char reason[512];
} loaded[MAX_MODULES];
static size_t n_loaded;

static tc_module_info_t listing[MAX_MODULES];
static size_t n_listing;

/* Any length: a fixed buffer would cut the install directory off a long TCOMMS_BACKEND_PATH. */
char *tc_backend_search_path(void)
{
    const char *env = getenv("TCOMMS_BACKEND_PATH");
    if (env == NULL)
        env = "";
    size_t len = strlen(env) + 1 + strlen(TCOMMS_MODULE_DIR) + 1;
    char *path = malloc(len);
    if (path != NULL)
        snprintf(path, len, "%s%s%s", env, *env ? ":" : "", TCOMMS_MODULE_DIR);
    return path;
}

static int valid_name(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > 32)
        return 0;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
            return 0;
    return 1;
}

/* dlopen `path` once; on failure *reason says why. Called with `lock` held. */
static const tcomms_backend_t *open_module(const char *path, char *reason, size_t len)
{
    for (size_t i = 0; i < n_loaded; i++)
        if (strcmp(loaded[i].path, path) == 0) {
            snprintf(reason, len, "%s", loaded[i].reason);
            return loaded[i].backend;
        }
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        const char *err = dlerror();
        snprintf(reason, len, "dlopen failed: %s", err ? err : "unknown error");
        return NULL; /* not cached: a missing library may be installed later */
    }
    const tcomms_backend_t *be = dlsym(handle, TCOMMS_BACKEND_SYMBOL);
    if (be == NULL)
        snprintf(reason, len, "%.300s does not export %s", path, TCOMMS_BACKEND_SYMBOL);
    else if (be->abi_version != TCOMMS_BACKEND_ABI_VERSION) {
        snprintf(reason, len, "%.300s has backend ABI version %u, this libtcomms needs %u (rebuild the module)", path,
                 be->abi_version, TCOMMS_BACKEND_ABI_VERSION);
        be = NULL;
    } else
        reason[0] = '\0';
    if (n_loaded < MAX_MODULES) {
        struct loaded *l = &loaded[n_loaded++];
        snprintf(l->path, sizeof(l->path), "%s", path);
        snprintf(l->reason, sizeof(l->reason), "%s", reason);
        l->handle = handle;
        l->backend = be;
    }
    return be;
}

/* Find, load and query `name`; fills `info`. Called with `lock` held. */
static void probe(const char *name, tc_module_info_t *info)
{
    memset(info, 0, sizeof(*info));
    info->status = TCOMMS_ERR_BACKEND_UNAVAILABLE;
    char *search = tc_backend_search_path(), *dirs = search ? strdup(search) : NULL;
    if (dirs == NULL) {
        free(search);
        snprintf(info->reason, sizeof(info->reason), "out of memory for the module search path");
        return;
    }
    char *save = NULL;
    for (char *dir = strtok_r(dirs, ":", &save); dir != NULL; dir = strtok_r(NULL, ":", &save)) {
        char path[4096];
        if ((size_t)snprintf(path, sizeof(path), "%s/tcomms_%s.so", dir, name) >= sizeof(path))
            continue; /* no such file can exist; a cut name could find another */
        if (access(path, R_OK) == 0) {
            snprintf(info->path, sizeof(info->path), "%s", path);
            break;
        }
    }
    free(dirs);
    if (info->path[0] == '\0') {
        size_t len = strlen(search);
        if (len < sizeof(info->reason) - 64)
            snprintf(info->reason, sizeof(info->reason), "no tcomms_%s.so in %s", name, search);
        else /* keep the end: the install directory */
            snprintf(info->reason, sizeof(info->reason), "no tcomms_%s.so in the %zu-character search path "
                     "...%s", name, len, search + len - (sizeof(info->reason) - 100));
        free(search);
        return;
    }
    free(search);
    const tcomms_backend_t *be = open_module(info->path, info->reason, sizeof(info->reason));
    if (be == NULL) {
        info->status = strstr(info->reason, "ABI version") ? TCOMMS_ERR_ABI : TCOMMS_ERR_BACKEND_UNAVAILABLE;
        return;
    }
    char why[400] = "";
    if (be->query != NULL && be->query(&tc_core, why, sizeof(why)) != TCOMMS_SUCCESS) {
        snprintf(info->reason, sizeof(info->reason), "declined: %.400s", why[0] ? why : "no reason given");
        return;
    }
    info->backend = be;
    info->status = TCOMMS_SUCCESS;
}

tcomms_status_t tc_backend_load(const char *name, const tcomms_backend_t **out)
{
    if (name == NULL || !valid_name(name))
        return tc_error(TCOMMS_ERR_INVALID_ARG, "backend name '%s' is not valid (lower-case letters, digits, '_')",
                        name ? name : "(null)");
    tc_module_info_t info;
    pthread_mutex_lock(&lock);
    probe(name, &info);
    pthread_mutex_unlock(&lock);
    if (info.status != TCOMMS_SUCCESS)
        return tc_error(info.status, "backend '%s' unavailable: %s", name, info.reason);
    tc_log(TCOMMS_LOG_DEBUG, "loader", "backend '%s' loaded from %s", name, info.path);
    *out = info.backend;
    return TCOMMS_SUCCESS;
}

static int listed(const char *name)
{
    for (size_t i = 0; i < n_listing; i++)
        if (strcmp(listing[i].name, name) == 0)
            return 1;
    return 0;
}

tcomms_status_t tc_backend_list(const tc_module_info_t **mods, size_t *count)
{
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n_listing; i++)
        free((char *)listing[i].name);
    n_listing = 0;
    char *dirs = tc_backend_search_path();
    char *save = NULL;
    for (char *dir = dirs ? strtok_r(dirs, ":", &save) : NULL; dir != NULL; dir = strtok_r(NULL, ":", &save)) {
        DIR *d = opendir(dir);
        struct dirent *e;
        while (d != NULL && (e = readdir(d)) != NULL && n_listing < MAX_MODULES) {
            size_t n = strlen(e->d_name);
            if (n <= 10 || strncmp(e->d_name, "tcomms_", 7) != 0 || strcmp(e->d_name + n - 3, ".so") != 0)
                continue;
            char name[64];
            snprintf(name, sizeof(name), "%.*s", (int)(n - 10), e->d_name + 7);
            if (!valid_name(name) || listed(name))
                continue;
            tc_module_info_t *info = &listing[n_listing];
            probe(name, info);
            info->name = strdup(name);
            if (info->name != NULL)
                n_listing++;
        }
        if (d != NULL)
            closedir(d);
    }
    free(dirs);
    *mods = listing;
    *count = n_listing;
    pthread_mutex_unlock(&lock);
    return TCOMMS_SUCCESS;
}

/* Device types of well-known backends, so an unqualified "nccl" needs no module load to be placed. */
static uint32_t known_device_types(const char *name)
{
    if (strcmp(name, "nccl") == 0)
        return 1u << TCOMMS_DEVICE_CUDA;
    if (strcmp(name, "gloo") == 0 || strcmp(name, "ucx") == 0)
        return 1u << TCOMMS_DEVICE_CPU;
    const tcomms_backend_t *be;
    if (tc_backend_load(name, &be) == TCOMMS_SUCCESS && be->device_types != 0)
        return be->device_types;
    return 1u << TCOMMS_DEVICE_CPU;
}

static tcomms_status_t assign(tc_selection_t *sel, const char *spec, int type, const char *name)
{
    if (sel->explicit_[type])
        return tc_error(TCOMMS_ERR_INVALID_ARG, "backend selection '%s': device '%s' is named twice", spec,
                        tcomms_device_type_name((tcomms_device_type_t)type));
    snprintf(sel->names[type], sizeof(sel->names[type]), "%s", name);
    sel->explicit_[type] = 1;
    return TCOMMS_SUCCESS;
}

tcomms_status_t tc_selection_parse(const char *spec, tc_selection_t *sel)
{
    memset(sel, 0, sizeof(*sel));
    if (spec == NULL || *spec == '\0')
        return TCOMMS_SUCCESS;
    char copy[512];
    if (strlen(spec) >= sizeof(copy))
        return tc_error(TCOMMS_ERR_INVALID_ARG, "backend selection is longer than %zu characters", sizeof(copy) - 1);
    strcpy(copy, spec);
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(item, ':');
        const char *name = colon ? colon + 1 : item;
        if (!valid_name(name))
            return tc_error(TCOMMS_ERR_INVALID_ARG, "backend selection '%s': '%s' is not a backend name", spec, name);
        if (colon != NULL) {
            *colon = '\0';
            int type = -1;
            for (int t = 0; t < TCOMMS_DEVICE_TYPE_COUNT; t++)
                if (strcmp(item, tcomms_device_type_name((tcomms_device_type_t)t)) == 0)
                    type = t;
            if (type < 0)
                return tc_error(TCOMMS_ERR_INVALID_ARG, "backend selection '%s': unknown device type '%s' (cpu, "
                                "cuda)", spec, item);
            tcomms_status_t st = assign(sel, spec, type, name);
            if (st != TCOMMS_SUCCESS)
                return st;
            continue;
        }
        uint32_t types = known_device_types(name);
        for (int t = 0; t < TCOMMS_DEVICE_TYPE_COUNT; t++) {
            tcomms_status_t st = (types & (1u << t)) ? assign(sel, spec, t, name) : TCOMMS_SUCCESS;
            if (st != TCOMMS_SUCCESS)
                return st;
        }
    }
    for (int t = 0; t < TCOMMS_DEVICE_TYPE_COUNT; t++)
        if (sel->explicit_[t])
            return TCOMMS_SUCCESS;
    return tc_error(TCOMMS_ERR_INVALID_ARG, "backend selection '%s' names no backend", spec);
}
