/* SPDX-License-Identifier: BSD-3-Clause */
/* Device twins of test_coll's guarded buffers (see mirror.h). A case holds at most a handful of buffers at once, so
 * a small array searched linearly is enough. */
#include "mirror.h"

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "gpu_util.h"

#define MIRROR_MAX 32

typedef struct mirror {
    const ref_buf_t *host;
    unsigned char *dev;
    size_t bytes; /* data and both guards */
} mirror_t;

static mirror_t live[MIRROR_MAX];
static int nlive;

static size_t total_bytes(const ref_buf_t *b)
{
    return b->count * ref_esize(b->dtype) + 2 * REF_GUARD_BYTES;
}

int mirror_add(ref_buf_t *b)
{
    if (nlive == MIRROR_MAX)
        return mrank_failf("FAIL mirror_add: more than %d buffers mirrored at once", MIRROR_MAX);
    mirror_t *m = &live[nlive];
    m->host = b;
    m->bytes = total_bytes(b);
    if (CU(cudaMalloc((void **)&m->dev, m->bytes)))
        return 1;
    nlive++;
    return 0;
}

void mirror_remove(const ref_buf_t *b)
{
    for (int k = 0; k < nlive; k++) {
        if (live[k].host != b)
            continue;
        CU(cudaFree(live[k].dev));
        live[k] = live[--nlive];
        return;
    }
}

void mirror_reset(void)
{
    while (nlive > 0)
        CU(cudaFree(live[--nlive].dev));
}

void *mirror_dev(const void *p)
{
    if (p == NULL)
        return NULL;
    uintptr_t a = (uintptr_t)p;
    for (int k = 0; k < nlive; k++) {
        uintptr_t lo = (uintptr_t)live[k].host->alloc;
        if (a >= lo && a <= lo + live[k].bytes)
            return live[k].dev + (a - lo);
    }
    mrank_logf("FAIL mirror_dev: host address %p is in no mirrored buffer", p);
    return (void *)(uintptr_t)p;
}

int mirror_in(void)
{
    int bad = 0;
    for (int k = 0; k < nlive && !bad; k++)
        bad = CU(cudaMemcpy(live[k].dev, live[k].host->alloc, live[k].bytes, cudaMemcpyHostToDevice));
    return bad;
}

int mirror_out(void)
{
    int bad = 0;
    for (int k = 0; k < nlive && !bad; k++)
        bad = CU(cudaMemcpy(live[k].host->alloc, live[k].dev, live[k].bytes, cudaMemcpyDeviceToHost));
    return bad;
}

int mirror_sync(void)
{
    return CU(cudaStreamSynchronize(0));
}
