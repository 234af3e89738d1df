/* SPDX-License-Identifier: BSD-3-Clause */
/* Every operation enters here: its arguments are validated once, the buffers' device type picks the backend, and
 * the call either blocks until completion or hands back a work handle. Backends never see unchecked input. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call_check.h"
#include "comm.h"
#include "error.h"
#include "flight.h"
#include "group.h"
#include "log.h"
#include "work.h"

const char *tc_coll_name(tcomms_coll_type_t type)
{
    const tcomms_coll_info_t *info = tcomms_coll_info(type);
    return info != NULL ? info->api : "tcomms operation";
}

/* a * b elements of esize bytes, or SIZE_MAX on overflow. */
static size_t bytes_of(size_t a, size_t b, size_t esize)
{
    if (b != 0 && a > SIZE_MAX / b)
        return SIZE_MAX;
    size_t n = a * b;
    return esize != 0 && n > SIZE_MAX / esize ? SIZE_MAX : n * esize;
}

/* Ranges [a, a+alen) and [b, b+blen) share a byte. */
static int overlap(const void *a, size_t alen, const void *b, size_t blen)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return alen != 0 && blen != 0 && x < y + blen && y < x + alen;
}

/* A v-layout's counts and displacements as the caller named them, for messages; `packed`: the core made the
 * displacements. */
typedef struct v_names {
    const char *counts, *displs;
    int packed;
} v_names_t;

/* Bytes a v-layout spans (max over r of displs[r] + counts[r] elements of `es` bytes), or INVALID_ARG naming the
 * first block that ends beyond the address space. */
static tcomms_status_t v_bytes(const char *who, v_names_t nm, const size_t *counts, const size_t *displs, int n,
                               size_t es, size_t *bytes)
{
    size_t end = 0;
    for (int r = 0; r < n; r++) {
        if (counts[r] < SIZE_MAX - displs[r] && displs[r] + counts[r] < SIZE_MAX / es) { /* SIZE_MAX: overflow */
            end = displs[r] + counts[r] > end ? displs[r] + counts[r] : end;
            continue;
        }
        if (nm.packed && r > 0)
            return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: %s[0..%d] add up beyond the address space (%s[%d] = %zu, "
                            "%zu-byte elements, packed)", who, nm.counts, r, nm.counts, r, counts[r], es);
        if (nm.packed)
            return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: %s[0] = %zu is beyond the address space (%zu-byte "
                            "elements)", who, nm.counts, counts[0], es);
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: %s[%d] = %zu at %s[%d] = %zu ends beyond the address space "
                        "(%zu-byte elements)", who, nm.counts, r, counts[r], nm.displs, r, displs[r], es);
    }
    *bytes = end * es;
    return TCOMMS_SUCCESS;
}

/* Packed displacements for a NULL `displs`; SIZE_MAX marks overflow. */
static void packed(const size_t *counts, int n, size_t *displs)
{
    size_t at = 0;
    for (int r = 0; r < n; r++) {
        displs[r] = at;
        at = counts[r] > SIZE_MAX - at ? SIZE_MAX : at + counts[r];
    }
}

typedef struct check {
    const char *who;
    size_t send_bytes, recv_bytes; /* extents the operation reads and writes on this rank */
} check_t;

static tcomms_status_t check_buffers(const check_t *c, const tcomms_coll_args_t *a)
{
    if (c->send_bytes == SIZE_MAX || c->recv_bytes == SIZE_MAX)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: count overflows the address space (count %zu of %s)", c->who,
                        a->count, tcomms_dtype_name(a->dtype));
    if (c->send_bytes > 0 && a->sendbuf == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: sendbuf is NULL with a non-zero count", c->who);
    if (c->recv_bytes > 0 && a->recvbuf == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: recvbuf is NULL with a non-zero count", c->who);
    if (!a->in_place && overlap(a->sendbuf, c->send_bytes, a->recvbuf, c->recv_bytes))
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: sendbuf and recvbuf overlap without being the in-place form",
                        c->who);
    return TCOMMS_SUCCESS;
}

static tcomms_status_t check_rank(const char *who, const char *what, int r, int size)
{
    if (r < 0 || r >= size)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: %s %d is out of range [0, %d)", who, what, r, size);
    return TCOMMS_SUCCESS;
}

