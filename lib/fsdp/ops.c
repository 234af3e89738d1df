/* SPDX-License-Identifier: BSD-3-Clause */
/* FSDP runtime: memory and element-wise work (zero, cast, scale, add, copy) behind rt->ops, with the host
 * implementation (cuda.c holds the device one), and the control-plane exchange every file uses for its checks on
 * host buffers, which stages through device memory when a communicator has no CPU backend. */
#include <stdlib.h>
#include <string.h>

#include "../comm.h"
#include "../dtype.h"
#include "rt.h"

/* ---- host ops ---------------------------------------------------------------------------------------------------- */

static tcomms_status_t host_alloc(void *dev, size_t bytes, void **out)
{
    (void)dev;
    *out = NULL;
    if (bytes == 0)
        return TCOMMS_SUCCESS;
    size_t rounded = (bytes + TC_FSDP_BYTE_ALIGN - 1) / TC_FSDP_BYTE_ALIGN * TC_FSDP_BYTE_ALIGN;
    void *p = aligned_alloc(TC_FSDP_BYTE_ALIGN, rounded);
    if (p == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "fsdp: out of memory allocating a %zu-byte buffer", bytes);
    memset(p, 0, rounded);
    *out = p;
    return TCOMMS_SUCCESS;
}

static void host_free(void *dev, void *p)
{
    (void)dev;
    free(p);
}

static tcomms_status_t host_zero(void *dev, void *buf, size_t bytes)
{
    (void)dev;
    if (bytes)
        memset(buf, 0, bytes);
    return TCOMMS_SUCCESS;
}

static tcomms_status_t host_copy(void *dev, void *dst, const void *src, size_t bytes)
{
    (void)dev;
    if (bytes && dst != src)
        memmove(dst, src, bytes);
    return TCOMMS_SUCCESS;
}

/* One element as double, and back: the runtime's dtypes are the four floating types. */
static double load(const void *p, size_t i, tcomms_dtype_t t)
{
    switch (t) {
    case TCOMMS_FLOAT64: return ((const double *)p)[i];
    case TCOMMS_FLOAT32: return ((const float *)p)[i];
    case TCOMMS_BFLOAT16: return tc_bf16_to_float(((const uint16_t *)p)[i]);
    default: return tc_half_to_float(((const uint16_t *)p)[i]);
    }
}

static void store(void *p, size_t i, tcomms_dtype_t t, double v)
{
    switch (t) {
    case TCOMMS_FLOAT64: ((double *)p)[i] = v; break;
    case TCOMMS_FLOAT32: ((float *)p)[i] = (float)v; break;
    case TCOMMS_BFLOAT16: ((uint16_t *)p)[i] = tc_float_to_bf16((float)v); break;
    default: ((uint16_t *)p)[i] = tc_float_to_half((float)v); break;
    }
}

static tcomms_status_t host_cast(void *dev, void *dst, tcomms_dtype_t dt, const void *src, tcomms_dtype_t st,
                                 size_t n)
{
    if (dt == st)
        return host_copy(dev, dst, src, n * tcomms_dtype_size(dt));
    /* float64 -> bf16/fp16 goes through float32: lib/dtype.h converts from float. */
    for (size_t i = 0; i < n; i++)
        store(dst, i, dt, load(src, i, st));
    return TCOMMS_SUCCESS;
}

/* Main-dtype loops kept apart from the generic path so they vectorise. */
static tcomms_status_t host_scale(void *dev, void *buf, size_t n, tcomms_dtype_t dtype, double s)
{
    (void)dev;
    if (dtype == TCOMMS_FLOAT32) {
        float *b = buf, f = (float)s;
        for (size_t i = 0; i < n; i++)
            b[i] *= f;
    } else if (dtype == TCOMMS_FLOAT64) {
        double *b = buf;
        for (size_t i = 0; i < n; i++)
            b[i] *= s;
    } else {
        for (size_t i = 0; i < n; i++)
            store(buf, i, dtype, load(buf, i, dtype) * s);
    }
    return TCOMMS_SUCCESS;
}

/* dst = s * src (+ dst when keep), float32 through double (as kernels.cu, so both give the same bits). */
static tcomms_status_t host_add(void *dev, void *dst, tcomms_dtype_t dtype, const void *src, tcomms_dtype_t st,
                                size_t n, double s, int keep)
{
    (void)dev;
    if (st != dtype || !keep) {
        const double f = dtype == TCOMMS_FLOAT32 ? (float)s : s; /* the scale in the main dtype, as below */
        for (size_t i = 0; i < n; i++)
            store(dst, i, dtype, keep ? load(dst, i, dtype) + f * load(src, i, st) : f * load(src, i, st));
    } else if (dtype == TCOMMS_FLOAT32) {
        float *d = dst;
        const float *a = src;
        const double f = (float)s;
        for (size_t i = 0; i < n; i++)
            d[i] = s == 1.0 ? d[i] + a[i] : (float)(d[i] + f * a[i]);
    } else if (dtype == TCOMMS_FLOAT64) {
        double *d = dst;
        const double *a = src;
        for (size_t i = 0; i < n; i++)
            d[i] = s == 1.0 ? d[i] + a[i] : d[i] + s * a[i];
    } else {
        for (size_t i = 0; i < n; i++)
            store(dst, i, dtype, load(dst, i, dtype) + s * load(src, i, dtype));
    }
    return TCOMMS_SUCCESS;
}

