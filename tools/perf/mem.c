/* Host buffers for tcomms-perf (see mem.h). Page-aligned and zeroed at allocation, so the first timed iteration
 * does not pay for page faults. CUDA buffers are not placed by this build yet: perf_mem_for() says so with NULL. */
#include "mem.h"

#include <stdlib.h>
#include <string.h>

#define PERF_ALIGN 4096

static void *host_alloc(size_t bytes)
{
    void *p = NULL;
    size_t n = bytes ? bytes : 1;
    if (posix_memalign(&p, PERF_ALIGN, n) != 0)
        return NULL;
    memset(p, 0, n);
    return p;
}

static int host_copy(void *dst, const void *src, size_t bytes)
{
    if (bytes)
        memmove(dst, src, bytes);
    return 0;
}

static const perf_mem_t host_mem = {"cpu", host_alloc, free, host_copy, host_copy};

const perf_mem_t *perf_mem_for(tcomms_device_type_t type)
{
    return type == TCOMMS_DEVICE_CPU ? &host_mem : NULL;
}
