/* SPDX-License-Identifier: BSD-3-Clause */
/* NCCL backend behaviour on GPUs (issue 5), one forked rank per GPU (tests/mrank.c), 2 ranks and 4 when 4 GPUs are
 * visible: eager init and binding, split with hints, unbound parents, stream semantics of wait and synchronize,
 * CUDA graph capture, a peer that never joins (timeout, then ABORTED), a mixed cpu+cuda communicator, the call
 * check on disagreeing calls, grouped send/recv, buffer registration, copy-engine collectives between windows, the
 * small-message path (one-shot kernels), a rank dying inside ncclCommSplit, launches NCCL refuses,
 * tcomms_comm_abort (nccl_abort.c), tcomms_comm_shrink (nccl_shrink.c), the flight record naming a rank that skipped
 * an operation (nccl_flight.c) and the window communicator (nccl_window.c); the last three and registration have
 * cases of their own, "shrink", "flight", "windows" and "registration" (CK_RUN_CASE=windows runs that alone). Without 2 GPUs it exits 77 (skip) saying
 * why. */
#include <check.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tcomms/tcomms.h>

#include "../mrank.h"
#include "gpu_util.h"
#include "nccl_cases.h"

#define JOB_TIMEOUT_S 150

static int sizes[2];
static int nsizes;

/* ---- helpers shared with nccl_cases.c ------------------------------------------------------------------------- */

const char *cpu_backend;

int nt_expect(tcomms_status_t got, tcomms_status_t want, int rank, const char *what)
{
    if (got == want)
        return 0;
    return mrank_failf("FAIL rank %d: %s returned %s, expected %s (%s)", rank, what, tcomms_strerror(got),
                       tcomms_strerror(want), tcomms_last_error());
}

int nt_create(tcomms_comm_t **out, const char *backend, int cuda_index, const tcomms_hints_t *hints,
              tcomms_status_t *status)
{
    tcomms_comm_params_t p = {0};
    p.field_mask = TCOMMS_COMM_PARAM_BACKEND | TCOMMS_COMM_PARAM_TIMEOUT;
    p.backend = backend;
    p.timeout_ms = NT_OP_TIMEOUT_MS;
    if (cuda_index != NT_ON_CPU) {
        p.field_mask |= TCOMMS_COMM_PARAM_DEVICE;
        p.device.type = TCOMMS_DEVICE_CUDA;
        p.device.index = cuda_index;
    }
    if (hints) {
        p.field_mask |= TCOMMS_COMM_PARAM_HINTS;
        p.hints = hints;
    }
    *out = NULL;
    tcomms_status_t st = tcomms_comm_create(&p, out);
    if (status)
        *status = st;
    if (st == TCOMMS_SUCCESS)
        return 0;
    if (!status)
        mrank_logf("FAIL: tcomms_comm_create(backend %s, device %s%d) returned %s (%s)", backend,
                   cuda_index == NT_ON_CPU ? "cpu" : "cuda:", cuda_index == NT_ON_CPU ? 0 : cuda_index,
                   tcomms_strerror(st), tcomms_last_error());
    return 1;
}

int nt_on_gpu(int rank, uint32_t timeout_ms, const tcomms_hints_t *hints, tcomms_comm_t **out)
{
    tcomms_comm_params_t p = {0};
    p.field_mask = TCOMMS_COMM_PARAM_BACKEND | TCOMMS_COMM_PARAM_TIMEOUT | TCOMMS_COMM_PARAM_DEVICE;
    p.backend = "nccl";
    p.timeout_ms = timeout_ms;
    p.device.type = TCOMMS_DEVICE_CUDA;
    p.device.index = -1;
    if (hints) {
        p.field_mask |= TCOMMS_COMM_PARAM_HINTS;
        p.hints = hints;
    }
    *out = NULL;
    return gpu_bind(rank % gpu_count) || nt_expect(tcomms_comm_create(&p, out), TCOMMS_SUCCESS, rank, "create");
}