static tcomms_status_t host_sync(void *dev)
{
    (void)dev;
    return TCOMMS_SUCCESS;
}

static int host_on_device(void *dev, const void *p)
{
    (void)dev;
    (void)p;
    return 1;
}

static void host_close(void *dev)
{
    (void)dev;
}

const tc_fsdp_ops_t tc_fsdp_host_ops = {
    .name = "host", .device_type = TCOMMS_DEVICE_CPU, .alloc = host_alloc, .free = host_free, .zero = host_zero,
    .cast = host_cast, .scale = host_scale, .add = host_add, .copy = host_copy, .sync = host_sync,
    .on_device = host_on_device, .close = host_close,
};

/* ---- the runtime's calls ----------------------------------------------------------------------------------------- */

/* A failed device operation leaves the stream's later work undefined: the runtime stops. */
static tcomms_status_t checked(tcomms_fsdp_t *rt, tcomms_status_t st)
{
    return st == TCOMMS_SUCCESS ? st : tc_fsdp_fail(rt, st);
}

tcomms_status_t tc_fsdp_alloc(tcomms_fsdp_t *rt, size_t bytes, void **out)
{
    return rt->ops->alloc(rt->dev, bytes, out);
}

void tc_fsdp_free(tcomms_fsdp_t *rt, void *p)
{
    if (p != NULL)
        rt->ops->free(rt->dev, p);
}

tcomms_status_t tc_fsdp_zero(tcomms_fsdp_t *rt, void *buf, size_t n, tcomms_dtype_t dtype)
{
    return n ? checked(rt, rt->ops->zero(rt->dev, buf, n * tcomms_dtype_size(dtype))) : TCOMMS_SUCCESS;
}

tcomms_status_t tc_fsdp_cast(tcomms_fsdp_t *rt, void *dst, tcomms_dtype_t dt, const void *src, tcomms_dtype_t st,
                             size_t n)
{
    return n ? checked(rt, rt->ops->cast(rt->dev, dst, dt, src, st, n)) : TCOMMS_SUCCESS;
}

tcomms_status_t tc_fsdp_scale(tcomms_fsdp_t *rt, void *buf, size_t n, tcomms_dtype_t dtype, double s)
{
    return n && s != 1.0 ? checked(rt, rt->ops->scale(rt->dev, buf, n, dtype, s)) : TCOMMS_SUCCESS;
}

tcomms_status_t tc_fsdp_add(tcomms_fsdp_t *rt, void *dst, tcomms_dtype_t dt, const void *src, tcomms_dtype_t st,
                            size_t n, double s, int keep)
{
    return n ? checked(rt, rt->ops->add(rt->dev, dst, dt, src, st, n, s, keep)) : TCOMMS_SUCCESS;
}

tcomms_status_t tc_fsdp_copy(tcomms_fsdp_t *rt, void *dst, const void *src, size_t bytes)
{
    return bytes ? checked(rt, rt->ops->copy(rt->dev, dst, src, bytes)) : TCOMMS_SUCCESS;
}

tcomms_status_t tc_fsdp_sync(tcomms_fsdp_t *rt)
{
    return checked(rt, rt->ops->sync(rt->dev));
}

tcomms_status_t tc_fsdp_lane(tcomms_fsdp_t *rt, int lane)
{
    return checked(rt, rt->ops->lane(rt->dev, lane, &rt->opts.stream));
}

tcomms_status_t tc_fsdp_signal(tcomms_fsdp_t *rt, int lane, int ev)
{
    return checked(rt, rt->ops->signal(rt->dev, lane, ev));
}

tcomms_status_t tc_fsdp_await(tcomms_fsdp_t *rt, int lane, int ev)
{
    return checked(rt, rt->ops->await(rt->dev, lane, ev));
}

tcomms_status_t tc_fsdp_follow(tcomms_fsdp_t *rt, int from, int to, int ev)
{
    tcomms_status_t st = tc_fsdp_signal(rt, from, ev);
    return st == TCOMMS_SUCCESS ? tc_fsdp_await(rt, to, ev) : st;
}

