/* SPDX-License-Identifier: BSD-3-Clause */
/* The rank functions of test_nccl (one per Check test, run in every forked rank) and the helpers they share.
 * nccl_cases.c: init, split, binding, mixed, the call check, groups, registration; nccl_streams.c: streams, graphs,
 * timeouts (on SM kernels and on the copy engines); nccl_death.c: a rank lost inside ncclCommSplit; nccl_fault.c:
 * launches NCCL refuses; nccl_ce.c: copy-engine collectives between windows; nccl_window.c: the window
 * communicator; nccl_small.c: the small-message path; nccl_abort.c: tcomms_comm_abort; nccl_flight.c: the flight
 * record; nccl_shrink.c: tcomms_comm_shrink. */
#ifndef TESTS_GPU_NCCL_CASES_H
#define TESTS_GPU_NCCL_CASES_H

#include <stddef.h>
#include <stdint.h>
#include <tcomms/tcomms.h>

#define NT_OP_TIMEOUT_MS 60000u /* the communicators' default: a broken rank fails the others, never hangs them */
#define NT_ON_CPU (-1000)       /* nt_create: bind to cpu instead of a cuda index */

/* The CPU backend for mixed selections ("cpu:<it>,cuda:nccl"): TCOMMS_TEST_CPU_BACKEND, default gloo; "" = none. */
extern const char *cpu_backend;

/* 0 when got == want; otherwise log (rank, what, both statuses, the library's message) and return 1. */
int nt_expect(tcomms_status_t got, tcomms_status_t want, int rank, const char *what);

/* Create a root on cuda:cuda_index (or cpu with NT_ON_CPU) with `backend` and optional hints. 0 on success; on
 * failure 1, logged unless `status` is given (then *status says why, for callers that may skip). */
int nt_create(tcomms_comm_t **out, const char *backend, int cuda_index, const tcomms_hints_t *hints,
              tcomms_status_t *status);
/* An nccl communicator on this rank's GPU (cuda:-1, bound first) with `timeout_ms` and optional hints; 0 when
 * made, else 1, logged. */
int nt_on_gpu(int rank, uint32_t timeout_ms, const tcomms_hints_t *hints, tcomms_comm_t **out);
/* Destroy (NULL is fine); 1 when destroy failed. */
int nt_destroy(tcomms_comm_t *comm, int rank);

/* Input of rank `rank` at element i in round `rep`, and the sum over `size` ranks (small integers: exact). */
typedef struct nt_vals {
    int rank, size, rep;
} nt_vals_t;
double nt_in_value(size_t i, const void *arg);
double nt_sum_value(size_t i, const void *arg);

/* nccl_ce.c: an nccl communicator on this rank's GPU asking for nccl.cta_policy=zero (copy-engine collectives
 * between windows); `bytes` of tcomms_mem_alloc'd memory registered on it as a symmetric window (collective: every
 * rank, same order). 0 when made, else 1, logged. */
int nt_ce_comm(int rank, tcomms_comm_t **out);
int nt_window(tcomms_comm_t *c, int rank, size_t bytes, float **buf, tcomms_mem_reg_t **reg);
/* Deregister and free what nt_window made (NULLs skipped); 0 when both succeed. */
int nt_window_release(tcomms_comm_t *c, int rank, float *buf, tcomms_mem_reg_t *reg);

/* A blocking in-place float sum of n elements on the legacy stream, synchronised and checked. 0 when right. */
int nt_all_reduce_check(tcomms_comm_t *comm, int rank, int size, size_t n, const char *what);

/* Rank functions (mrank_fn_t): arg is 4096 shared bytes, zeroed, for host barriers. */
int nt_eager_init(int rank, int size, void *arg);
int nt_split_hints(int rank, int size, void *arg);
int nt_split_vote(int rank, int size, void *arg);
int nt_unbound(int rank, int size, void *arg);
int nt_mixed(int rank, int size, void *arg);
int nt_call_check(int rank, int size, void *arg);
int nt_group_ring(int rank, int size, void *arg);
int nt_registration(int rank, int size, void *arg);
int nt_copy_engine(int rank, int size, void *arg);
int nt_windows(int rank, int size, void *arg);
int nt_stream_semantics(int rank, int size, void *arg);
int nt_graph_capture(int rank, int size, void *arg);
int nt_peer_timeout(int rank, int size, void *arg);
/* The same on the copy engines (an all_gather between windows, nccl_ce.c's communicator), rank size-1 lost by
 * death: run with mrank_run_ex, that rank expected killed. */
int nt_ce_peer_timeout(int rank, int size, void *arg);
/* nccl_death.c: rank size-1 dies inside ncclCommSplit (run with mrank_run_ex, that rank expected killed), or
 * stalls there past the timeout (split_stall, blocking=0). */
int nt_split_death_member(int rank, int size, void *arg);
int nt_split_death_nonmember(int rank, int size, void *arg);
int nt_split_stall(int rank, int size, void *arg);
/* nccl_small.c: the small-message path (one-shot kernels) against coll_ref, on and off by hint, across streams. */
int nt_small_path(int rank, int size, void *arg);
/* nccl_fault.c: launches NCCL refuses (ncclInvalidArgument on every rank, then ncclSystemError on rank size-1). */
int nt_launch_failure(int rank, int size, void *arg);
/* nccl_abort.c: tcomms_comm_abort from a second thread during a synchronize (a split child), then on an idle
 * parent. */
int nt_abort(int rank, int size, void *arg);
/* nccl_shrink.c: tcomms_comm_shrink of a healthy parent (ncclCommShrink) and after a rank died (afresh). */
int nt_shrink_healthy(int rank, int size, void *arg);
int nt_shrink_after_death(int rank, int size, void *arg);
/* nccl_flight.c: the flight record names the rank that skipped an operation. */
int nt_flight_blocking(int rank, int size, void *arg);
int nt_flight_handle(int rank, int size, void *arg);

#endif
