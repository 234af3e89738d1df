/* SPDX-License-Identifier: BSD-3-Clause */
/* The monotonic clock behind every deadline and timing in tcomms. Header-only, so backend modules and tools, which
 * do not link the core's internals, read the same clock the same way (-I lib/util is on every target's path). */
#ifndef TC_CLOCK_H
#define TC_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds on CLOCK_MONOTONIC: immune to the wall clock being set, meaningless across processes or hosts. */
static inline uint64_t tc_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t tc_now_ms(void)
{
    return tc_now_ns() / 1000000u;
}

/* CLOCK_MONOTONIC_COARSE: the time of the last scheduler tick, read without the timer hardware, so far cheaper on
 * a per-operation fast path; it lags tc_now_ns by up to one tick (1-10 ms, by the kernel's HZ). A deadline taken
 * from it needs that much slack to never fire early. */
static inline uint64_t tc_now_coarse_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
