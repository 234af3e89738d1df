/* SPDX-License-Identifier: BSD-3-Clause */
/* The CUDA runtime of tcomms-perf, loaded at run time (see cuda.h). The prototypes below are the runtime's own,
 * written with int for cudaError_t and enums and void * for handles, which is how they are passed on every ABI
 * the runtime ships for; the constants are those of cuda_runtime_api.h / driver_types.h. */
#include "cuda.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    CUDA_SUCCESS = 0,
    MEMCPY_HOST_TO_DEVICE = 1,     /* cudaMemcpyHostToDevice */
    MEMCPY_DEVICE_TO_HOST = 2,     /* cudaMemcpyDeviceToHost */
    STREAM_NON_BLOCKING = 1,       /* cudaStreamNonBlocking: no implicit sync with the legacy default stream */
    CAPTURE_MODE_THREAD_LOCAL = 1, /* cudaStreamCaptureModeThreadLocal */
    ATTR_PCI_BUS = 33,             /* cudaDevAttrPciBusId */
    ATTR_PCI_DEVICE = 34,          /* cudaDevAttrPciDeviceId */
    ATTR_PCI_DOMAIN = 50           /* cudaDevAttrPciDomainId */
};

static struct {
    void *lib;
    const char *(*get_error_string)(int);
    int (*get_device_count)(int *);
    int (*set_device)(int);
    int (*device_attribute)(int *, int, int);
    int (*malloc_)(void **, size_t);
    int (*free_)(void *);
    int (*memset_async)(void *, int, size_t, void *);
    int (*memcpy_async)(void *, const void *, size_t, int, void *);
    int (*stream_create)(void **, unsigned);
    int (*stream_destroy)(void *);
    int (*stream_sync)(void *);
    int (*begin_capture)(void *, int);
    int (*end_capture)(void *, void **);
    int (*instantiate)(void **, void *, unsigned long long);
    int (*graph_launch)(void *, void *);
    int (*graph_destroy)(void *);
    int (*exec_destroy)(void *);
} rt;

static char last_error[512];

__attribute__((format(printf, 1, 2))) static int failed(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return -1;
}

/* A failed runtime call `what`, with the runtime's own words for `err`. */
static int check(int err, const char *what)
{
    if (err == CUDA_SUCCESS)
        return 0;
    return failed("%s: %s (CUDA error %d)", what, rt.get_error_string ? rt.get_error_string(err) : "?", err);
}

const char *perf_cuda_error(void)
{
    return last_error[0] ? last_error : "no error";
}

/* The runtime already in the process (a backend linked it) wins; else the newest we know, else the plain name.
 * On failure `why` says what was tried and the loader's last word. */