/* Validate `a` (counts, buffers, roots, in-place form) and fill in what the backend may rely on; `who` names the
 * call in messages (the caller's lookup: one per call). `scratch` is for packed displacements (two arrays of
 * comm->size). */
static tcomms_status_t validate(const tcomms_comm_t *comm, tcomms_coll_args_t *a, const char *who, size_t *scratch)
{
    int n = comm->size, me = comm->rank;
    if ((unsigned)a->dtype >= TCOMMS_DTYPE_COUNT)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: dtype %d is not a tcomms_dtype_t", who, (int)a->dtype);
    if ((unsigned)a->op >= TCOMMS_OP_COUNT)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: op %d is not a tcomms_op_t", who, (int)a->op);
    size_t es = tcomms_dtype_size(a->dtype), cnt = a->count;
    const char *inbuf = a->sendbuf;
    char *outbuf = a->recvbuf;
    check_t c = {who, 0, 0};
    tcomms_status_t st = TCOMMS_SUCCESS;
    switch (a->type) {
    case TCOMMS_COLL_ALL_REDUCE:
        a->in_place = inbuf == outbuf;
        c.send_bytes = c.recv_bytes = bytes_of(cnt, 1, es);
        break;
    case TCOMMS_COLL_BROADCAST:
        a->in_place = 1;
        st = check_rank(who, "root", a->peer, n);
        c.recv_bytes = bytes_of(cnt, 1, es);
        break;
    case TCOMMS_COLL_REDUCE:
        st = check_rank(who, "root", a->peer, n);
        a->in_place = me == a->peer && inbuf == outbuf;
        c.send_bytes = bytes_of(cnt, 1, es);
        c.recv_bytes = me == a->peer ? c.send_bytes : 0;
        break;
    case TCOMMS_COLL_ALL_GATHER:
        c.send_bytes = bytes_of(cnt, 1, es);
        c.recv_bytes = bytes_of(cnt, (size_t)n, es);
        a->in_place = c.recv_bytes != SIZE_MAX && outbuf != NULL && inbuf == outbuf + (size_t)me * cnt * es;
        break;
    case TCOMMS_COLL_REDUCE_SCATTER:
        c.send_bytes = bytes_of(cnt, (size_t)n, es);
        c.recv_bytes = bytes_of(cnt, 1, es);
        a->in_place = c.send_bytes != SIZE_MAX && inbuf != NULL && outbuf == inbuf + (size_t)me * cnt * es;
        break;
    case TCOMMS_COLL_ALL_TO_ALL:
        a->in_place = inbuf == outbuf;
        c.send_bytes = c.recv_bytes = bytes_of(cnt, (size_t)n, es);
        break;
    case TCOMMS_COLL_GATHER:
        st = check_rank(who, "root", a->peer, n);
        c.send_bytes = bytes_of(cnt, 1, es);
        c.recv_bytes = me == a->peer ? bytes_of(cnt, (size_t)n, es) : 0;
        a->in_place = me == a->peer && c.recv_bytes != SIZE_MAX && outbuf != NULL &&
                      inbuf == outbuf + (size_t)a->peer * cnt * es;
        break;
    case TCOMMS_COLL_SCATTER:
        st = check_rank(who, "root", a->peer, n);
        c.send_bytes = me == a->peer ? bytes_of(cnt, (size_t)n, es) : 0;
        c.recv_bytes = bytes_of(cnt, 1, es);
        a->in_place = me == a->peer && c.send_bytes != SIZE_MAX && inbuf != NULL &&
                      outbuf == inbuf + (size_t)a->peer * cnt * es;
        break;
    case TCOMMS_COLL_ALL_GATHER_V:
    case TCOMMS_COLL_REDUCE_SCATTER_V: {
        if (a->recvcounts == NULL)
            return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: recvcounts is NULL", who);
        v_names_t nm = {"recvcounts", "displs", a->rdispls == NULL || a->type == TCOMMS_COLL_REDUCE_SCATTER_V};
        if (nm.packed) {
            packed(a->recvcounts, n, scratch);
            a->rdispls = scratch;
        }
        a->count = a->recvcounts[me];
        size_t *whole = a->type == TCOMMS_COLL_ALL_GATHER_V ? &c.recv_bytes : &c.send_bytes;
        if ((st = v_bytes(who, nm, a->recvcounts, a->rdispls, n, es, whole)) != TCOMMS_SUCCESS)
            return st;
        if (a->type == TCOMMS_COLL_ALL_GATHER_V) {
            c.send_bytes = bytes_of(a->count, 1, es);
            a->in_place = outbuf != NULL && inbuf == outbuf + a->rdispls[me] * es;
        } else {
            c.recv_bytes = bytes_of(a->count, 1, es);
            a->in_place = inbuf != NULL && outbuf == inbuf + a->rdispls[me] * es;
        }
        break;
    }
    case TCOMMS_COLL_ALL_TO_ALL_V: {
        if (a->sendcounts == NULL || a->recvcounts == NULL)
            return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: %s is NULL", who,
                            a->sendcounts == NULL ? "sendcounts" : "recvcounts");
        v_names_t snm = {"sendcounts", "sdispls", a->sdispls == NULL}, rnm = {"recvcounts", "rdispls",
                                                                               a->rdispls == NULL};
        if (snm.packed) {
            packed(a->sendcounts, n, scratch);
            a->sdispls = scratch;
        }
        if (rnm.packed) {
            packed(a->recvcounts, n, scratch + n);
            a->rdispls = scratch + n;
        }
        if ((st = v_bytes(who, snm, a->sendcounts, a->sdispls, n, es, &c.send_bytes)) != TCOMMS_SUCCESS ||
            (st = v_bytes(who, rnm, a->recvcounts, a->rdispls, n, es, &c.recv_bytes)) != TCOMMS_SUCCESS)
            return st;
        if (inbuf == outbuf && c.send_bytes > 0)
            return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: has no in-place form (sendbuf == recvbuf)", who);
        break;
    }
    case TCOMMS_COLL_BARRIER:
        break;
    case TCOMMS_COLL_SEND:
    case TCOMMS_COLL_RECV:
        st = check_rank(who, "peer", a->peer, n);
        if (st == TCOMMS_SUCCESS && a->peer == me)
            return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: peer %d is the caller itself", who, a->peer);
        if (a->type == TCOMMS_COLL_SEND)
            c.send_bytes = bytes_of(cnt, 1, es);
        else
            c.recv_bytes = bytes_of(cnt, 1, es);
        break;
    default:
        return tc_error(TCOMMS_ERR_INTERNAL, "unknown operation %d", (int)a->type);
    }
    if (st != TCOMMS_SUCCESS)
        return st;
    return check_buffers(&c, a);
}

