/* SPDX-License-Identifier: BSD-3-Clause */
/* The CUDA runtime of tcomms-perf (see cuda.h), through the CUDA shim (lib/cuda/shim.h), which this program links its
 * own copy of: the runtime's entry points by their own names, loaded when --device cuda asks for them. */
#include "cuda.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../lib/cuda/shim.h"

static const tc_cudart_t *rt;
static char last_error[512];

__attribute__((format(printf, 1, 2))) static int failed(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return -1;
}

/* A failed runtime call `what`, in the shim's words. */
static int check(cudaError_t err, const char *what)
{
    if (err == cudaSuccess)
        return 0;
    tc_cudart_describe(last_error, sizeof last_error, what, err);
    return -1;
}

const char *perf_cuda_error(void)
{
    return last_error[0] ? last_error : "no error";
}

int perf_cuda_open(int *ngpus)
{
    *ngpus = 0;
    if (rt == NULL) {
        char why[400];
        const char *only = getenv("TCOMMS_PERF_CUDART");
        if ((rt = tc_cudart_load(only != NULL && only[0] != '\0' ? only : NULL, why, sizeof why)) == NULL)
            return failed("%s%s", only != NULL && only[0] != '\0' ? "TCOMMS_PERF_CUDART: " : "", why);
    }
    int n = 0;
    cudaError_t err = rt->cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        char what[300];
        return failed("no CUDA GPU is usable: %s",
                      tc_cudart_describe(what, sizeof what, "cudaGetDeviceCount", err));
    }
    if (n < 1)
        return failed("no CUDA GPU is visible (cudaGetDeviceCount found 0; see CUDA_VISIBLE_DEVICES)");
    *ngpus = n;
    return 0;
}

int perf_cuda_set_device(int gpu)
{
    return check(rt->cudaSetDevice(gpu), "cudaSetDevice");
}

int perf_cuda_pci(int gpu, int *domain, int *bus, int *device)
{
    *domain = *bus = *device = 0;
    if (check(rt->cudaDeviceGetAttribute(domain, cudaDevAttrPciDomainId, gpu), "cudaDeviceGetAttribute(PciDomainId)") ||
        check(rt->cudaDeviceGetAttribute(bus, cudaDevAttrPciBusId, gpu), "cudaDeviceGetAttribute(PciBusId)"))
        return -1;
    return check(rt->cudaDeviceGetAttribute(device, cudaDevAttrPciDeviceId, gpu),
                 "cudaDeviceGetAttribute(PciDeviceId)");
}

int perf_cuda_stream_create(void **stream)
{
    cudaStream_t s = NULL;
    int st = check(rt->cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    *stream = s;
    return st;
}

int perf_cuda_stream_destroy(void *stream)
{
    return check(rt->cudaStreamDestroy(stream), "cudaStreamDestroy");
}

int perf_cuda_stream_sync(void *stream)
{
    return check(rt->cudaStreamSynchronize(stream), "cudaStreamSynchronize");
}

int perf_cuda_malloc(void **p, size_t bytes)
{
    *p = NULL;
    return check(rt->cudaMalloc(p, bytes), "cudaMalloc");
}

int perf_cuda_free(void *p)
{
    return check(rt->cudaFree(p), "cudaFree");
}

int perf_cuda_memset(void *dev, int value, size_t bytes, void *stream)
{
    return check(rt->cudaMemsetAsync(dev, value, bytes, stream), "cudaMemsetAsync");
}

int perf_cuda_upload(void *dev, const void *host, size_t bytes, void *stream)
{
    return check(rt->cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync to the GPU");
}

int perf_cuda_download(void *host, const void *dev, size_t bytes, void *stream)
{
    return check(rt->cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync to the host");
}

int perf_cuda_capture_begin(void *stream)
{
    return check(rt->cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
}

int perf_cuda_capture_end(void *stream, void **exec)
{
    cudaGraph_t graph = NULL;
    cudaGraphExec_t e = NULL;
    *exec = NULL;
    if (check(rt->cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture") != 0)
        return -1;
    int st = check(rt->cudaGraphInstantiateWithFlags(&e, graph, 0), "cudaGraphInstantiateWithFlags");
    rt->cudaGraphDestroy(graph); /* the executable graph does not need it */
    *exec = e;
    return st;
}

int perf_cuda_graph_launch(void *exec, void *stream)
{
    return check(rt->cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
}

void perf_cuda_graph_free(void *exec)
{
    if (exec != NULL)
        rt->cudaGraphExecDestroy(exec);
}