static void *load(char *why, size_t len)
{
    static const char *const names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
    const char *forced = getenv("TCOMMS_PERF_CUDART");
    size_t n = sizeof names / sizeof names[0];
    void *h = NULL;
    if (forced != NULL && forced[0] != '\0') {
        if ((h = dlopen(forced, RTLD_NOW | RTLD_GLOBAL)) == NULL)
            snprintf(why, len, "tried %s (TCOMMS_PERF_CUDART): %s", forced, dlerror());
        return h;
    }
    for (size_t k = 0; k < n && h == NULL; k++)
        h = dlopen(names[k], RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
    for (size_t k = 0; k < n && h == NULL; k++)
        h = dlopen(names[k], RTLD_NOW | RTLD_GLOBAL);
    if (h == NULL)
        snprintf(why, len, "tried %s, %s and %s: %s", names[0], names[1], names[2], dlerror());
    return h;
}

/* dlsym's object pointer into a function pointer: POSIX makes their representations alike; ISO C has no cast. */
#define SYM(field, name) \
    do { \
        void *sym_ = dlsym(rt.lib, name); \
        if (sym_ == NULL) \
            return failed("the CUDA runtime lacks %s", name); \
        memcpy(&rt.field, &sym_, sizeof sym_); \
    } while (0)

static int resolve(void)
{
    SYM(get_error_string, "cudaGetErrorString");
    SYM(get_device_count, "cudaGetDeviceCount");
    SYM(set_device, "cudaSetDevice");
    SYM(device_attribute, "cudaDeviceGetAttribute");
    SYM(malloc_, "cudaMalloc");
    SYM(free_, "cudaFree");
    SYM(memset_async, "cudaMemsetAsync");
    SYM(memcpy_async, "cudaMemcpyAsync");
    SYM(stream_create, "cudaStreamCreateWithFlags");
    SYM(stream_destroy, "cudaStreamDestroy");
    SYM(stream_sync, "cudaStreamSynchronize");
    SYM(begin_capture, "cudaStreamBeginCapture");
    SYM(end_capture, "cudaStreamEndCapture");
    SYM(instantiate, "cudaGraphInstantiateWithFlags"); /* one signature since CUDA 11.4 */
    SYM(graph_launch, "cudaGraphLaunch");
    SYM(graph_destroy, "cudaGraphDestroy");
    SYM(exec_destroy, "cudaGraphExecDestroy");
    return 0;
}

int perf_cuda_open(int *ngpus)
{
    *ngpus = 0;
    if (rt.lib == NULL) {
        char why[400];
        rt.lib = load(why, sizeof why);
        if (rt.lib == NULL)
            return failed("cannot load the CUDA runtime (%s)", why);
        if (resolve() != 0) {
            dlclose(rt.lib);
            rt.lib = NULL;
            return -1;
        }
    }
    int n = 0, err = rt.get_device_count(&n);
    if (err != CUDA_SUCCESS)
        return failed("no CUDA GPU is usable: cudaGetDeviceCount: %s (CUDA error %d)", rt.get_error_string(err),
                      err);
    if (n < 1)
        return failed("no CUDA GPU is visible (cudaGetDeviceCount found 0; see CUDA_VISIBLE_DEVICES)");
    *ngpus = n;
    return 0;
}

int perf_cuda_set_device(int gpu)
{
    return check(rt.set_device(gpu), "cudaSetDevice");
}

int perf_cuda_pci(int gpu, int *domain, int *bus, int *device)
{
    *domain = *bus = *device = 0;
    if (check(rt.device_attribute(domain, ATTR_PCI_DOMAIN, gpu), "cudaDeviceGetAttribute(PciDomainId)") != 0 ||
        check(rt.device_attribute(bus, ATTR_PCI_BUS, gpu), "cudaDeviceGetAttribute(PciBusId)") != 0)
        return -1;
    return check(rt.device_attribute(device, ATTR_PCI_DEVICE, gpu), "cudaDeviceGetAttribute(PciDeviceId)");
}

int perf_cuda_stream_create(void **stream)
{
    return check(rt.stream_create(stream, STREAM_NON_BLOCKING), "cudaStreamCreateWithFlags");
}

int perf_cuda_stream_destroy(void *stream)
{
    return check(rt.stream_destroy(stream), "cudaStreamDestroy");
}

int perf_cuda_stream_sync(void *stream)
{
    return check(rt.stream_sync(stream), "cudaStreamSynchronize");
}

int perf_cuda_malloc(void **p, size_t bytes)
{
    *p = NULL;
    return check(rt.malloc_(p, bytes), "cudaMalloc");
}

int perf_cuda_free(void *p)
{
    return check(rt.free_(p), "cudaFree");
}

int perf_cuda_memset(void *dev, int value, size_t bytes, void *stream)
{
    return check(rt.memset_async(dev, value, bytes, stream), "cudaMemsetAsync");
}

int perf_cuda_upload(void *dev, const void *host, size_t bytes, void *stream)
{
    return check(rt.memcpy_async(dev, host, bytes, MEMCPY_HOST_TO_DEVICE, stream), "cudaMemcpyAsync to the GPU");
}

int perf_cuda_download(void *host, const void *dev, size_t bytes, void *stream)
{
    return check(rt.memcpy_async(host, dev, bytes, MEMCPY_DEVICE_TO_HOST, stream), "cudaMemcpyAsync to the host");
}

int perf_cuda_capture_begin(void *stream)
{
    return check(rt.begin_capture(stream, CAPTURE_MODE_THREAD_LOCAL), "cudaStreamBeginCapture");
}

int perf_cuda_capture_end(void *stream, void **exec)
{
    void *graph = NULL;
    *exec = NULL;
    if (check(rt.end_capture(stream, &graph), "cudaStreamEndCapture") != 0)
        return -1;
    int st = check(rt.instantiate(exec, graph, 0), "cudaGraphInstantiateWithFlags");
    rt.graph_destroy(graph); /* the executable graph does not need it */
    return st;
}

int perf_cuda_graph_launch(void *exec, void *stream)
{
    return check(rt.graph_launch(exec, stream), "cudaGraphLaunch");
}

void perf_cuda_graph_free(void *exec)
{
    if (exec != NULL)
        rt.exec_destroy(exec);
}
