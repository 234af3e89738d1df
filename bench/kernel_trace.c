/* SPDX-License-Identifier: BSD-3-Clause */
/* kernel_trace: a CUDA injection library (CUDA_INJECTION64_PATH) that records every kernel, memory copy
 * (peer-to-peer included) and memset through CUPTI's activity API, with its GPU start and end, device and stream,
 * and writes them to $KERNEL_TRACE_OUT.<pid> at exit, one line each:
 *   K start end device stream grid name | C start end device stream bytes copyKIND | P ... bytes p2pSRC->DST |
 *   S start end device stream bytes memset
 * bench/kernel-trace builds it, runs a program under it and summarises the files with bench/kernel_overlap.py. */
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define BUFFER_BYTES (16u << 20)

static FILE *out;

static void CUPTIAPI give_buffer(uint8_t **buf, size_t *size, size_t *max_records)
{
    *buf = aligned_alloc(8, BUFFER_BYTES);
    *size = *buf != NULL ? BUFFER_BYTES : 0;
    *max_records = 0;
}

static void CUPTIAPI take_buffer(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
    (void)ctx, (void)stream, (void)size;
    CUpti_Activity *r = NULL;
    while (out != NULL && cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
        if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || r->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)r;
            fprintf(out, "K %llu %llu %u %u %u %s\n", (unsigned long long)k->start, (unsigned long long)k->end,
                    k->deviceId, k->streamId, (unsigned)(k->gridX * k->gridY * k->gridZ), k->name);
        } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)r;
            fprintf(out, "C %llu %llu %u %u %llu copy%u\n", (unsigned long long)m->start, (unsigned long long)m->end,
                    m->deviceId, m->streamId, (unsigned long long)m->bytes, (unsigned)m->copyKind);
        } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY2) {
            const CUpti_ActivityMemcpyPtoP4 *m = (const CUpti_ActivityMemcpyPtoP4 *)r;
            fprintf(out, "P %llu %llu %u %u %llu p2p%u->%u\n", (unsigned long long)m->start,
                    (unsigned long long)m->end, m->deviceId, m->streamId, (unsigned long long)m->bytes,
                    m->srcDeviceId, m->dstDeviceId);
        } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
            const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)r;
            fprintf(out, "S %llu %llu %u %u %llu memset\n", (unsigned long long)m->start, (unsigned long long)m->end,
                    m->deviceId, m->streamId, (unsigned long long)m->bytes);
        }
    }
    free(buf);
}

static void finish(void)
{
    cuptiActivityFlushAll(1);
    if (out != NULL)
        fclose(out);
    out = NULL;
}

/* Called by the CUDA driver at cuInit when CUDA_INJECTION64_PATH names this library. */
int InitializeInjection(void)
{
    const char *base = getenv("KERNEL_TRACE_OUT");
    char path[4096];
    snprintf(path, sizeof(path), "%s.%d", base != NULL ? base : "kernel_trace", (int)getpid());
    if ((out = fopen(path, "w")) == NULL) {
        fprintf(stderr, "kernel_trace: cannot write %s\n", path);
        return 0;
    }
    static const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                               CUPTI_ACTIVITY_KIND_MEMCPY2, CUPTI_ACTIVITY_KIND_MEMSET};
    if (cuptiActivityRegisterCallbacks(give_buffer, take_buffer) != CUPTI_SUCCESS) {
        fprintf(stderr, "kernel_trace: cuptiActivityRegisterCallbacks failed\n");
        return 0;
    }
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        if (cuptiActivityEnable(kinds[i]) != CUPTI_SUCCESS)
            fprintf(stderr, "kernel_trace: activity kind %d not recorded\n", (int)kinds[i]);
    atexit(finish);
    return 1;
}
