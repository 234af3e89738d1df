/* SPDX-License-Identifier: BSD-3-Clause */
/* Scratch for in-place all_to_all: device buffers per communicator, grown by doubling and then reused, so an
 * in-place call costs a copy rather than an allocation (cudaMallocAsync per call cost 150-190 us). Two of them:
 * NCCL 2.28's send/recv hung when one side's buffer was registered and the other's not (in-place all_to_all at
 * 2 MiB, with either kind of scratch against the other kind of user buffer), so the scratch is registered exactly
 * when the user's buffer is. Each use waits for the previous one to be done, whatever stream either ran on.
 * Outgrown buffers stay allocated until destroy, since a stream may still read them. All calls hold c->lock; the
 * last (tcn_scratch_free) comes before the NCCL communicator is destroyed, to deregister. */
#include <stdlib.h>

#include "tcn.h"

struct tcn_retired {
    tcn_scratch_t s;
    struct tcn_retired *next;
};

static cudaError_t scratch_alloc(tcn_comm_t *c, int registered, size_t bytes, tcn_scratch_t *s)
{
    s->reg = NULL;
#if TCN_HAS_MEM
    if (registered) {
        if (ncclMemAlloc(&s->buf, bytes) != ncclSuccess)
            return cudaErrorMemoryAllocation;
        if (c->nccl == NULL || ncclCommRegister(c->nccl, s->buf, bytes, &s->reg) != ncclSuccess) {
            ncclMemFree(s->buf);
            return cudaErrorMemoryAllocation;
        }
        return cudaSuccess;
    }
#else
    (void)c, (void)registered;
#endif
    return cudaMalloc(&s->buf, bytes);
}

static void scratch_release(tcn_comm_t *c, tcn_scratch_t *s)
{
#if TCN_HAS_MEM
    if (s->reg) {
        if (c->nccl)
            ncclCommDeregister(c->nccl, s->reg);
        ncclMemFree(s->buf);
        return;
    }
#else
    (void)c;
#endif
    cudaFree(s->buf);
}

tcomms_status_t tcn_scratch_take(tcn_comm_t *c, size_t bytes, int registered, cudaStream_t stream, void **out)
{
    cudaError_t e;
    if (c->scratch_ev == NULL && (e = cudaEventCreateWithFlags(&c->scratch_ev, cudaEventDisableTiming)) != cudaSuccess)
        return tcn_cuda_error(e, "cudaEventCreateWithFlags (scratch)", c->name);
    tcn_scratch_t *s = &c->scratch[registered != 0];
    if (bytes > s->bytes) {
        size_t want = s->bytes ? s->bytes : 1 << 20;
        while (want < bytes)
            want *= 2;
        struct tcn_retired *r = malloc(sizeof(*r));
        tcn_scratch_t fresh = {NULL, NULL, want};
        if (r == NULL)
            return tcn_core->error(TCOMMS_ERR_NO_MEMORY, "nccl '%s': out of memory", c->name);
        if ((e = scratch_alloc(c, registered, want, &fresh)) != cudaSuccess) {
            free(r);
            return tcn_cuda_error(e, "allocating the in-place all_to_all scratch", c->name);
        }
        r->s = *s;
        r->next = c->retired;
        if (s->buf)
            c->retired = r;
        else
            free(r);
        *s = fresh;
    }
    if ((e = cudaStreamWaitEvent(stream, c->scratch_ev, 0)) != cudaSuccess)
        return tcn_cuda_error(e, "cudaStreamWaitEvent (scratch)", c->name);
    *out = s->buf;
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcn_scratch_give(tcn_comm_t *c, cudaStream_t stream)
{
    cudaError_t e = cudaEventRecord(c->scratch_ev, stream);
    return e == cudaSuccess ? TCOMMS_SUCCESS : tcn_cuda_error(e, "cudaEventRecord (scratch)", c->name);
}

size_t tcn_scratch_regs(const tcn_comm_t *c, void **out, size_t max)
{
    size_t n = 0;
    for (int k = 0; k < 2; k++)
        if (c->scratch[k].reg != NULL && n++ < max)
            out[n - 1] = c->scratch[k].reg;
    for (const struct tcn_retired *r = c->retired; r; r = r->next)
        if (r->s.reg != NULL && n++ < max)
            out[n - 1] = r->s.reg;
    return n;
}

void tcn_scratch_free(tcn_comm_t *c)
{
    if (c->scratch_ev)
        cudaEventSynchronize(c->scratch_ev);
    while (c->retired) {
        struct tcn_retired *r = c->retired;
        c->retired = r->next;
        scratch_release(c, &r->s);
        free(r);
    }
    for (int k = 0; k < 2; k++) {
        if (c->scratch[k].buf)
            scratch_release(c, &c->scratch[k]);
        c->scratch[k] = (tcn_scratch_t){NULL, NULL, 0};
    }
    if (c->scratch_ev)
        cudaEventDestroy(c->scratch_ev);
    c->scratch_ev = NULL;
}