tcomms_status_t tc_fsdp_ops_open(tcomms_fsdp_t *rt)
{
    tcomms_device_t d;
    tcomms_status_t st = tcomms_comm_device(rt->groups.members, &d);
    if (st != TCOMMS_SUCCESS)
        return tc_error_prefix(st, "tcomms_fsdp_finalize: groups->members: ");
    rt->opts.field_mask = TCOMMS_OP_OPT_DEVICE_TYPE | (rt->cfg.timeout_ms ? TCOMMS_OP_OPT_TIMEOUT : 0);
    rt->opts.timeout_ms = rt->cfg.timeout_ms;
    rt->opts.device_type = d.type;
    if (d.type != TCOMMS_DEVICE_CUDA)
        return TCOMMS_SUCCESS;
    rt->opts.field_mask |= TCOMMS_OP_OPT_STREAM;
    rt->opts.stream = rt->cfg.stream;
    /* the host waits on the device no longer than for a collective */
    uint32_t sync_ms = rt->cfg.timeout_ms ? rt->cfg.timeout_ms : rt->groups.members->timeout_ms;
    st = tc_fsdp_cuda_open(d.index, rt->cfg.stream, sync_ms, &rt->ops, &rt->dev);
    return st == TCOMMS_SUCCESS ? st : tc_error_prefix(st, "tcomms_fsdp_finalize: cuda:%d: ", d.index);
}

void tc_fsdp_ops_close(tcomms_fsdp_t *rt)
{
    rt->ops->close(rt->dev);
    rt->ops = &tc_fsdp_host_ops;
    rt->dev = NULL;
}

/* ---- control plane ----------------------------------------------------------------------------------------------- */

static tcomms_status_t ctl_post(tcomms_comm_t *comm, tc_fsdp_coll_t coll, const void *send, void *recv,
                                size_t count, tcomms_dtype_t dtype, tcomms_op_t op, const tcomms_op_opts_t *o)
{
    if (coll == TC_FSDP_ALL_GATHER)
        return tcomms_all_gather(comm, send, recv, count, dtype, o, NULL);
    return tcomms_all_reduce(comm, send, recv, count, dtype, op, o, NULL);
}

/* The exchange on a GPU: copy in, the collective on device buffers (stream-ordered on the legacy stream), copy
 * out, and a host sync, so the caller reads the result as from a blocking host collective. */
static tcomms_status_t ctl_staged(tcomms_comm_t *comm, const tcomms_device_t *d, tc_fsdp_coll_t coll,
                                  const void *send, void *recv, size_t count, tcomms_dtype_t dtype, tcomms_op_t op,
                                  tcomms_op_opts_t o)
{
    const tc_fsdp_ops_t *ops = NULL;
    void *dev = NULL, *buf = NULL;
    int size = 1;
    tcomms_comm_size(comm, &size);
    size_t in = count * tcomms_dtype_size(dtype), out = coll == TC_FSDP_ALL_GATHER ? in * (size_t)size : in;
    uint32_t sync_ms = (o.field_mask & TCOMMS_OP_OPT_TIMEOUT) ? o.timeout_ms : comm->timeout_ms;
    tcomms_status_t st = tc_fsdp_cuda_open(d->index, NULL, sync_ms, &ops, &dev);
    if (st != TCOMMS_SUCCESS)
        return st;
    st = ops->alloc(dev, in + out, &buf);
    if (st == TCOMMS_SUCCESS)
        st = ops->copy(dev, buf, send, in);
    o.field_mask |= TCOMMS_OP_OPT_DEVICE_TYPE;
    o.device_type = TCOMMS_DEVICE_CUDA;
    if (st == TCOMMS_SUCCESS)
        st = ctl_post(comm, coll, buf, (char *)buf + in, count, dtype, op, &o);
    if (st == TCOMMS_SUCCESS)
        st = ops->copy(dev, recv, (char *)buf + in, out);
    tcomms_status_t ss = ops->sync(dev);
    if (st == TCOMMS_SUCCESS)
        st = ss;
    if (buf != NULL)
        ops->free(dev, buf);
    ops->close(dev);
    return st;
}

tcomms_status_t tc_fsdp_ctl(tcomms_comm_t *comm, tc_fsdp_coll_t coll, const void *send, void *recv, size_t count,
                            tcomms_dtype_t dtype, tcomms_op_t op, uint32_t timeout_ms)
{
    tcomms_op_opts_t o = {.field_mask = TCOMMS_OP_OPT_DEVICE_TYPE, .device_type = TCOMMS_DEVICE_CPU};
    if (timeout_ms) {
        o.field_mask |= TCOMMS_OP_OPT_TIMEOUT;
        o.timeout_ms = timeout_ms;
    }
    tcomms_status_t st = ctl_post(comm, coll, send, recv, count, dtype, op, &o);
    tcomms_device_t d;
    if (st != TCOMMS_ERR_NO_BACKEND_FOR_DEVICE || tcomms_comm_device(comm, &d) != TCOMMS_SUCCESS ||
        d.type != TCOMMS_DEVICE_CUDA)
        return st;
    char why[512];
    snprintf(why, sizeof(why), "%s", tcomms_last_error());
    st = ctl_staged(comm, &d, coll, send, recv, count, dtype, op, o);
    if (st == TCOMMS_ERR_NOT_SUPPORTED) /* built without the device ops: the first error is the one to report */
        return tc_error(TCOMMS_ERR_NO_BACKEND_FOR_DEVICE, "%s", why);
    return st;
}
