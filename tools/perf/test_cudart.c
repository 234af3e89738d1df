/* SPDX-License-Identifier: BSD-3-Clause */
/* A stand-in for the CUDA runtime, for tests only (tests/perf.mk builds it; never installed): the calls the CUDA shim
 * loads for tools/perf/cuda.c (TC_CUDART_CALLS in lib/cuda/shim.h), on host memory, with one visible "GPU". With the
 * "fakecuda" test backend it lets test_perf run tcomms-perf --device cuda end to end on a machine without a GPU, and
 * test_cuda_shim load it through the shim. It also enforces what a real runtime would: known streams only, no
 * synchronize while a stream is being captured, thread-local capture mode, and nothing left allocated at exit (a leak
 * or misuse is reported on stderr with the word "perf_cudart"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))

enum { OK = 0, INVALID_VALUE = 1, NO_MEMORY = 2, INVALID_DEVICE = 101, NOT_PERMITTED = 800, CAPTURE_UNSUPPORTED = 900 };

static int live_buffers, live_streams, live_graphs;
static void *capturing; /* the stream being captured, or NULL */

static int misuse(const char *what)
{
    fprintf(stderr, "perf_cudart: misuse: %s\n", what);
    return INVALID_VALUE;
}

/* Streams are malloc'ed markers holding this tag, so a stream that was never created is caught. */
static const char stream_tag[] = "perf_cudart stream";

static int is_stream(const void *s)
{
    return s != NULL && memcmp(s, stream_tag, sizeof stream_tag) == 0;
}

EXPORT const char *cudaGetErrorString(int err)
{
    return err == INVALID_DEVICE ? "invalid device ordinal (perf_cudart)" : "error (perf_cudart)";
}

EXPORT const char *cudaGetErrorName(int err)
{
    switch (err) {
    case OK: return "cudaSuccess";
    case INVALID_VALUE: return "cudaErrorInvalidValue";
    case NO_MEMORY: return "cudaErrorMemoryAllocation";
    case INVALID_DEVICE: return "cudaErrorInvalidDevice";
    case NOT_PERMITTED: return "cudaErrorNotPermitted";
    case CAPTURE_UNSUPPORTED: return "cudaErrorStreamCaptureUnsupported";
    default: return "cudaErrorUnknown";
    }
}

EXPORT int cudaGetDeviceCount(int *n)
{
    *n = 1;
    return OK;
}

EXPORT int cudaSetDevice(int gpu)
{
    return gpu == 0 ? OK : INVALID_DEVICE;
}

/* The one GPU sits at PCI address 0000:2a:03 (tests/test_perf.c looks for it in the "#  Rank" line). */
EXPORT int cudaDeviceGetAttribute(int *value, int attr, int gpu)
{
    if (gpu != 0)
        return INVALID_DEVICE;
    switch (attr) {
    case 50: *value = 0; return OK;    /* cudaDevAttrPciDomainId */
    case 33: *value = 0x2a; return OK; /* cudaDevAttrPciBusId */
    case 34: *value = 3; return OK;    /* cudaDevAttrPciDeviceId */
    default: return INVALID_VALUE;
    }
}

EXPORT int cudaMalloc(void **p, size_t bytes)
{
    *p = malloc(bytes ? bytes : 1);
    live_buffers += *p != NULL;
    return *p ? OK : NO_MEMORY;
}

EXPORT int cudaFree(void *p)
{
    if (p == NULL)
        return OK;
    live_buffers--;
    free(p);
    return OK;
}

EXPORT int cudaMemsetAsync(void *p, int value, size_t bytes, void *stream)
{
    if (!is_stream(stream) || capturing)
        return misuse("cudaMemsetAsync off a created stream, or while capturing");
    memset(p, value, bytes);
    return OK;
}

EXPORT int cudaMemcpyAsync(void *dst, const void *src, size_t bytes, int kind, void *stream)
{
    if (!is_stream(stream) || capturing || (kind != 1 && kind != 2))
        return misuse("cudaMemcpyAsync off a created stream, while capturing, or not host<->device");
    memcpy(dst, src, bytes);
    return OK;
}

EXPORT int cudaStreamCreateWithFlags(void **stream, unsigned flags)
{
    if (flags != 1)
        return misuse("a stream that syncs with the legacy default stream");
    *stream = malloc(sizeof stream_tag);
    if (*stream == NULL)
        return NO_MEMORY;
    memcpy(*stream, stream_tag, sizeof stream_tag);
    live_streams++;
    return OK;
}

EXPORT int cudaStreamDestroy(void *stream)
{
    if (!is_stream(stream))
        return misuse("cudaStreamDestroy of an unknown stream");
    memset(stream, 0, sizeof stream_tag);
    free(stream);
    live_streams--;
    return OK;
}

EXPORT int cudaStreamSynchronize(void *stream)
{
    if (!is_stream(stream))
        return misuse("cudaStreamSynchronize of an unknown stream");
    return capturing ? CAPTURE_UNSUPPORTED : OK;
}

EXPORT int cudaStreamBeginCapture(void *stream, int mode)
{
    if (!is_stream(stream) || capturing || mode != 1)
        return misuse("a capture not thread-local, nested, or on an unknown stream");
    capturing = stream;
    return OK;
}

EXPORT int cudaStreamEndCapture(void *stream, void **graph)
{
    if (stream != capturing)
        return misuse("cudaStreamEndCapture of a stream not being captured");
    capturing = NULL;
    *graph = malloc(1);
    live_graphs += *graph != NULL;
    return *graph ? OK : NO_MEMORY;
}

EXPORT int cudaGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long flags)
{
    (void)flags;
    if (graph == NULL)
        return misuse("instantiating no graph");
    *exec = malloc(1);
    live_graphs += *exec != NULL;
    return *exec ? OK : NO_MEMORY;
}

/* A replay takes time, as the operations it holds would: 20 us, so the figures tcomms-perf prints are not 0. */
EXPORT int cudaGraphLaunch(void *exec, void *stream)
{
    if (exec == NULL || !is_stream(stream) || capturing)
        return misuse("cudaGraphLaunch of no graph, on an unknown stream, or while capturing");
    nanosleep(&(struct timespec){0, 20000}, NULL);
    return OK;
}

EXPORT int cudaGraphDestroy(void *graph)
{
    live_graphs -= graph != NULL;
    free(graph);
    return OK;
}

EXPORT int cudaGraphExecDestroy(void *exec)
{
    live_graphs -= exec != NULL;
    free(exec);
    return OK;
}

__attribute__((destructor)) static void at_exit(void)
{
    if (live_buffers || live_streams || live_graphs || capturing)
        fprintf(stderr, "perf_cudart: leak at exit: %d buffer(s), %d stream(s), %d graph(s)%s\n", live_buffers,
                live_streams, live_graphs, capturing ? ", a capture never ended" : "");
}
