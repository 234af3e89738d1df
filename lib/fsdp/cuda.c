/* SPDX-License-Identifier: BSD-3-Clause */
/* FSDP runtime on a GPU: the device ops (rt.h) through the CUDA driver API, which is dlopen'ed at the finalize of
 * a CUDA runtime, so libtcomms links no CUDA library and loads on machines without a driver. Memory comes from
 * cuMemAlloc at finalize; element-wise work is kernels.cu's kernels (an embedded fatbin) on the caller's stream. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "../cuda/shim.h"
#include "../log.h"
#include "rt.h"

/* The fatbin of kernels.cu, generated into the build tree (lib/fsdp/local.mk). */
extern const unsigned char tc_fsdp_fatbin[];

/* The driver's entry points (lib/cuda/shim.h), set by every open that loads them (always the same table: atomic only
 * because two runtimes may finalize at once). */
static _Atomic(const tc_cuda_driver_t *) drv;

/* tc_error naming the driver call and the driver's text. */
static tcomms_status_t cu_error(CUresult r, const char *call)
{
    char what[256];
    return tc_error(r == CUDA_ERROR_OUT_OF_MEMORY ? TCOMMS_ERR_NO_MEMORY : TCOMMS_ERR_SYSTEM, "fsdp: %s",
                    tc_cuda_driver_describe(what, sizeof what, call, r));
}

#define CU_TRY(call, name)                                                                                           \
    do {                                                                                                             \
        CUresult r_ = (call);                                                                                        \
        if (r_ != CUDA_SUCCESS)                                                                                      \
            return cu_error(r_, name);                                                                               \
    } while (0)

enum { K_CAST, K_SCALE, K_ADD, K_COUNT };
static const char *const kernel_names[K_COUNT] = {"tc_fsdp_k_cast", "tc_fsdp_k_scale", "tc_fsdp_k_add"};

/* The lanes (rt.h): the caller's stream and, once lanes() made them, the runtime's own reduction and gather
 * streams; `stream` is the one work is queued on now. */
typedef struct cuda_dev {
    CUdevice device;
    CUcontext ctx;
    CUstream stream, lane[3];
    uint32_t sync_ms; /* what dev_sync waits at most */
    CUevent *ev;
    int nev;
    CUmodule module;
    CUfunction fn[K_COUNT];
} cuda_dev_t;

/* Calls run in the runtime's context; the caller's current context (normally the same) is restored after. */
typedef struct { CUcontext prev; int swapped; } ctx_guard_t;

static tcomms_status_t enter(const cuda_dev_t *d, ctx_guard_t *g)
{
    g->swapped = 0;
    CU_TRY(drv->cuCtxGetCurrent(&g->prev), "cuCtxGetCurrent");
    if (g->prev != d->ctx) {
        CU_TRY(drv->cuCtxSetCurrent(d->ctx), "cuCtxSetCurrent");
        g->swapped = 1;
    }
    return TCOMMS_SUCCESS;
}

static tcomms_status_t leave(const ctx_guard_t *g, tcomms_status_t st)
{
    if (g->swapped) {
        CUresult r = drv->cuCtxSetCurrent(g->prev);
        if (r != CUDA_SUCCESS && st == TCOMMS_SUCCESS)
            return cu_error(r, "cuCtxSetCurrent (restoring the caller's context)");
    }
    return st;
}

/* The kernels' dtype codes (kernels.cu). */
static int kdtype(tcomms_dtype_t t)
{
    switch (t) {
    case TCOMMS_FLOAT64: return 0;
    case TCOMMS_FLOAT32: return 1;
    case TCOMMS_BFLOAT16: return 2;
    case TCOMMS_FLOAT16: return 3;
    default: return -1;
    }
}

/* Grid-stride kernels: enough blocks to fill the GPU, never more than the elements need. */
static tcomms_status_t launch(cuda_dev_t *d, int k, size_t n, void **args)
{
    size_t blocks = (n + 255) / 256;
    if (blocks > 4096)
        blocks = 4096;
    ctx_guard_t g;
    tcomms_status_t st = enter(d, &g);
    if (st != TCOMMS_SUCCESS)
        return st;
    CUresult r = drv->cuLaunchKernel(d->fn[k], (unsigned)blocks, 1, 1, 256, 1, 1, 0, d->stream, args, NULL);
    return leave(&g, r == CUDA_SUCCESS ? TCOMMS_SUCCESS : cu_error(r, "cuLaunchKernel"));
}

