/* SPDX-License-Identifier: BSD-3-Clause */
/* The few CUDA runtime calls tcomms-perf makes for --device cuda, loaded at run time by the CUDA shim (lib/cuda/shim.h:
 * libcudart.so.13, .12, or libcudart.so), so the tool needs no CUDA to build or to start: only --device cuda asks for
 * it. Streams, graphs and executable graphs are opaque pointers here (cudaStream_t and friends are pointers too). */
#ifndef PERF_CUDA_H
#define PERF_CUDA_H

#include <stddef.h>

/* Load the runtime (TCOMMS_PERF_CUDART, when set, names the only library to try) and count the visible GPUs.
 * 0, or -1 with why in perf_cuda_error(): no runtime, a missing symbol, or no GPU. */
int perf_cuda_open(int *ngpus);
/* Why the last call here failed ("cudaMalloc: out of memory"). */
const char *perf_cuda_error(void);

/* Each returns 0, or -1 with perf_cuda_error() naming the call and the runtime's error string. */
int perf_cuda_set_device(int gpu);
/* The PCI domain, bus and device numbers of `gpu`, for nccl-tests' "#  Rank" line. */
int perf_cuda_pci(int gpu, int *domain, int *bus, int *device);
int perf_cuda_stream_create(void **stream);
int perf_cuda_stream_destroy(void *stream);
int perf_cuda_stream_sync(void *stream);
int perf_cuda_malloc(void **p, size_t bytes);
int perf_cuda_free(void *p);
/* Ordered on `stream`, which the caller synchronises before touching `host` (or the device data) again. */
int perf_cuda_memset(void *dev, int value, size_t bytes, void *stream);
int perf_cuda_upload(void *dev, const void *host, size_t bytes, void *stream);
int perf_cuda_download(void *host, const void *dev, size_t bytes, void *stream);

/* CUDA graphs (-G): capture what this thread orders on `stream` (thread-local capture mode, as nccl-tests, so
 * other threads such as a backend's watchdog stay free to query events), instantiate it, replay it. */
int perf_cuda_capture_begin(void *stream);
int perf_cuda_capture_end(void *stream, void **exec);
int perf_cuda_graph_launch(void *exec, void *stream);
void perf_cuda_graph_free(void *exec);

#endif
