/* SPDX-License-Identifier: BSD-3-Clause */
/* Memory for communication buffers: allocation and registration through the backend serving a device type on a
 * communicator (ncclMemAlloc, ncclCommRegister), with the fallbacks of backend.h where the backend offers none:
 * page-aligned host memory for CPU slots, and a registration that does nothing. A registration holds a reference
 * on the communicator's backends, as a work handle does, so a communicator destroyed first keeps them until the
 * deregistration, which then destroys them, instead of leaving the handle pointing at freed memory. */
#include <stdlib.h>
#include <unistd.h>

#include "comm.h"
#include "error.h"

struct tcomms_mem_reg {
    const tcomms_backend_t *be;
    void *bcomm;
    void *handle;
    int by_backend;         /* 0: the core's no-op registration */
    tc_comm_state_t *state; /* the reference that keeps bcomm */
};

/* A backend's memory entries are used as pairs, so memory is always released the way it was obtained. */
static int has_alloc(const tcomms_backend_t *be)
{
    return be->mem_alloc != NULL && be->mem_free != NULL;
}

static int has_register(const tcomms_backend_t *be)
{
    return be->mem_register != NULL && be->mem_deregister != NULL;
}

static size_t page_size(void)
{
    long page = sysconf(_SC_PAGESIZE);
    return page > 4096 ? (size_t)page : 4096;
}

tcomms_status_t tcomms_mem_alloc(tcomms_comm_t *comm, tcomms_device_type_t type, size_t bytes, void **ptr)
{
    tcomms_status_t st = tc_comm_check(comm, "tcomms_mem_alloc", "comm");
    if (st != TCOMMS_SUCCESS)
        return st;
    if (ptr == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_mem_alloc: ptr is NULL");
    *ptr = NULL;
    const tc_slot_t *slot = NULL;
    st = tc_comm_slot(comm, type, "tcomms_mem_alloc", &slot);
    if (st != TCOMMS_SUCCESS || bytes == 0)
        return st;
    if (has_alloc(slot->be)) {
        st = slot->be->mem_alloc(slot->bcomm, bytes, ptr);
        return st == TCOMMS_SUCCESS ? st : tc_error_prefix(st, "tcomms_mem_alloc (%zu bytes): ", bytes);
    }
    if (type != TCOMMS_DEVICE_CPU)
        return tc_error(TCOMMS_ERR_NOT_SUPPORTED, "tcomms_mem_alloc: backend '%s' allocates no %s memory",
                        slot->be->name, tcomms_device_type_name(type));
    int err = posix_memalign(ptr, page_size(), bytes);
    if (err != 0) {
        *ptr = NULL;
        return tc_error(TCOMMS_ERR_NO_MEMORY, "tcomms_mem_alloc: out of memory for %zu bytes", bytes);
    }
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcomms_mem_free(tcomms_comm_t *comm, tcomms_device_type_t type, void *ptr)
{
    tcomms_status_t st = tc_comm_check(comm, "tcomms_mem_free", "comm");
    if (st != TCOMMS_SUCCESS)
        return st;
    const tc_slot_t *slot = NULL;
    st = tc_comm_slot(comm, type, "tcomms_mem_free", &slot);
    if (st != TCOMMS_SUCCESS || ptr == NULL)
        return st;
    if (has_alloc(slot->be)) {
        st = slot->be->mem_free(slot->bcomm, ptr);
        return st == TCOMMS_SUCCESS ? st : tc_error_prefix(st, "tcomms_mem_free: ");
    }
    if (type != TCOMMS_DEVICE_CPU)
        return tc_error(TCOMMS_ERR_NOT_SUPPORTED, "tcomms_mem_free: backend '%s' allocates no %s memory",
                        slot->be->name, tcomms_device_type_name(type));
    free(ptr);
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcomms_mem_register(tcomms_comm_t *comm, tcomms_device_type_t type, void *buf, size_t bytes,
                                    unsigned flags, tcomms_mem_reg_t **reg)
{
    if (reg == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_mem_register: reg is NULL");
    *reg = NULL;
    tcomms_status_t st = tc_comm_check(comm, "tcomms_mem_register", "comm");
    if (st != TCOMMS_SUCCESS)
        return st;
    if (buf == NULL || bytes == 0)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_mem_register: %s", buf ? "bytes is 0" : "buf is NULL");
    if ((st = tc_check_mask(flags, TCOMMS_MEM_REG_WINDOW, "tcomms_mem_register", "flags")) != TCOMMS_SUCCESS)
        return st;
    const tc_slot_t *slot = NULL;
    st = tc_comm_slot(comm, type, "tcomms_mem_register", &slot);
    if (st != TCOMMS_SUCCESS)
        return st;
    int by_backend = has_register(slot->be);
    if (!by_backend && (flags & TCOMMS_MEM_REG_WINDOW))
        return tc_error(TCOMMS_ERR_NOT_SUPPORTED, "tcomms_mem_register: backend '%s' has no symmetric windows "
                        "(TCOMMS_MEM_REG_WINDOW)", slot->be->name);
    tcomms_mem_reg_t *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "tcomms_mem_register: out of memory");
    *r = (tcomms_mem_reg_t){slot->be, slot->bcomm, NULL, by_backend, comm->state};
    if (by_backend && (st = slot->be->mem_register(slot->bcomm, buf, bytes, flags, &r->handle)) != TCOMMS_SUCCESS) {
        free(r);
        return tc_error_prefix(st, "tcomms_mem_register (%zu bytes): ", bytes);
    }
    if (r->state != NULL)
        tc_comm_state_ref(r->state);
    *reg = r;
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcomms_mem_deregister(tcomms_mem_reg_t *reg)
{
    if (reg == NULL)
        return TCOMMS_SUCCESS;
    tcomms_status_t st = reg->by_backend ? reg->be->mem_deregister(reg->bcomm, reg->handle) : TCOMMS_SUCCESS;
    if (st != TCOMMS_SUCCESS)
        st = tc_error_prefix(st, "tcomms_mem_deregister: ");
    /* the last reference destroys the backends: their error counts when deregistration had none */
    tcomms_status_t dst = tc_comm_state_unref(reg->state);
    free(reg);
    return st != TCOMMS_SUCCESS ? st : dst;
}