int nt_destroy(tcomms_comm_t *comm, int rank)
{
    return comm ? nt_expect(tcomms_comm_destroy(comm), TCOMMS_SUCCESS, rank, "tcomms_comm_destroy") : 0;
}

double nt_in_value(size_t i, const void *arg)
{
    const nt_vals_t *v = arg;
    return (double)((v->rank + 1) * (int)(i % 5 + 1) + v->rep);
}

double nt_sum_value(size_t i, const void *arg)
{
    const nt_vals_t *v = arg;
    double acc = 0;
    for (int r = 0; r < v->size; r++) {
        nt_vals_t one = {r, v->size, v->rep};
        acc += nt_in_value(i, &one);
    }
    return acc;
}

int nt_all_reduce_check(tcomms_comm_t *comm, int rank, int size, size_t n, const char *what)
{
    float *d = NULL;
    nt_vals_t v = {rank, size, 0};
    if (gpu_alloc_f32(&d, n))
        return 1;
    int bad = gpu_fill_f32(d, n, nt_in_value, &v) ||
              nt_expect(tcomms_all_reduce(comm, d, d, n, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL), TCOMMS_SUCCESS,
                        rank, what) ||
              CU(cudaStreamSynchronize(0)) || gpu_expect_f32(d, n, nt_sum_value, &v, what);
    CU(cudaFree(d));
    return bad;
}

/* ---- the Check side ------------------------------------------------------------------------------------------- */

/* Each test runs one rank function on sizes[_i] ranks; the 4096 shared bytes are the ranks' host barrier counters. */
static void run_job(mrank_fn_t fn, int i, const char *name)
{
    void *shared = mrank_shared_alloc(4096);
    ck_assert_ptr_nonnull(shared);
    int failing = gpu_run_case("test_nccl", name, sizes[i], fn, shared, JOB_TIMEOUT_S, 0);
    mrank_shared_free(shared, 4096);
    ck_assert_msg(failing == 0, "%s on %d ranks: %d rank(s) failed (see stderr)", name, sizes[i], failing);
}

/* As run_job, where the last rank kills itself (nccl_death.c). */
static void run_job_losing_one(mrank_fn_t fn, int i, const char *name)
{
    int failing = gpu_run_case("test_nccl", name, sizes[i], fn, NULL, JOB_TIMEOUT_S, 1u << (sizes[i] - 1));
    ck_assert_msg(failing == 0, "%s on %d ranks: %d rank(s) failed (see stderr)", name, sizes[i], failing);
}

