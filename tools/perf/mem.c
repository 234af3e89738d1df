/* SPDX-License-Identifier: BSD-3-Clause */
/* Buffers and ordering of tcomms-perf (see mem.h). Host buffers are page-aligned and zeroed at allocation, so the
 * first timed iteration does not pay for page faults. On cuda every copy is ordered on the rank's own stream and
 * waited for there: the stream does not sync with the legacy default stream, so a plain cudaMemcpy could land
 * after the operation meant to read its data. */
#include "mem.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"

#define PERF_ALIGN 4096

__attribute__((format(printf, 2, 3))) static int complain(const perf_mem_t *m, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tcomms-perf: rank %d: ", m->rank);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return -1;
}

static int cuda_failed(const perf_mem_t *m)
{
    return complain(m, "%s", perf_cuda_error());
}

static int is_cuda(const perf_mem_t *m)
{
    return m->type == TCOMMS_DEVICE_CUDA;
}

int perf_mem_open(perf_mem_t *m, const perf_args_t *a)
{
    *m = (perf_mem_t){.type = a->device.type, .name = tcomms_device_type_name(a->device.type),
                      .reg = a->local_register, .rank = -1};
    if (m->type == TCOMMS_DEVICE_CPU)
        return 0;
    if (!is_cuda(m)) {
        fprintf(stderr, "tcomms-perf: -D %s: this build places buffers on cpu and cuda only\n", m->name);
        return -1;
    }
    if (perf_cuda_open(&m->ngpus) != 0) {
        fprintf(stderr, "tcomms-perf: --device cuda: %s\n", perf_cuda_error());
        return -1;
    }
    return 0;
}

int perf_mem_bind(perf_mem_t *m, tcomms_comm_t *comm, int rank)
{
    m->comm = comm;
    m->rank = rank;
    if (!is_cuda(m))
        return 0;
    tcomms_device_t dev = {TCOMMS_DEVICE_CUDA, 0};
    tcomms_comm_device(comm, &dev);
    m->gpu = (dev.index > 0 ? dev.index : 0) % m->ngpus; /* as the NCCL backend maps it */
    if (perf_cuda_set_device(m->gpu) != 0 || perf_cuda_stream_create(&m->stream) != 0)
        return cuda_failed(m);
    m->opts.field_mask = TCOMMS_OP_OPT_STREAM;
    m->opts.stream = m->stream;
    return 0;
}

void perf_mem_close(perf_mem_t *m)
{
    if (m->stream != NULL && perf_cuda_stream_destroy(m->stream) != 0)
        cuda_failed(m);
    m->stream = NULL;
}

/* ---- buffers ------------------------------------------------------------------------------------------------- */

static int host_alloc(perf_mem_t *m, perf_buf_t *b)
{
    if (posix_memalign(&b->p, PERF_ALIGN, b->bytes) != 0) {
        b->p = NULL;
        return complain(m, "out of host memory for a buffer of %zu bytes", b->bytes);
    }
    memset(b->p, 0, b->bytes);
    return 0;
}

static int comm_failed(const perf_mem_t *m, const char *what, tcomms_status_t st)
{
    return complain(m, "%s: %s: %s", what, tcomms_strerror(st), tcomms_last_error());
}

/* -R 1|2: memory the backend suits to registration (ncclMemAlloc on NCCL), registered with the communicator. */
static int comm_alloc(perf_mem_t *m, perf_buf_t *b)
{
    tcomms_status_t st = tcomms_mem_alloc(m->comm, m->type, b->bytes, &b->p);
    if (st != TCOMMS_SUCCESS)
        return comm_failed(m, "tcomms_mem_alloc", st);
    b->from_comm = 1;
    unsigned flags = m->reg == 2 ? TCOMMS_MEM_REG_WINDOW : 0u;
    st = tcomms_mem_register(m->comm, m->type, b->p, b->bytes, flags, &b->reg);
    if (st != TCOMMS_SUCCESS)
        return comm_failed(m, m->reg == 2 ? "tcomms_mem_register (-R 2, a symmetric window)" : "tcomms_mem_register",
                           st);
    return 0;
}

int perf_buf_alloc(perf_mem_t *m, size_t bytes, int registered, perf_buf_t *b)
{
    *b = (perf_buf_t){.bytes = bytes ? bytes : 1};
    int st;
    if (!is_cuda(m))
        st = host_alloc(m, b);
    else if (registered && m->reg > 0)
        st = comm_alloc(m, b);
    else
        st = perf_cuda_malloc(&b->p, b->bytes) != 0 ? cuda_failed(m) : 0;
    if (st == 0 && is_cuda(m) && (perf_cuda_memset(b->p, 0, b->bytes, m->stream) != 0 || perf_mem_sync(m) != 0))
        st = cuda_failed(m);
    if (st != 0)
        perf_buf_free(m, b);
    return st;
}

void perf_buf_free(perf_mem_t *m, perf_buf_t *b)
{
    tcomms_status_t st;
    if (b->reg != NULL && (st = tcomms_mem_deregister(b->reg)) != TCOMMS_SUCCESS)
        comm_failed(m, "tcomms_mem_deregister", st);
    if (b->p != NULL && !is_cuda(m))
        free(b->p);
    else if (b->p != NULL && b->from_comm && (st = tcomms_mem_free(m->comm, m->type, b->p)) != TCOMMS_SUCCESS)
        comm_failed(m, "tcomms_mem_free", st);
    else if (b->p != NULL && !b->from_comm && perf_cuda_free(b->p) != 0)
        cuda_failed(m);
    *b = (perf_buf_t){0};
}

/* ---- copies and ordering ------------------------------------------------------------------------------------- */

int perf_mem_upload(perf_mem_t *m, void *dst, const void *host, size_t bytes)
{
    if (bytes == 0)
        return 0;
    if (!is_cuda(m)) {
        memmove(dst, host, bytes);
        return 0;
    }
    return perf_cuda_upload(dst, host, bytes, m->stream) != 0 ? cuda_failed(m) : perf_mem_sync(m);
}

int perf_mem_download(perf_mem_t *m, void *host, const void *src, size_t bytes)
{
    if (bytes == 0)
        return 0;
    if (!is_cuda(m)) {
        memmove(host, src, bytes);
        return 0;
    }
    return perf_cuda_download(host, src, bytes, m->stream) != 0 ? cuda_failed(m) : perf_mem_sync(m);
}

int perf_mem_sync(perf_mem_t *m)
{
    if (!is_cuda(m))
        return 0;
    return perf_cuda_stream_sync(m->stream) != 0 ? cuda_failed(m) : 0;
}

/* ---- graphs -------------------------------------------------------------------------------------------------- */

int perf_mem_capture_begin(perf_mem_t *m)
{
    return perf_cuda_capture_begin(m->stream) != 0 ? cuda_failed(m) : 0;
}

int perf_mem_capture_end(perf_mem_t *m, void **graph)
{
    return perf_cuda_capture_end(m->stream, graph) != 0 ? cuda_failed(m) : 0;
}

int perf_mem_replay(perf_mem_t *m, void *graph, int times)
{
    for (int k = 0; k < times; k++)
        if (perf_cuda_graph_launch(graph, m->stream) != 0)
            return cuda_failed(m);
    return 0;
}

void perf_mem_graph_free(void *graph)
{
    perf_cuda_graph_free(graph);
}