static tcomms_status_t dev_alloc(void *dev, size_t bytes, void **out)
{
    cuda_dev_t *d = dev;
    *out = NULL;
    if (bytes == 0)
        return TCOMMS_SUCCESS;
    ctx_guard_t g;
    tcomms_status_t st = enter(d, &g);
    if (st != TCOMMS_SUCCESS)
        return st;
    CUdeviceptr p = 0;
    CUresult r = drv->cuMemAlloc(&p, bytes); /* 256-byte aligned, more than TC_FSDP_BYTE_ALIGN */
    if (r == CUDA_SUCCESS && (r = drv->cuMemsetD8Async(p, 0, bytes, d->stream)) != CUDA_SUCCESS) {
        drv->cuMemFree(p);
        return leave(&g, cu_error(r, "cuMemsetD8Async"));
    }
    if (r != CUDA_SUCCESS)
        return leave(&g, cu_error(r, "cuMemAlloc"));
    *out = (void *)(uintptr_t)p;
    return leave(&g, TCOMMS_SUCCESS);
}

static void dev_free(void *dev, void *p)
{
    cuda_dev_t *d = dev;
    ctx_guard_t g;
    if (enter(d, &g) != TCOMMS_SUCCESS)
        return;
    CUresult r = drv->cuMemFree((CUdeviceptr)(uintptr_t)p);
    if (r != CUDA_SUCCESS)
        tc_log(TCOMMS_LOG_WARN, "fsdp", "cuMemFree of %p failed (CUDA error %d)", p, (int)r);
    leave(&g, TCOMMS_SUCCESS);
}

static tcomms_status_t dev_zero(void *dev, void *buf, size_t bytes)
{
    cuda_dev_t *d = dev;
    ctx_guard_t g;
    tcomms_status_t st = enter(d, &g);
    if (st != TCOMMS_SUCCESS)
        return st;
    CUresult r = drv->cuMemsetD8Async((CUdeviceptr)(uintptr_t)buf, 0, bytes, d->stream);
    return leave(&g, r == CUDA_SUCCESS ? TCOMMS_SUCCESS : cu_error(r, "cuMemsetD8Async"));
}

static tcomms_status_t dev_copy(void *dev, void *dst, const void *src, size_t bytes)
{
    cuda_dev_t *d = dev;
    if (bytes == 0 || dst == src)
        return TCOMMS_SUCCESS;
    ctx_guard_t g;
    tcomms_status_t st = enter(d, &g);
    if (st != TCOMMS_SUCCESS)
        return st;
    /* Unified addressing: the driver tells host from device pointers. */
    CUresult r = drv->cuMemcpyAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, bytes, d->stream);
    return leave(&g, r == CUDA_SUCCESS ? TCOMMS_SUCCESS : cu_error(r, "cuMemcpyAsync"));
}

static tcomms_status_t dev_cast(void *dev, void *dst, tcomms_dtype_t dt, const void *src, tcomms_dtype_t st,
                                size_t n)
{
    if (dt == st)
        return dev_copy(dev, dst, src, n * tcomms_dtype_size(dt));
    int kd = kdtype(dt), ks = kdtype(st);
    unsigned long long count = n;
    void *args[] = {&dst, &kd, &src, &ks, &count};
    return launch(dev, K_CAST, n, args);
}

static tcomms_status_t dev_scale(void *dev, void *buf, size_t n, tcomms_dtype_t dtype, double s)
{
    int kd = kdtype(dtype);
    unsigned long long count = n;
    void *args[] = {&buf, &kd, &s, &count};
    return launch(dev, K_SCALE, n, args);
}