#define NCCL_TEST(name)                                                                                              \
    START_TEST(test_##name)                                                                                          \
    {                                                                                                                \
        run_job(nt_##name, _i, #name);                                                                               \
    }                                                                                                                \
    END_TEST

NCCL_TEST(eager_init)
NCCL_TEST(split_hints)
NCCL_TEST(split_vote)
NCCL_TEST(unbound)
NCCL_TEST(stream_semantics)
NCCL_TEST(graph_capture)
NCCL_TEST(peer_timeout)
NCCL_TEST(mixed)
NCCL_TEST(call_check)
NCCL_TEST(group_ring)
NCCL_TEST(registration)
NCCL_TEST(copy_engine)
NCCL_TEST(windows)
NCCL_TEST(small_path)
NCCL_TEST(split_stall)
NCCL_TEST(launch_failure)
NCCL_TEST(abort)
NCCL_TEST(flight_blocking)
NCCL_TEST(flight_handle)

START_TEST(test_ce_peer_timeout)
{
    run_job_losing_one(nt_ce_peer_timeout, _i, "ce_peer_timeout");
}
END_TEST

NCCL_TEST(shrink_healthy)

START_TEST(test_shrink_after_death)
{
    run_job_losing_one(nt_shrink_after_death, _i, "shrink_after_death");
}
END_TEST

START_TEST(test_split_death_member)
{
    run_job_losing_one(nt_split_death_member, _i, "split_death_member");
}
END_TEST

START_TEST(test_split_death_nonmember)
{
    run_job_losing_one(nt_split_death_nonmember, _i, "split_death_nonmember");
}
END_TEST

static void add_tests(Suite *s, int nbackends)
{
    (void)nbackends; /* CPU backends: these tests run on nccl */
    TCase *tc = mrank_tcase(s, "gpu", JOB_TIMEOUT_S + 30);
    tcase_add_loop_test(tc, test_eager_init, 0, nsizes);
    tcase_add_loop_test(tc, test_split_hints, 0, nsizes);
    tcase_add_loop_test(tc, test_split_vote, 0, nsizes);
    tcase_add_loop_test(tc, test_unbound, 0, nsizes);
    tcase_add_loop_test(tc, test_stream_semantics, 0, nsizes);
    tcase_add_loop_test(tc, test_graph_capture, 0, nsizes);
    tcase_add_loop_test(tc, test_peer_timeout, 0, nsizes);
    tcase_add_loop_test(tc, test_ce_peer_timeout, 0, nsizes);
    tcase_add_loop_test(tc, test_mixed, 0, nsizes);
    tcase_add_loop_test(tc, test_call_check, 0, nsizes);
    tcase_add_loop_test(tc, test_group_ring, 0, nsizes);
    tcase_add_loop_test(tc, test_copy_engine, 0, nsizes);
    tcase_add_loop_test(tc, test_small_path, 0, nsizes);
    tcase_add_loop_test(tc, test_split_death_member, 0, nsizes);
    tcase_add_loop_test(tc, test_split_death_nonmember, 0, nsizes);
    tcase_add_loop_test(tc, test_split_stall, 0, nsizes);
    tcase_add_loop_test(tc, test_launch_failure, 0, nsizes);
    tcase_add_loop_test(tc, test_abort, 0, nsizes);
    /* cases of their own, so that CK_RUN_CASE=flight (or shrink, windows, registration) runs these alone */
    TCase *flight = mrank_tcase(s, "flight", JOB_TIMEOUT_S + 30);
    tcase_add_loop_test(flight, test_flight_blocking, 0, nsizes);
    tcase_add_loop_test(flight, test_flight_handle, 0, nsizes);
    TCase *shrink = mrank_tcase(s, "shrink", JOB_TIMEOUT_S + 30);
    tcase_add_loop_test(shrink, test_shrink_healthy, 0, nsizes);
    tcase_add_loop_test(shrink, test_shrink_after_death, 0, nsizes);
    TCase *windows = mrank_tcase(s, "windows", JOB_TIMEOUT_S + 30);
    tcase_add_loop_test(windows, test_windows, 0, nsizes);
    TCase *registration = mrank_tcase(s, "registration", JOB_TIMEOUT_S + 30);
    tcase_add_loop_test(registration, test_registration, 0, nsizes);
}

int main(void)
{
    char why[256] = "";
    gpu_count = gpu_probe(why, sizeof why);
    if (gpu_count < 2) {
        printf("test_nccl: SKIP: needs 2 GPUs, found %d%s%s\n", gpu_count, gpu_count ? "" : ": ", gpu_count ? "" : why);
        return GPU_SKIP;
    }
    sizes[nsizes++] = 2;
    if (gpu_count >= 4)
        sizes[nsizes++] = 4;
    cpu_backend = getenv("TCOMMS_TEST_CPU_BACKEND");
    if (!cpu_backend)
        cpu_backend = "gloo";
    printf("test_nccl: %d GPU(s), ranks %s, libnccl.so.2 version code %d, CPU backend for mixed tests: %s\n",
           gpu_count, nsizes == 2 ? "2 and 4" : "2", gpu_nccl_version(), *cpu_backend ? cpu_backend : "(none)");
    return mrank_main("nccl", MRANK_ANY, add_tests);
}
