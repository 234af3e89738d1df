/* SPDX-License-Identifier: BSD-3-Clause */
/* inflight_ucp: raw UCP's side of issue 29's many-operations-in-flight comparison (docs/perf.md), run by hand:
 * `mpicc -O2 -o inflight_ucp bench/inflight_ucp.c -lucp -lucs && mpirun -np 2 ./inflight_ucp N K [u]`. An
 * operation is what a 2-rank 8-byte all_reduce sends: one 8-byte tagged send to the peer and one receive from it.
 * Each of K cycles posts N of them, then progresses until all completed; it prints the median, over the cycles after
 * the first, of the cycle's time / N in us an operation. With `u` the requests live in the program's memory
 * (UCP_OP_ATTR_FIELD_REQUEST, one block per operation holding its two), as tcomms' tasks hold theirs. MPI only
 * exchanges the worker addresses and separates the cycles. UCX settings as tcomms picks them (FIFO elements of a
 * page, SERIALIZED worker, FAST_CMPL sends). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>

static int left; /* requests of the cycle still in flight */

static void send_done(void *r, ucs_status_t s, void *u)
{
    (void)r, (void)s, (void)u;
    left--;
}

static void recv_done(void *r, ucs_status_t s, const ucp_tag_recv_info_t *i, void *u)
{
    (void)r, (void)s, (void)i, (void)u;
    left--;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc < 3 || atoi(argv[1]) < 1 || atoi(argv[2]) < 2) {
        fprintf(stderr, "usage: inflight_ucp N K [u] (N >= 1 operations in flight, K >= 2 cycles)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int n = atoi(argv[1]), k = atoi(argv[2]), user = argc > 3, me;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    ucp_config_t *cfg;
    ucp_context_h ctx;
    ucp_config_read(NULL, NULL, &cfg);
    ucp_config_modify(cfg, "MM_FIFO_ELEM_SIZE", "4096");
    ucp_params_t p = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_TAG};
    if (ucp_init(&p, cfg, &ctx) != UCS_OK)
        MPI_Abort(MPI_COMM_WORLD, 1);
    ucp_context_attr_t ca = {.field_mask = UCP_ATTR_FIELD_REQUEST_SIZE};
    ucp_context_query(ctx, &ca);
    size_t rs = (ca.request_size + 63) & ~(size_t)63;
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SERIALIZED};
    ucp_worker_h w;
    ucp_worker_create(ctx, &wp, &w);
    ucp_address_t *a;
    size_t al;
    ucp_worker_get_address(w, &a, &al);
    char pa[4096];
    MPI_Sendrecv(a, (int)al, MPI_BYTE, 1 - me, 0, pa, sizeof pa, MPI_BYTE, 1 - me, 0, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS, .address = (ucp_address_t *)pa};
    ucp_ep_h e;
    ucp_ep_create(w, &ep, &e);
    double *s = calloc((size_t)n, 8), *r = calloc((size_t)n, 8), *t = calloc((size_t)k, sizeof(double));
    void **q = malloc(2 * (size_t)n * sizeof *q);
    char *mem = NULL;
    if (user && posix_memalign((void **)&mem, 64, (size_t)n * 2 * rs) != 0)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (int c = 0; c < k; c++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        left = 0;
        int nq = 0;
        for (int i = 0; i < n; i++) {
            ucp_request_param_t rp = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_DATATYPE,
                                      .cb.recv = recv_done,
                                      .datatype = ucp_dt_make_contig(1)};
            if (user) {
                rp.op_attr_mask |= UCP_OP_ATTR_FIELD_REQUEST;
                rp.request = mem + (size_t)i * 2 * rs + ca.request_size;
            }
            void *x = ucp_tag_recv_nbx(w, r + i, 8, (uint64_t)i, UINT64_MAX, &rp);
            if (UCS_PTR_IS_PTR(x)) {
                q[nq++] = x;
                left++;
            }
            ucp_request_param_t sp = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_DATATYPE |
                                                      UCP_OP_ATTR_FLAG_FAST_CMPL,
                                      .cb.send = send_done,
                                      .datatype = ucp_dt_make_contig(1)};
            if (user) {
                sp.op_attr_mask |= UCP_OP_ATTR_FIELD_REQUEST;
                sp.request = mem + (size_t)i * 2 * rs + rs + ca.request_size;
            }
            x = ucp_tag_send_nbx(e, s + i, 8, (uint64_t)i, &sp);
            if (UCS_PTR_IS_PTR(x)) {
                q[nq++] = x;
                left++;
            }
        }
        while (left > 0)
            ucp_worker_progress(w);
        if (!user) /* requests in the program's memory are not UCX's to free */
            for (int i = 0; i < nq; i++)
                ucp_request_free(q[i]);
        t[c] = (MPI_Wtime() - t0) * 1e6 / n;
    }
    if (me == 0) {
        qsort(t + 1, (size_t)(k - 1), sizeof(double), cmp);
        printf("N %d K %d %s us_per_op %.3f\n", n, k, user ? "user-req" : "ucx-req", t[1 + (k - 1) / 2]);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