static tcomms_status_t dev_add(void *dev, void *dst, tcomms_dtype_t dt, const void *src, tcomms_dtype_t st,
                               size_t n, double s, int keep)
{
    int kd = kdtype(dt), ks = kdtype(st);
    unsigned long long count = n;
    void *args[] = {&dst, &kd, &src, &ks, &s, &keep, &count};
    return launch(dev, K_ADD, n, args);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Polled rather than cuStreamSynchronize, and bounded by the runtime's timeout: a collective NCCL cannot abort (a
 * copy-engine all-gather whose peer is lost waits on a flag in memory) blocks its stream for good. */
static tcomms_status_t dev_sync(void *dev)
{
    cuda_dev_t *d = dev;
    ctx_guard_t g;
    tcomms_status_t st = enter(d, &g);
    if (st != TCOMMS_SUCCESS)
        return st;
    static const char *const names[3] = {"caller's", "reduction", "gather"};
    uint64_t deadline = now_ms() + d->sync_ms;
    for (int i = 0; i < 3; i++) {
        CUstream s = d->lane[i];
        if (i > 0 && s == NULL)
            break;
        CUresult r;
        for (unsigned round = 0; (r = drv->cuStreamQuery(s)) == CUDA_ERROR_NOT_READY; round++) {
            if (now_ms() >= deadline)
                return leave(&g, tc_error(TCOMMS_ERR_TIMEOUT, "fsdp: the work queued on the %s stream did not "
                                          "finish within %u ms (a collective its communicator could not abort may "
                                          "block it for good)", names[i], d->sync_ms));
            struct timespec ts = {0, round < 100 ? 20000L : 1000000L}; /* 20 us, then 1 ms */
            nanosleep(&ts, NULL);
        }
        if (r != CUDA_SUCCESS)
            return leave(&g, cu_error(r, "cuStreamQuery"));
    }
    return leave(&g, TCOMMS_SUCCESS);
}

/* The reduction and gather lanes at the greatest priority: their work is short and frees what the compute waits
 * for (gradient slots, the next unit's weights). Events without timing, the cheapest kind to record and wait on. */
static tcomms_status_t dev_lanes(void *dev, int nevents)
{
    cuda_dev_t *d = dev;
    ctx_guard_t g;
    tcomms_status_t st = enter(d, &g);
    if (st != TCOMMS_SUCCESS)
        return st;
    int least = 0, greatest = 0;
    CUresult r = drv->cuCtxGetStreamPriorityRange(&least, &greatest);
    if (r != CUDA_SUCCESS)
        return leave(&g, cu_error(r, "cuCtxGetStreamPriorityRange"));
    for (int i = 1; i < 3; i++)
        if (d->lane[i] == NULL &&
            (r = drv->cuStreamCreateWithPriority(&d->lane[i], CU_STREAM_NON_BLOCKING, greatest)) != CUDA_SUCCESS)
            return leave(&g, cu_error(r, "cuStreamCreateWithPriority"));
    if ((d->ev = calloc((size_t)nevents, sizeof(*d->ev))) == NULL)
        return leave(&g, tc_error(TCOMMS_ERR_NO_MEMORY, "fsdp: out of memory"));
    for (; d->nev < nevents; d->nev++)
        if ((r = drv->cuEventCreate(&d->ev[d->nev], CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS)
            return leave(&g, cu_error(r, "cuEventCreate"));
    return leave(&g, TCOMMS_SUCCESS);
}

static tcomms_status_t dev_lane(void *dev, int lane, void **stream)
{
    cuda_dev_t *d = dev;
    d->stream = d->lane[lane];
    *stream = (void *)d->stream;
    return TCOMMS_SUCCESS;
}

/* Record event `ev` on a lane (signal), or make the lane wait for it (await). */
static tcomms_status_t lane_event(void *dev, int lane, int ev, int wait)
{
    cuda_dev_t *d = dev;
    ctx_guard_t g;
    tcomms_status_t st = enter(d, &g);
    if (st != TCOMMS_SUCCESS)
        return st;
    CUresult r = wait ? drv->cuStreamWaitEvent(d->lane[lane], d->ev[ev], 0)
                      : drv->cuEventRecord(d->ev[ev], d->lane[lane]);
    return leave(&g, r == CUDA_SUCCESS ? TCOMMS_SUCCESS : cu_error(r, wait ? "cuStreamWaitEvent" : "cuEventRecord"));
}

static tcomms_status_t dev_signal(void *dev, int lane, int ev)
{
    return lane_event(dev, lane, ev, 0);
}

static tcomms_status_t dev_await(void *dev, int lane, int ev)
{
    return lane_event(dev, lane, ev, 1);
}

static int dev_on_device(void *dev, const void *p)
{
    (void)dev;
    unsigned int type = 0;
    /* Pageable host memory is unknown to the driver: an error here means host. */
    if (drv->cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)p) != CUDA_SUCCESS)
        return 0;
    return type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_UNIFIED;
}

