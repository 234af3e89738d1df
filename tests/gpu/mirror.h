/* SPDX-License-Identifier: BSD-3-Clause */
/* Device mirrors for test_coll built as test_coll_cuda (-DTC_TEST_CUDA): every guarded host buffer of a case gets a
 * cudaMalloc'ed twin, guards included. A case copies all twins in before its operation, passes device addresses
 * (mirror_dev), copies them back after, and checks the host buffers against the same reference as on CPU. */
#ifndef TESTS_GPU_MIRROR_H
#define TESTS_GPU_MIRROR_H

#include "../coll_ref.h"

/* Give b a device twin (0), or log and return 1. */
int mirror_add(ref_buf_t *b);
/* Free b's twin (no-op without one). */
void mirror_remove(const ref_buf_t *b);
/* Free every twin left (a case that stopped early leaks its host buffers, not device memory). */
void mirror_reset(void);
/* The device address of host address p inside a mirrored buffer (its guards and end included); NULL for NULL. An
 * address outside every mirrored buffer is logged and returned unchanged, so the operation fails visibly. */
void *mirror_dev(const void *p);
/* Copy every mirrored buffer host -> device / device -> host with cudaMemcpy, which is ordered on the legacy
 * default stream after the operations posted there (and after tcomms_work_wait's stream-ordered wait). 0 or 1. */
int mirror_in(void);
int mirror_out(void);
/* cudaStreamSynchronize of the legacy default stream: 0 or 1. */
int mirror_sync(void);

#endif
