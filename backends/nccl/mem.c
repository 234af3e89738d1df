/* SPDX-License-Identifier: BSD-3-Clause */
/* Memory for NCCL: allocation with ncclMemAlloc (cudaMalloc before NCCL 2.19), buffer registration with
 * ncclCommRegister, and symmetric windows with ncclCommWindowRegister (NCCL 2.27), on the window communicator
 * (window.c) where there is one. Every call runs on the communicator's device, whichever thread makes it. */
#include <stdlib.h>

#include "tcn.h"

enum { REG_NONE, REG_BUFFER, REG_WINDOW };

typedef struct tcn_reg {
    int kind;
    void *handle;       /* ncclCommRegister's handle, or the ncclWindow_t */
    ncclComm_t on;      /* the NCCL communicator it is registered on */
    const char *buf;    /* the registered range, for lies_in */
    size_t bytes;
    struct tcn_reg *next, **pprev; /* c->regs */
} reg_t;

/* Does [buf, buf + bytes) lie in one registration of a kind in `kinds` (a bit per kind), on NCCL communicator
 * `on` (NULL: either)? */
static int lies_in(const tcn_comm_t *c, const void *buf, size_t bytes, unsigned kinds, ncclComm_t on)
{
    uintptr_t p = (uintptr_t)buf;
    for (const reg_t *r = c->regs; r; r = r->next) {
        uintptr_t b = (uintptr_t)r->buf;
        if ((kinds >> r->kind & 1u) && (on == NULL || r->on == on) && p >= b && p - b <= r->bytes &&
            bytes <= r->bytes - (p - b))
            return 1;
    }
    return 0;
}

int tcn_mem_registered(const tcn_comm_t *c, const void *buf, size_t bytes, ncclComm_t on)
{
    return lies_in(c, buf, bytes, 1u << REG_BUFFER | 1u << REG_WINDOW, on);
}

size_t tcn_mem_buffer_regs(const tcn_comm_t *c, void **out, size_t max)
{
    size_t n = 0;
    for (const reg_t *r = c->regs; r; r = r->next)
        if (r->kind == REG_BUFFER && r->on == c->nccl && r->handle != NULL && n++ < max)
            out[n - 1] = r->handle;
    return n;
}

int tcn_mem_in_window(const tcn_comm_t *c, const void *buf, size_t bytes)
{
    return lies_in(c, buf, bytes, 1u << REG_WINDOW, NULL);
}

tcomms_status_t tcn_mem_alloc(void *bcomm, size_t bytes, void **ptr)
{
    tcn_comm_t *c = bcomm;
    int prev = tcn_device_enter(c);
    tcomms_status_t st = TCOMMS_SUCCESS;
#if TCN_HAS_MEM
    ncclResult_t r = ncclMemAlloc(ptr, bytes);
    if (r != ncclSuccess)
        st = r == ncclSystemError || r == ncclUnhandledCudaError
                 ? tcn_core->error(TCOMMS_ERR_NO_MEMORY, "nccl '%s': ncclMemAlloc of %zu bytes failed: %s", c->name,
                                   bytes, ncclGetErrorString(r))
                 : tcn_nccl_error(c, r, "ncclMemAlloc");
#else
    cudaError_t e = cudaMalloc(ptr, bytes);
    if (e != cudaSuccess)
        st = tcn_cuda_error(e, "cudaMalloc", c->name);
#endif
    tcn_device_leave(prev);
    return st;
}

tcomms_status_t tcn_mem_free(void *bcomm, void *ptr)
{
    tcn_comm_t *c = bcomm;
    if (ptr == NULL)
        return TCOMMS_SUCCESS;
    int prev = tcn_device_enter(c);
    tcomms_status_t st = TCOMMS_SUCCESS;
#if TCN_HAS_MEM
    ncclResult_t r = ncclMemFree(ptr);
    if (r != ncclSuccess)
        st = tcn_nccl_error(c, r, "ncclMemFree");
#else
    cudaError_t e = cudaFree(ptr);
    if (e != cudaSuccess)
        st = tcn_cuda_error(e, "cudaFree", c->name);
#endif
    tcn_device_leave(prev);
    return st;
}

