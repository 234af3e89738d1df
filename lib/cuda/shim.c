/* SPDX-License-Identifier: BSD-3-Clause */
/* The CUDA shim's one dlopen/dlsym path (shim.h): a library is a list of sonames and a list of entry points, and its
 * table is published only once every entry point was found, so no caller holds a half-filled one. */
#include "shim.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* The symbol after the headers' own macros: cuda.h's cuMemAlloc is the driver's cuMemAlloc_v2. */
#define SYMBOL(name) SYMBOL_(name)
#define SYMBOL_(name) #name

typedef struct entry { const char *symbol; size_t offset; } entry_t;

typedef struct library {
    const char *what; /* "the CUDA runtime", for messages */
    const char *const *names;
    size_t nnames;
    const entry_t *entries;
    size_t nentries;
    size_t size; /* of the table */
} library_t;

/* One lock for both tables: each is loaded once per process, at setup. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* Fill `table` from the first of the names already in the process, else the first that loads (`only`, when not NULL,
 * in place of the names); on failure it is left all NULL. The library stays open for good: CUDA's state outlives any
 * one user of it. */
static int open_library(const library_t *lib, const char *only, void *table, char *why, size_t len)
{
    const char *const *names = only != NULL ? &only : lib->names;
    size_t n = only != NULL ? 1 : lib->nnames;
    const char *name = NULL;
    void *h = NULL;
    for (size_t k = 0; k < n && h == NULL; k++)
        h = dlopen(name = names[k], RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    for (size_t k = 0; k < n && h == NULL; k++)
        h = dlopen(name = names[k], RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        char tried[256] = "";
        for (size_t k = 0, used = 0; k < n && used < sizeof tried; k++)
            used += (size_t)snprintf(tried + used, sizeof tried - used, "%s%s", k ? ", " : "", names[k]);
        snprintf(why, len, "cannot load %s (tried %s: %s)", lib->what, tried, dlerror());
        return -1;
    }
    for (size_t i = 0; i < lib->nentries; i++) {
        void *f = dlsym(h, lib->entries[i].symbol);
        if (f == NULL) {
            snprintf(why, len, "%s %s lacks %s (older than this build of tcomms needs?)", lib->what, name,
                     lib->entries[i].symbol);
            memset(table, 0, lib->size);
            dlclose(h);
            return -1;
        }
        /* dlsym's object pointer into a function pointer: POSIX makes their representations alike. */
        memcpy((char *)table + lib->entries[i].offset, &f, sizeof f);
    }
    return 0;
}

/* ---- the runtime ------------------------------------------------------------------------------------------------ */

#ifdef TC_CUDA_HEADERS
/* The lists in shim.h are what a build without the headers declares: hold them to the headers here. */
#define SAME_PROTOTYPE(name, ret, params)                                                                             \
    _Static_assert(__builtin_types_compatible_p(__typeof__(name) *, ret(*) params),                                  \
                   "shim.h declares " #name " unlike cuda_runtime_api.h");
TC_CUDART_CALLS(SAME_PROTOTYPE)
#define SAME_VALUE(name, value) _Static_assert(name == value, #name " is not " #value " in the CUDA headers");
TC_CUDART_ERRORS(SAME_VALUE)
TC_CUDART_MEMCPY_KINDS(SAME_VALUE)
TC_CUDART_CAPTURE_MODES(SAME_VALUE)
TC_CUDART_DEVICE_ATTRS(SAME_VALUE)
TC_CUDART_STREAM_FLAGS(SAME_VALUE)
#endif

#define CUDART_ENTRY(name, ret, params) {SYMBOL(name), offsetof(tc_cudart_t, name)},
static const entry_t cudart_entries[] = {TC_CUDART_CALLS(CUDART_ENTRY)};
/* Newest first: a tool built against one toolkit runs with whichever runtime the machine has. */
static const char *const cudart_names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
static tc_cudart_t cudart;
static const library_t cudart_library = {"the CUDA runtime", cudart_names, sizeof cudart_names / sizeof *cudart_names,
                                         cudart_entries, sizeof cudart_entries / sizeof *cudart_entries,
                                         sizeof cudart};
static int cudart_loaded;

const tc_cudart_t *tc_cudart_load(const char *only, char *why, size_t len)
{
    pthread_mutex_lock(&lock);
    if (!cudart_loaded)
        cudart_loaded = open_library(&cudart_library, only, &cudart, why, len) == 0;
    int loaded = cudart_loaded;
    pthread_mutex_unlock(&lock);
    return loaded ? &cudart : NULL;
}

/* Every CUDA failure reads "CALL failed: TEXT (NAME)", the NCCL backend's included (tcn_cuda_error); an error the
 * library cannot name, or one described before any library loaded, falls back to the number. */
static const char *describe(char *buf, size_t len, const char *call, const char *text, const char *name, int err)
{
    if (text != NULL && name != NULL)
        snprintf(buf, len, "%s failed: %s (%s)", call, text, name);
    else
        snprintf(buf, len, "%s failed: CUDA error %d", call, err);
    return buf;
}

const char *tc_cudart_describe(char *buf, size_t len, const char *call, cudaError_t err)
{
    if (cudart.cudaGetErrorString == NULL)
        return describe(buf, len, call, NULL, NULL, (int)err);
    return describe(buf, len, call, cudart.cudaGetErrorString(err), cudart.cudaGetErrorName(err), (int)err);
}

/* ---- the driver ------------------------------------------------------------------------------------------------- */

#ifdef TC_CUDA_HEADERS
#define DRIVER_ENTRY(name) {SYMBOL(name), offsetof(tc_cuda_driver_t, name)},
static const entry_t driver_entries[] = {TC_CUDA_DRIVER_CALLS(DRIVER_ENTRY)};
/* The soname every driver since CUDA 2 installs; libcuda.so is the toolkit's link-time stub. */
static const char *const driver_names[] = {"libcuda.so.1"};
static tc_cuda_driver_t driver;
static const library_t driver_library = {"the CUDA driver", driver_names, 1, driver_entries,
                                         sizeof driver_entries / sizeof *driver_entries, sizeof driver};
static int driver_loaded;

/* Every other driver call fails until cuInit, so a table is usable only after it. */
static int init_driver(char *why, size_t len)
{
    if (open_library(&driver_library, NULL, &driver, why, len) != 0)
        return -1;
    CUresult r = driver.cuInit(0);
    if (r != CUDA_SUCCESS) {
        tc_cuda_driver_describe(why, len, "cuInit", r);
        return -1;
    }
    return 0;
}

const tc_cuda_driver_t *tc_cuda_driver_load(char *why, size_t len)
{
    pthread_mutex_lock(&lock);
    if (!driver_loaded)
        driver_loaded = init_driver(why, len) == 0;
    int loaded = driver_loaded;
    pthread_mutex_unlock(&lock);
    return loaded ? &driver : NULL;
}

const char *tc_cuda_driver_describe(char *buf, size_t len, const char *call, CUresult err)
{
    const char *text = NULL, *name = NULL;
    if (driver.cuGetErrorString != NULL &&
        (driver.cuGetErrorString(err, &text) != CUDA_SUCCESS || driver.cuGetErrorName(err, &name) != CUDA_SUCCESS))
        text = name = NULL;
    return describe(buf, len, call, text, name, (int)err);
}
#endif