static void dev_close(void *dev)
{
    cuda_dev_t *d = dev;
    if (d == NULL)
        return;
    ctx_guard_t g;
    if (d->ctx != NULL && enter(d, &g) == TCOMMS_SUCCESS) {
        if (d->module != NULL)
            drv->cuModuleUnload(d->module);
        for (int i = 0; i < d->nev; i++)
            drv->cuEventDestroy(d->ev[i]);
        for (int i = 1; i < 3; i++)
            if (d->lane[i] != NULL)
                drv->cuStreamDestroy(d->lane[i]);
        leave(&g, TCOMMS_SUCCESS);
    }
    if (d->ctx != NULL)
        drv->cuDevicePrimaryCtxRelease(d->device);
    free(d->ev);
    free(d);
}

static const tc_fsdp_ops_t cuda_ops = {
    .name = "cuda", .device_type = TCOMMS_DEVICE_CUDA, .alloc = dev_alloc, .free = dev_free, .zero = dev_zero,
    .cast = dev_cast, .scale = dev_scale, .add = dev_add, .copy = dev_copy, .sync = dev_sync,
    .on_device = dev_on_device, .close = dev_close, .lanes = dev_lanes, .lane = dev_lane, .signal = dev_signal,
    .await = dev_await,
};

static tcomms_status_t load_kernels(cuda_dev_t *d)
{
    ctx_guard_t g;
    tcomms_status_t st = enter(d, &g);
    if (st != TCOMMS_SUCCESS)
        return st;
    CUresult r = drv->cuModuleLoadData(&d->module, tc_fsdp_fatbin);
    if (r != CUDA_SUCCESS)
        return leave(&g, cu_error(r, "cuModuleLoadData (the FSDP kernels, built for sm_80/sm_90)"));
    for (int k = 0; k < K_COUNT; k++)
        if ((r = drv->cuModuleGetFunction(&d->fn[k], d->module, kernel_names[k])) != CUDA_SUCCESS)
            return leave(&g, cu_error(r, kernel_names[k]));
    return leave(&g, TCOMMS_SUCCESS);
}

tcomms_status_t tc_fsdp_cuda_open(int device, void *stream, uint32_t sync_ms, const tc_fsdp_ops_t **ops,
                                  void **out)
{
    char why[512];
    const tc_cuda_driver_t *loaded = tc_cuda_driver_load(why, sizeof why);
    if (loaded == NULL)
        return tc_error(TCOMMS_ERR_NOT_SUPPORTED, "fsdp: the CUDA driver is not usable: %s", why);
    drv = loaded;
    cuda_dev_t *d = calloc(1, sizeof(*d));
    if (d == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "fsdp: out of memory");
    /* a cudaStream_t is a CUstream; NULL is the legacy default stream in both */
    d->stream = d->lane[0] = (CUstream)stream;
    d->sync_ms = sync_ms;
    tcomms_status_t st = TCOMMS_SUCCESS;
    CUresult r = drv->cuDeviceGet(&d->device, device);
    if (r != CUDA_SUCCESS)
        st = cu_error(r, "cuDeviceGet");
    else if ((r = drv->cuDevicePrimaryCtxRetain(&d->ctx, d->device)) != CUDA_SUCCESS)
        st = cu_error(r, "cuDevicePrimaryCtxRetain");
    else
        st = load_kernels(d);
    if (st != TCOMMS_SUCCESS) {
        if (r != CUDA_SUCCESS)
            d->ctx = NULL;
        dev_close(d);
        return st;
    }
    *ops = &cuda_ops;
    *out = d;
    return TCOMMS_SUCCESS;
}