/* The TRACE line of each operation, before it is posted: what a hang report greps for across ranks (the same
 * sequence number names the same call on every member of a communicator used in program order). */
static void trace(const tcomms_comm_t *comm, const tc_slot_t *slot, const tcomms_coll_args_t *a,
                  tcomms_device_type_t type)
{
    const tcomms_coll_info_t *info = tcomms_coll_info(a->type);
    const char *algo = slot->be->algorithm != NULL ? slot->be->algorithm(slot->bcomm, a) : NULL;
    char op[32] = "", peer[32] = "", alg[48] = "";
    if (algo != NULL)
        snprintf(alg, sizeof(alg), " algorithm %s", algo);
    if (info->flags & TCOMMS_COLL_REDUCES)
        snprintf(op, sizeof(op), " op %s", tcomms_op_name(a->op));
    if (info->flags & (TCOMMS_COLL_ROOTED | TCOMMS_COLL_P2P))
        snprintf(peer, sizeof(peer), " %s %d", info->flags & TCOMMS_COLL_ROOTED ? "root" : "peer", a->peer);
    tc_log(TCOMMS_LOG_TRACE, "core", "'%s' rank %d #%llu %s count %zu %s%s%s%s on %s by %s%s%s, timeout %u ms",
           comm->name, comm->rank, (unsigned long long)a->seq, info->name, a->count, tcomms_dtype_name(a->dtype), op,
           peer, a->in_place ? " in place" : "", tcomms_device_type_name(type), slot->be->name, alg,
           a->flags & TCOMMS_COLL_FLAG_BLOCKING ? " blocking" : "", a->timeout_ms);
}

