/* SPDX-License-Identifier: BSD-3-Clause */
/* test_nccl's window case (backends/nccl/window.c): all_reduce in and out of place at two sizes, all_gather,
 * reduce_scatter and all_to_all (in and out of place) between symmetric windows, with an all_reduce on plain memory
 * between them, on three
 * communicators: the defaults (windows on the window communicator), TCOMMS_NCCL_WINDOW_ALL_REDUCE_MAX between the
 * two all_reduce sizes (the larger then runs on the plain communicator over the same memory), and
 * TCOMMS_NCCL_WINDOW_CTAS=0 (windows on the plain communicator, as NCCL has them). Each result is checked element
 * by element against sums made in double on the host. The first communicator is then aborted with its windows still
 * registered: its next call is TCOMMS_ERR_ABORTED, and deregistration, freeing and destroy succeed. */
#include <cuda_runtime_api.h>
#include <stdlib.h>

#include "../mrank.h"
#include "gpu_util.h"
#include "nccl_cases.h"

#define SMALL_COUNT ((size_t)1 << 18) /* floats: 1 MiB, past the small-message path */
#define LARGE_COUNT ((size_t)1 << 22) /* 16 MiB */

/* all_gather's result: block j is rank j's input; reduce_scatter's: this rank's block of the sum. */
typedef struct win_vals {
    nt_vals_t v;
    size_t count;
} win_vals_t;

static double gathered(size_t i, const void *arg)
{
    const win_vals_t *w = arg;
    nt_vals_t of = {(int)(i / w->count), w->v.size, w->v.rep};
    return nt_in_value(i % w->count, &of);
}

static double scattered(size_t i, const void *arg)
{
    const win_vals_t *w = arg;
    return nt_sum_value((size_t)w->v.rank * w->count + i, &w->v);
}

/* all_to_all's: block j is rank j's block for this rank. */
static double exchanged(size_t i, const void *arg)
{
    const win_vals_t *w = arg;
    nt_vals_t of = {(int)(i / w->count), w->v.size, w->v.rep};
    return nt_in_value((size_t)w->v.rank * w->count + i % w->count, &of);
}

static double poison(size_t i, const void *arg)
{
    (void)arg;
    return -1.0 - (double)(i % 7);
}

static int synced(int rank, tcomms_status_t st, const char *what)
{
    return nt_expect(st, TCOMMS_SUCCESS, rank, what) || CU(cudaStreamSynchronize(0));
}

/* One round on communicator c with windows s and r (size * LARGE_COUNT floats each). */
static int round_on(tcomms_comm_t *c, int rank, int size, float *s, float *r, int rep)
{
    nt_vals_t v = {rank, size, rep};
    int fails = 0;
    const size_t counts[2] = {SMALL_COUNT, LARGE_COUNT};
    for (int k = 0; k < 2 && !fails; k++) {
        size_t n = counts[k];
        fails += gpu_fill_f32(s, n, nt_in_value, &v) + gpu_fill_f32(r, n, poison, NULL);
        fails += synced(rank, tcomms_all_reduce(c, s, r, n, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL),
                        "all_reduce between windows");
        fails += gpu_expect_f32(r, n, nt_sum_value, &v, "all_reduce between windows");
        fails += synced(rank, tcomms_all_reduce(c, s, s, n, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL),
                        "in-place all_reduce in a window");
        fails += gpu_expect_f32(s, n, nt_sum_value, &v, "in-place all_reduce in a window");
    }
    fails += fails ? 0 : nt_all_reduce_check(c, rank, size, SMALL_COUNT, "all_reduce on plain memory");
    win_vals_t w = {v, SMALL_COUNT};
    size_t all = (size_t)size * SMALL_COUNT;
    if (!fails) {
        fails += gpu_fill_f32(s, SMALL_COUNT, nt_in_value, &v) + gpu_fill_f32(r, all, poison, NULL);
        fails += synced(rank, tcomms_all_gather(c, s, r, SMALL_COUNT, TCOMMS_FLOAT32, NULL, NULL),
                        "all_gather between windows");
        fails += gpu_expect_f32(r, all, gathered, &w, "all_gather between windows");
    }
    if (!fails) {
        fails += gpu_fill_f32(s, all, nt_in_value, &v) + gpu_fill_f32(r, SMALL_COUNT, poison, NULL);
        fails += synced(rank, tcomms_reduce_scatter(c, s, r, SMALL_COUNT, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL),
                        "reduce_scatter between windows");
        fails += gpu_expect_f32(r, SMALL_COUNT, scattered, &w, "reduce_scatter between windows");
    }
    /* 1 MiB blocks: NCCL's send/recv, not the small path. In place the send side is a staged copy, which must be
     * registered exactly as the receive buffer is on the communicator the call runs on (backends/nccl/scratch.c):
     * NCCL 2.28.3 hung here when the copy was registered there and the window, registered on the window
     * communicator only, was not. And nt_windows aborts the first communicator after this round: on 4 ranks NCCL
     * 2.28.3 crashed in that abort when all_to_all had run between windows on the window communicator. */
    for (int in_place = 0; in_place < 2 && !fails; in_place++) {
        const char *what = in_place ? "in-place all_to_all in a window" : "all_to_all between windows";
        float *out = in_place ? s : r;
        fails += gpu_fill_f32(s, all, nt_in_value, &v) + (in_place ? 0 : gpu_fill_f32(r, all, poison, NULL));
        fails += synced(rank, tcomms_all_to_all(c, s, out, SMALL_COUNT, TCOMMS_FLOAT32, NULL, NULL), what);
        fails += gpu_expect_f32(out, all, exchanged, &w, what);
    }
    return fails;
}

