/* SPDX-License-Identifier: BSD-3-Clause */
/* --cpu-bind auto: each rank gets its own contiguous block of the CPUs tcomms-run may use, so ranks neither move
 * between cores nor share one (per-call times of GPU benchmarks varied by 2-3 us with where each process landed).
 * The launcher sets its own affinity to a rank's block just before spawning it, the rank inherits it, and the
 * launcher's own affinity is restored afterwards. */
#include <sched.h>

#include "run.h"

static cpu_set_t original;
static int have_original;

int run_bind_rank(int r, int n)
{
    if (!have_original) {
        if (sched_getaffinity(0, sizeof original, &original) != 0)
            return -1;
        have_original = 1;
    }
    int cpus[CPU_SETSIZE], m = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &original))
            cpus[m++] = c;
    if (m == 0)
        return -1;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (m >= n) {
        for (int k = (int)((long)r * m / n); k < (int)((long)(r + 1) * m / n); k++)
            CPU_SET(cpus[k], &set);
    } else {
        CPU_SET(cpus[r % m], &set); /* more ranks than CPUs: round robin, one CPU each */
    }
    return sched_setaffinity(0, sizeof set, &set);
}

void run_bind_restore(void)
{
    if (have_original)
        sched_setaffinity(0, sizeof original, &original);
}