/* The first call refused on a broken communicator asks the other ranks where they are, once per communicator, when
 * no wait did (an NCCL watchdog's timeout reaches a program of blocking calls only so), and the answer stands for
 * the backend's report from then on. Overwrites this thread's last error. */
static void explain_failure(tcomms_comm_t *comm)
{
    const char *why = NULL;
    tcomms_status_t failed = tc_comm_state_failed(comm->state, NULL);
    int len = tc_comm_state_why(comm->state, &why);
    tc_error(failed, "%.*s", len, why); /* what the diagnosis keeps in brackets: the backend's words */
    if (tc_flight_broken(comm->flight, comm->timeout_ms, failed))
        tc_comm_state_explain(comm->state);
}

/* Validate, route by device type, post; then block or hand back a work handle. */
static tcomms_status_t submit(tcomms_comm_t *comm, tcomms_coll_args_t *a, const tcomms_op_opts_t *opts,
                              tcomms_work_t **work)
{
    const char *who = tc_coll_name(a->type);
    if (work != NULL)
        *work = NULL;
    tcomms_status_t st = tc_comm_check(comm, who, "comm");
    if (st == TCOMMS_SUCCESS && (st = tc_comm_state_check(comm->state, who)) != TCOMMS_SUCCESS) {
        explain_failure(comm);
        st = tc_comm_state_check(comm->state, who); /* the message again, with the diagnosis if there is one */
    }
    if (st != TCOMMS_SUCCESS)
        return st;
    tcomms_device_type_t type = comm->device.type;
    a->timeout_ms = comm->timeout_ms;
    if (opts != NULL) {
        const uint64_t known = TCOMMS_OP_OPT_TIMEOUT | TCOMMS_OP_OPT_STREAM | TCOMMS_OP_OPT_DEVICE_TYPE;
        if ((st = tc_check_mask(opts->field_mask, known, who, "opts.field_mask")) != TCOMMS_SUCCESS)
            return st;
        if ((opts->field_mask & TCOMMS_OP_OPT_TIMEOUT) && opts->timeout_ms != 0)
            a->timeout_ms = opts->timeout_ms;
        if (opts->field_mask & TCOMMS_OP_OPT_STREAM)
            a->stream = opts->stream;
        if (opts->field_mask & TCOMMS_OP_OPT_DEVICE_TYPE)
            type = opts->device_type;
    }
    const tc_slot_t *slot = NULL;
    st = tc_comm_slot(comm, type, who, &slot);
    if (st != TCOMMS_SUCCESS)
        return st;
    size_t stack_scratch[2 * 64];
    size_t *scratch = comm->size <= 64 ? stack_scratch : malloc(2 * (size_t)comm->size * sizeof(size_t));
    if (scratch == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "%s: out of memory", who);
    st = validate(comm, a, who, scratch);
    if (st == TCOMMS_SUCCESS && comm->check_calls)
        st = tc_check_call(comm, a, type);
    tc_posted_t p = {.be = slot->be, .timeout_ms = a->timeout_ms, .state = comm->state, .flight = comm->flight};
    /* After the call check, which compares what the callers asked for. */
    if (st == TCOMMS_SUCCESS && a->op == TCOMMS_AVG && type == TCOMMS_DEVICE_CPU)
        st = tc_wide_avg_start(a, comm->rank, comm->size, &p.avg);
    if (work == NULL)
        a->flags |= TCOMMS_COLL_FLAG_BLOCKING;
    int grouped = tc_group_active();
    p.inline_call = work == NULL && !grouped;
    if (p.inline_call)
        a->flags |= TCOMMS_COLL_FLAG_INLINE;
    if (st == TCOMMS_SUCCESS) {
        /* calls on one communicator are serialised by the caller (docs/api.md): a load and a store, without the
         * locked read-modify-write a fetch_add costs on every call */
        a->seq = atomic_load_explicit(&comm->ops_posted, memory_order_relaxed) + 1;
        atomic_store_explicit(&comm->ops_posted, a->seq, memory_order_relaxed);
        if (tc_log_on(TCOMMS_LOG_TRACE, "core"))
            trace(comm, slot, a, type);
        tc_flight_post(comm->flight, a, p.inline_call ? TC_FLIGHT_WAITING : TC_FLIGHT_POSTED);
        p.seq = a->seq;
    }
    if (st == TCOMMS_SUCCESS && grouped)
        st = tc_group_join(slot->be);
    int refused = 0; /* by the backend: its error may say the communicator broke, the core's never do */
    if (st == TCOMMS_SUCCESS)
        refused = (st = slot->be->post(slot->bcomm, a, &p.bwork)) != TCOMMS_SUCCESS;
    if (scratch != stack_scratch)
        free(scratch);
    if (st != TCOMMS_SUCCESS) {
        if (p.seq != 0)
            tc_flight_mark(p.flight, p.seq, TC_FLIGHT_FAILED);
        tc_wide_avg_end(p.avg, st);
        if (refused && tc_comm_state_breaks_post(st)) {
            /* which earlier operation broke it, and where */
            int diagnosed = tc_flight_broken(comm->flight, a->timeout_ms, st);
            tc_comm_state_fail(comm->state, st);
            if (diagnosed)
                tc_comm_state_explain(comm->state);
        }
        return st;
    }
    if (p.inline_call)
        return tc_work_block(&p); /* on the communicator's references: no atomic per operation */
    tc_comm_state_ref(p.state);
    tc_flight_ref(p.flight);
    if (work != NULL)
        return tc_work_wrap(p, work);
    /* Inside a group a blocking call only queues: tcomms_group_end completes it after the batch is issued. */
    return tc_group_keep(p);
}

