/* SPDX-License-Identifier: BSD-3-Clause */
/* The collectives tcomms-perf measures: one small descriptor each (sizes, bus-bandwidth factor, the call, what every
 * received element must hold), in one table that the sweep (bench.c), the check and the report all read. Adding a
 * collective means adding one descriptor to colls.c, nothing else. */
#ifndef PERF_COLLS_H
#define PERF_COLLS_H

#include <stddef.h>

#include <tcomms/backend.h>
#include <tcomms/tcomms.h>

/* The fixed parameters of a run, as one rank sees them. */
typedef struct perf_ctx {
    tcomms_comm_t *comm;
    int rank, nranks, root;
    tcomms_dtype_t dtype;
    tcomms_op_t op;
    size_t esize;
    const tcomms_op_opts_t *opts; /* passed to every call: the stream of --device cuda */
} perf_ctx_t;

/* Where one message size puts data on this rank. Counts and offsets are in elements. */
typedef struct perf_layout {
    size_t count;                  /* the count column: the per-rank count parameter of the call */
    size_t bytes;                  /* the size column: max(send, recv) bytes per rank, as nccl-tests prints it */
    size_t send_elems, recv_elems; /* this rank's send data and receive data */
    size_t send_ip, recv_ip;       /* in place: offsets of the send and of the receive data in the one buffer */
    size_t ip_elems;               /* in place: extent of that buffer */
    size_t *vec;                   /* PERF_VEC_PER_RANK * nranks entries for the v-variants, owned by the caller */
} perf_layout_t;

#define PERF_VEC_PER_RANK 5

/* Handles of operations posted with -z 0; the sweep waits for them all. Room for 2 per posted iteration. */
typedef struct perf_works {
    tcomms_work_t **h;
    size_t n;
} perf_works_t;

typedef struct perf_coll {
    const char *name; /* nccl-tests' name, "alltoall"; blocks are named "<name>_perf" */
    /* The operation it times, whose row in the core's table (tcomms_coll_info) says whether it reduces, has a
     * root, an in-place form, one buffer; sendrecv says TCOMMS_COLL_SEND: point-to-point, so N/A on one rank. */
    tcomms_coll_type_t type;
    double (*factor)(int nranks); /* busbw = algbw * factor */
    /* Layout for a message of `elems` elements (the swept size divided by the element size). */
    void (*layout)(const perf_ctx_t *c, size_t elems, perf_layout_t *l);
    /* One operation; blocking when w is NULL, else posted with its handle(s) appended to w. */
    tcomms_status_t (*run)(const perf_ctx_t *c, const perf_layout_t *l, const void *send, void *recv,
                           perf_works_t *w);
    /* The value element i of this rank's receive data must hold after a run on the fill of perf_send_value. */
    double (*expected)(const perf_ctx_t *c, const perf_layout_t *l, size_t i);
} perf_coll_t;

/* TCOMMS_COLL_* flags of `coll`'s operation. */
static inline unsigned perf_coll_flags(const perf_coll_t *coll)
{
    return tcomms_coll_info(coll->type)->flags;
}

extern const perf_coll_t perf_colls[];
extern const size_t perf_ncolls;

/* The descriptor named `name` (all_reduce, all_reduce_perf or allreduce), or NULL. */
const perf_coll_t *perf_coll_find(const char *name);
/* Element i of `rank`'s send data (the fill): reduction inputs or data-movement values (values.h). */
double perf_send_value(const perf_ctx_t *c, const perf_coll_t *coll, int rank, size_t i);

#endif
