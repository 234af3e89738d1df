/* SPDX-License-Identifier: BSD-3-Clause */
/* Helpers shared by the GPU test programs (test_coll_cuda, test_nccl): finding GPUs without touching CUDA in the
 * parent process (ranks are forked, and a CUDA context does not survive fork), binding a rank to its GPU, checking
 * CUDA calls, and float buffers on the device filled and checked through host copies. */
#ifndef TESTS_GPU_UTIL_H
#define TESTS_GPU_UTIL_H

#include <stddef.h>

#include "../mrank.h"

#define GPU_SKIP 77 /* automake's "skipped" exit status */

/* Number of visible CUDA devices, found in a forked child so the caller never initialises CUDA. On 0, `why`
 * holds the reason (the CUDA runtime's message, or how the probe failed). */
int gpu_probe(char *why, size_t len);

/* The GPU count found by gpu_probe, for the ranks (set before forking them). */
extern int gpu_count;

/* In a rank: cudaSetDevice(device); logs and returns 1 on failure, 0 otherwise. */
int gpu_bind(int device);

/* NCCL_VERSION_CODE of the libnccl.so.2 this process would load (dlopen + ncclGetVersion), or -1. */
int gpu_nccl_version(void);

/* mrank_run_ex, with a line on stdout before and after ("test_nccl: case split_hints on 4 ranks: passed in 12.3
 * s"), flushed at once: run.sh shows these as they come, so a run killed from outside shows which case it was in. */
int gpu_run_case(const char *prog, const char *what, int nranks, mrank_fn_t fn, void *arg, int timeout_s,
                 unsigned expect_killed);

/* Log a failed CUDA runtime call (code != 0) with its message; returns 1 on failure, 0 on success. */
int gpu_check(int code, const char *call, const char *file, int line);
#define CU(call) gpu_check((int)(call), #call, __FILE__, __LINE__)

/* Device float32 buffers: allocate; fill element i with fn(i, arg) (complete on return); read back with cudaMemcpy
 * on the legacy stream and compare exactly with fn(i, arg) (values are small integers). Each returns the number of
 * failures (0 = fine) and logs what differs. */
typedef double (*gpu_value_fn)(size_t i, const void *arg);
int gpu_alloc_f32(float **dev, size_t n);
int gpu_fill_f32(float *dev, size_t n, gpu_value_fn fn, const void *arg);
int gpu_expect_f32(const float *dev, size_t n, gpu_value_fn fn, const void *arg, const char *what);

#endif
