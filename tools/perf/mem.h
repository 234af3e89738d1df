/* SPDX-License-Identifier: BSD-3-Clause */
/* Where tcomms-perf's buffers live and how its operations are ordered there: host memory for --device cpu; for --device cuda
 * a GPU of this rank, one stream that every operation (opts.stream) and copy goes on, buffers from cudaMalloc or,
 * with -R 1|2, from tcomms_mem_alloc and registered with the communicator. The sweep (bench.c) only goes through
 * this interface, so it reads the same on both. */
#ifndef PERF_MEM_H
#define PERF_MEM_H

#include <stddef.h>

#include <tcomms/tcomms.h>

#include "args.h"

typedef struct perf_mem {
    tcomms_device_type_t type;
    const char *name;        /* "cpu", "cuda": for messages */
    int reg;                 /* -R: 0 plain buffers, 1 registered, 2 symmetric windows (ignored on cpu) */
    int rank;                /* for messages, once bound */
    tcomms_comm_t *comm;
    void *stream;            /* cuda: this rank's stream */
    int gpu, ngpus;          /* cuda: the GPU used, and how many are visible */
    tcomms_op_opts_t opts;   /* for every operation: the stream on cuda, nothing on cpu */
} perf_mem_t;

/* A buffer and what it takes to release it. */
typedef struct perf_buf {
    void *p;
    size_t bytes;
    int from_comm;           /* allocated by tcomms_mem_alloc */
    tcomms_mem_reg_t *reg;   /* its registration, or NULL */
} perf_buf_t;

/* Before the communicator exists: what -D needs (for cuda: the runtime and a visible GPU). 0, or -1 after a
 * message on stderr naming what is missing. */
int perf_mem_open(perf_mem_t *m, const perf_args_t *a);
/* Once `comm` exists: pick the GPU (the communicator's device index modulo the GPUs visible: --device cuda means the
 * local rank's) and create the stream. 0, or -1 after a message. */
int perf_mem_bind(perf_mem_t *m, tcomms_comm_t *comm, int rank);
void perf_mem_close(perf_mem_t *m);

/* `bytes` zeroed bytes (at least one), registered as -R says when `registered`. Collective when a registration
 * is (-R 2 windows): every rank allocates the same sizes in the same order. 0, or -1 after a message. */
int perf_buf_alloc(perf_mem_t *m, size_t bytes, int registered, perf_buf_t *b);
void perf_buf_free(perf_mem_t *m, perf_buf_t *b);

/* Copies between host memory and a buffer, complete on return. 0, or -1 after a message. */
int perf_mem_upload(perf_mem_t *m, void *dst, const void *host, size_t bytes);
int perf_mem_download(perf_mem_t *m, void *host, const void *src, size_t bytes);
/* Block the host until everything ordered on the stream is done (nothing to do on cpu). 0, or -1 after a
 * message. */
int perf_mem_sync(perf_mem_t *m);

/* CUDA graphs (-G): capture the operations ordered on the stream between begin and end into *graph; replay it
 * `times` times (not waited for); free it. cuda only. 0, or -1 after a message. */
int perf_mem_capture_begin(perf_mem_t *m);
int perf_mem_capture_end(perf_mem_t *m, void **graph);
int perf_mem_replay(perf_mem_t *m, void *graph, int times);
void perf_mem_graph_free(void *graph);

#endif