tcomms_status_t tcomms_all_reduce(tcomms_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                                  tcomms_dtype_t dtype, tcomms_op_t op, const tcomms_op_opts_t *opts,
                                  tcomms_work_t **work)
{
    tcomms_coll_args_t a = {.type = TCOMMS_COLL_ALL_REDUCE, .sendbuf = sendbuf, .recvbuf = recvbuf,
                            .count = count, .dtype = dtype, .op = op};
    return submit(comm, &a, opts, work);
}

tcomms_status_t tcomms_broadcast(tcomms_comm_t *comm, void *buf, size_t count, tcomms_dtype_t dtype, int root,
                                 const tcomms_op_opts_t *opts, tcomms_work_t **work)
{
    tcomms_coll_args_t a = {.type = TCOMMS_COLL_BROADCAST, .sendbuf = buf, .recvbuf = buf, .count = count,
                            .dtype = dtype, .peer = root};
    return submit(comm, &a, opts, work);
}

tcomms_status_t tcomms_reduce(tcomms_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                              tcomms_dtype_t dtype, tcomms_op_t op, int root, const tcomms_op_opts_t *opts,
                              tcomms_work_t **work)
{
    tcomms_coll_args_t a = {.type = TCOMMS_COLL_REDUCE, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = count,
                            .dtype = dtype, .op = op, .peer = root};
    return submit(comm, &a, opts, work);
}

tcomms_status_t tcomms_all_gather(tcomms_comm_t *comm, const void *sendbuf, void *recvbuf, size_t sendcount,
                                  tcomms_dtype_t dtype, const tcomms_op_opts_t *opts, tcomms_work_t **work)
{
    tcomms_coll_args_t a = {.type = TCOMMS_COLL_ALL_GATHER, .sendbuf = sendbuf, .recvbuf = recvbuf,
                            .count = sendcount, .dtype = dtype};
    return submit(comm, &a, opts, work);
}

tcomms_status_t tcomms_all_gather_v(tcomms_comm_t *comm, const void *sendbuf, void *recvbuf,
                                    const size_t *recvcounts, const size_t *displs, tcomms_dtype_t dtype,
                                    const tcomms_op_opts_t *opts, tcomms_work_t **work)
{
    tcomms_coll_args_t a = {.type = TCOMMS_COLL_ALL_GATHER_V, .sendbuf = sendbuf, .recvbuf = recvbuf,
                            .recvcounts = recvcounts, .rdispls = displs, .dtype = dtype};
    return submit(comm, &a, opts, work);
}

tcomms_status_t tcomms_reduce_scatter(tcomms_comm_t *comm, const void *sendbuf, void *recvbuf, size_t recvcount,
                                      tcomms_dtype_t dtype, tcomms_op_t op, const tcomms_op_opts_t *opts,
                                      tcomms_work_t **work)
{
    tcomms_coll_args_t a = {.type = TCOMMS_COLL_REDUCE_SCATTER, .sendbuf = sendbuf, .recvbuf = recvbuf,
                            .count = recvcount, .dtype = dtype, .op = op};
    return submit(comm, &a, opts, work);
}