static int set(const char *name, const char *value)
{
    return value ? setenv(name, value, 1) : unsetenv(name);
}

/* A communicator made under the given TCOMMS_NCCL_WINDOW_* values (read at creation), with two windows. */
static int open_with(int rank, const char *ctas, const char *ar_max, tcomms_comm_t **c, float **s, float **r,
                     tcomms_mem_reg_t **sreg, tcomms_mem_reg_t **rreg, size_t bytes)
{
    int fails = set("TCOMMS_NCCL_WINDOW_CTAS", ctas) + set("TCOMMS_NCCL_WINDOW_ALL_REDUCE_MAX", ar_max);
    fails += fails ? 0 : nt_on_gpu(rank, NT_OP_TIMEOUT_MS, NULL, c);
    set("TCOMMS_NCCL_WINDOW_CTAS", NULL);
    set("TCOMMS_NCCL_WINDOW_ALL_REDUCE_MAX", NULL);
    fails += fails ? 0 : nt_window(*c, rank, bytes, s, sreg);
    return fails + (fails ? 0 : nt_window(*c, rank, bytes, r, rreg));
}

int nt_windows(int rank, int size, void *arg)
{
    (void)arg;
    int version = gpu_nccl_version();
    if (version >= 0 && version < 22700) {
        if (rank == 0)
            mrank_logf("SKIP test_nccl windows: NCCL %d has no symmetric windows (2.27)", version);
        return 0;
    }
    /* {TCOMMS_NCCL_WINDOW_CTAS, TCOMMS_NCCL_WINDOW_ALL_REDUCE_MAX}: 4 MiB lies between the two sizes */
    static const char *const env[3][2] = {{NULL, NULL}, {NULL, "4194304"}, {"0", NULL}};
    size_t bytes = (size_t)size * LARGE_COUNT * sizeof(float);
    int fails = 0;
    for (int k = 0; k < 3 && !fails; k++) {
        tcomms_comm_t *c = NULL;
        float *s = NULL, *r = NULL;
        tcomms_mem_reg_t *sreg = NULL, *rreg = NULL;
        fails += open_with(rank, env[k][0], env[k][1], &c, &s, &r, &sreg, &rreg, bytes);
        for (int rep = 0; rep < 2 && !fails; rep++)
            fails += round_on(c, rank, size, s, r, rep);
        if (k == 0 && c != NULL && !fails) {
            fails += nt_expect(tcomms_comm_abort(c), TCOMMS_SUCCESS, rank, "tcomms_comm_abort");
            fails += nt_expect(tcomms_all_reduce(c, s, r, SMALL_COUNT, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL),
                               TCOMMS_ERR_ABORTED, rank, "all_reduce between windows after the abort");
        }
        if (c != NULL)
            fails += nt_window_release(c, rank, r, rreg) + nt_window_release(c, rank, s, sreg) +
                     nt_destroy(c, rank);
        if (rank == 0 && !fails)
            mrank_logf("test_nccl windows: TCOMMS_NCCL_WINDOW_CTAS=%s TCOMMS_NCCL_WINDOW_ALL_REDUCE_MAX=%s: right",
                       env[k][0] ? env[k][0] : "(default)", env[k][1] ? env[k][1] : "(default)");
    }
    return fails;
}