/* Run a registration call on c's NCCL communicator under its lock; non-blocking ones are settled. */
static tcomms_status_t reg_call(tcn_comm_t *c, int kind, void *buf, size_t bytes, reg_t *r)
{
    ncclResult_t res = ncclSuccess;
    const char *call = "";
    if (c->nccl == NULL || tcn_comm_broken(c))
        return tcn_comm_aborted(c, "mem_register");
    r->on = c->nccl;
#if TCN_HAS_WINDOW
    if (kind == REG_WINDOW) {
        ncclWindow_t win = NULL;
        call = "ncclCommWindowRegister";
        r->on = c->wnccl != NULL ? c->wnccl : c->nccl;
        res = ncclCommWindowRegister(r->on, buf, bytes, &win, NCCL_WIN_COLL_SYMMETRIC);
        r->handle = win;
    }
#endif
#if TCN_HAS_MEM
    if (kind == REG_BUFFER) {
        call = "ncclCommRegister";
        res = ncclCommRegister(c->nccl, buf, bytes, &r->handle);
    }
#endif
    (void)kind; /* unused with NCCL before 2.19 */
    (void)buf;
    (void)bytes;
    (void)r;
    if (res == ncclInProgress)
        res = tcn_settle(r->on, res, tc_now_ns() + (uint64_t)c->timeout_ms * 1000000ull);
    return res == ncclSuccess ? TCOMMS_SUCCESS : tcn_nccl_error(c, res, call);
}

tcomms_status_t tcn_mem_register(void *bcomm, void *buf, size_t bytes, unsigned flags, void **handle)
{
    tcn_comm_t *c = bcomm;
    int kind = (flags & TCOMMS_MEM_REG_WINDOW) ? REG_WINDOW : TCN_HAS_MEM ? REG_BUFFER : REG_NONE;
    if (kind == REG_WINDOW && !TCN_HAS_WINDOW)
        return tcn_core->error(TCOMMS_ERR_NOT_SUPPORTED, "nccl '%s': symmetric windows need "
                               "ncclCommWindowRegister (NCCL 2.27); this module was built with NCCL %d.%d.%d",
                               c->name, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
    reg_t *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return tcn_core->error(TCOMMS_ERR_NO_MEMORY, "nccl '%s': out of memory for a registration", c->name);
    r->kind = kind;
    tcomms_status_t st = TCOMMS_SUCCESS;
    if (kind != REG_NONE) { /* before NCCL 2.19 there is nothing to register: a no-op handle */
        int prev = tcn_device_enter(c);
        st = kind == REG_WINDOW ? tcn_win_open(c) : TCOMMS_SUCCESS;
        pthread_mutex_lock(&c->lock);
        if (st == TCOMMS_SUCCESS)
            st = reg_call(c, kind, buf, bytes, r);
        if (st == TCOMMS_SUCCESS) {
            r->buf = buf;
            r->bytes = bytes;
            r->next = c->regs;
            r->pprev = &c->regs;
            if (c->regs)
                c->regs->pprev = &r->next;
            c->regs = r;
            if (kind == REG_WINDOW)
                atomic_fetch_add(&c->nwindows, 1);
        }
        pthread_mutex_unlock(&c->lock);
        tcn_device_leave(prev);
    }
    if (st != TCOMMS_SUCCESS) {
        free(r);
        return st;
    }
    *handle = r;
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcn_mem_deregister(void *bcomm, void *handle)
{
    tcn_comm_t *c = bcomm;
    reg_t *r = handle;
    ncclResult_t res = ncclSuccess;
    const char *call = "";
    int prev = tcn_device_enter(c);
    pthread_mutex_lock(&c->lock);
    if (r->pprev) {
        *r->pprev = r->next;
        if (r->next)
            r->next->pprev = r->pprev;
        if (r->kind == REG_WINDOW)
            atomic_fetch_sub(&c->nwindows, 1);
    }
    /* after an abort NCCL has released the registration with the communicator: only the handle is left */
    if (r->on != NULL && (r->on == c->nccl || r->on == c->wnccl)) {
#if TCN_HAS_WINDOW
        if (r->kind == REG_WINDOW) {
            call = "ncclCommWindowDeregister";
            res = ncclCommWindowDeregister(r->on, (ncclWindow_t)r->handle);
        }
#endif
#if TCN_HAS_MEM
        if (r->kind == REG_BUFFER) {
            call = "ncclCommDeregister";
            res = ncclCommDeregister(r->on, r->handle);
        }
#endif
        if (res == ncclInProgress)
            res = tcn_settle(r->on, res, tc_now_ns() + (uint64_t)c->timeout_ms * 1000000ull);
    }
    tcomms_status_t st = res == ncclSuccess ? TCOMMS_SUCCESS : tcn_nccl_error(c, res, call);
    pthread_mutex_unlock(&c->lock);
    tcn_device_leave(prev);
    free(r);
    return st;
}