tcomms_status_t tcomms_reduce_scatter_v(tcomms_comm_t *comm, const void *sendbuf, void *recvbuf,
                                        const size_t *recvcounts, tcomms_dtype_t dtype, tcomms_op_t op,
                                        const tcomms_op_opts_t *opts, tcomms_work_t **work)
{
    tcomms_coll_args_t a = {.type = TCOMMS_COLL_REDUCE_SCATTER_V, .sendbuf = sendbuf, .recvbuf = recvbuf,
                            .recvcounts = recvcounts, .dtype = dtype, .op = op};
    return submit(comm, &a, opts, work);
}

tcomms_status_t tcomms_all_to_all(tcomms_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                                  tcomms_dtype_t dtype, const tcomms_op_opts_t *opts, tcomms_work_t **work)
{
    tcomms_coll_args_t a = {.type = TCOMMS_COLL_ALL_TO_ALL, .sendbuf = sendbuf, .recvbuf = recvbuf,
                            .count = count, .dtype = dtype};
    return submit(comm, &a, opts, work);
}

tcomms_status_t tcomms_all_to_all_v(tcomms_comm_t *comm, const void *sendbuf, const size_t *sendcounts,
                                    const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                                    const size_t *rdispls, tcomms_dtype_t dtype, const tcomms_op_opts_t *opts,
                                    tcomms_work_t **work)
{
    tcomms_coll_args_t a = {.type = TCOMMS_COLL_ALL_TO_ALL_V, .sendbuf = sendbuf, .recvbuf = recvbuf,
                            .sendcounts = sendcounts, .sdispls = sdispls, .recvcounts = recvcounts,
                            .rdispls = rdispls, .dtype = dtype};
    return submit(comm, &a, opts, work);
}

tcomms_status_t tcomms_gather(tcomms_comm_t *comm, const void *sendbuf, void *recvbuf, size_t sendcount,
                              tcomms_dtype_t dtype, int root, const tcomms_op_opts_t *opts, tcomms_work_t **work)
{
    tcomms_coll_args_t a = {.type = TCOMMS_COLL_GATHER, .sendbuf = sendbuf, .recvbuf = recvbuf,
                            .count = sendcount, .dtype = dtype, .peer = root};
    return submit(comm, &a, opts, work);
}

tcomms_status_t tcomms_scatter(tcomms_comm_t *comm, const void *sendbuf, void *recvbuf, size_t recvcount,
                               tcomms_dtype_t dtype, int root, const tcomms_op_opts_t *opts, tcomms_work_t **work)
{
    tcomms_coll_args_t a = {.type = TCOMMS_COLL_SCATTER, .sendbuf = sendbuf, .recvbuf = recvbuf,
                            .count = recvcount, .dtype = dtype, .peer = root};
    return submit(comm, &a, opts, work);
}

tcomms_status_t tcomms_barrier(tcomms_comm_t *comm, const tcomms_op_opts_t *opts, tcomms_work_t **work)
{
    tcomms_coll_args_t a = {.type = TCOMMS_COLL_BARRIER, .dtype = TCOMMS_UINT8};
    return submit(comm, &a, opts, work);
}

tcomms_status_t tcomms_send(tcomms_comm_t *comm, const void *buf, size_t count, tcomms_dtype_t dtype, int peer,
                            const tcomms_op_opts_t *opts, tcomms_work_t **work)
{
    tcomms_coll_args_t a = {.type = TCOMMS_COLL_SEND, .sendbuf = buf, .count = count, .dtype = dtype,
                            .peer = peer};
    return submit(comm, &a, opts, work);
}

tcomms_status_t tcomms_recv(tcomms_comm_t *comm, void *buf, size_t count, tcomms_dtype_t dtype, int peer,
                            const tcomms_op_opts_t *opts, tcomms_work_t **work)
{
    tcomms_coll_args_t a = {.type = TCOMMS_COLL_RECV, .recvbuf = buf, .count = count, .dtype = dtype,
                            .peer = peer};
    return submit(comm, &a, opts, work);
}
