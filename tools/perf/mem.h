/* Buffers of tcomms-perf by device type: allocation and copies to and from host memory, behind one small table so
 * that device memory (CUDA, for the NCCL backend) is one more entry. The sweep and the check only go through it. */
#ifndef PERF_MEM_H
#define PERF_MEM_H

#include <stddef.h>

#include <tcomms/tcomms.h>

typedef struct perf_mem {
    const char *name;
    /* `bytes` zeroed bytes (a usable pointer even for 0), or NULL when out of memory. */
    void *(*alloc)(size_t bytes);
    void (*release)(void *p);
    /* Copy between host memory and a buffer of this type; 0, or -1 with a message on stderr. */
    int (*upload)(void *dst, const void *host, size_t bytes);
    int (*download)(void *host, const void *src, size_t bytes);
} perf_mem_t;

/* The memory functions for buffers on devices of `type`, or NULL where this build of tcomms-perf cannot place
 * buffers there. */
const perf_mem_t *perf_mem_for(tcomms_device_type_t type);

#endif
