/* SPDX-License-Identifier: BSD-3-Clause */
/* Symmetric windows for the runtime's pools on a GPU: ZeRO-3 unit buffers registered on the all-gather
 * communicators, ZeRO-2/3 gradient slots on the shard communicators (tcomms_mem_alloc, then tcomms_mem_register
 * with TCOMMS_MEM_REG_WINDOW). Every rank's buffer has the same size and layout, which is what a window asks for.
 * NCCL then runs its symmetric kernels, and on an all-gather communicator with nccl.cta_policy=zero (what
 * tcomms_fsdp_groups_create asks for) copy-engine all-gathers, which take no SM from the GEMMs beside them.
 * Registration is collective, so it runs after finalize's agreement, in one order on every rank, and only after
 * every rank has its memory (one more all-reduce): a rank short of memory must not leave the others waiting in a
 * registration. */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "rt.h"

#define MAX_COMMS TC_FSDP_NDOMAINS

/* The distinct communicators (of size > 1) that collectives on a pool use: `on` of every domain with buckets. */
static int pool_comms(const tcomms_fsdp_t *rt, tc_fsdp_on_t on, tcomms_comm_t **out)
{
    int n = 0;
    for (int d = 0; d < TC_FSDP_NDOMAINS; d++) {
        const tc_fsdp_domain_t *dom = &rt->dom[d];
        tcomms_comm_t *c = on == TC_FSDP_ON_AG ? dom->ag : dom->shard;
        int used = 0;
        for (int b = 0; b < rt->nbuckets && !used; b++)
            used = rt->buckets[b].domain == d;
        if (c == NULL || dom->shard_size < 2 || !used || (n > 0 && out[n - 1] == c))
            continue;
        out[n++] = c;
    }
    return n;
}

static void release(tc_fsdp_buf_t *b, void **data)
{
    for (int i = MAX_COMMS - 1; i >= 0; i--) {
        tcomms_mem_deregister(b->reg[i]);
        b->reg[i] = NULL;
    }
    if (*data != NULL)
        tcomms_mem_free(b->owner, TCOMMS_DEVICE_CUDA, *data);
    *data = NULL;
}

void tc_fsdp_pool_free(tcomms_fsdp_t *rt, tc_fsdp_buf_t *b)
{
    if (b->owner != NULL)
        release(b, &b->data);
    else
        tc_fsdp_free(rt, b->data);
    b->data = NULL;
    b->owner = NULL;
}

/* Register pool `bufs` on `comms`; on failure the registrations made are released and the buffers keep `mem`. */
static tcomms_status_t register_pool(tc_fsdp_buf_t *bufs, int n, void **mem, tcomms_comm_t **comms, int ncomms)
{
    for (int i = 0; i < n; i++)
        for (int c = 0; c < ncomms; c++) {
            tcomms_status_t st = tcomms_mem_register(comms[c], TCOMMS_DEVICE_CUDA, mem[i], bufs[i].bytes,
                                                     TCOMMS_MEM_REG_WINDOW, &bufs[i].reg[c]);
            if (st != TCOMMS_SUCCESS)
                return st;
        }
    return TCOMMS_SUCCESS;
}

static tcomms_status_t window_pool(tcomms_fsdp_t *rt, tc_fsdp_buf_t *bufs, int n, tc_fsdp_on_t on)
{
    const char *fn = "tcomms_fsdp_finalize";
    tcomms_comm_t *comms[MAX_COMMS];
    int ncomms = pool_comms(rt, on, comms);
    if (n == 0 || ncomms == 0)
        return TCOMMS_SUCCESS;
    void **mem = calloc((size_t)n, sizeof(*mem));
    tcomms_status_t st = mem != NULL ? TCOMMS_SUCCESS
                                     : tc_error(TCOMMS_ERR_NO_MEMORY, "%s: out of memory", fn);
    for (int i = 0; i < n && st == TCOMMS_SUCCESS; i++) {
        bufs[i].owner = comms[0];
        st = tcomms_mem_alloc(comms[0], TCOMMS_DEVICE_CUDA, bufs[i].bytes, &mem[i]);
    }
    /* Every rank must hold its memory before any registers. */
    int64_t ok = st == TCOMMS_SUCCESS;
    char why[256] = "";
    if (!ok)
        snprintf(why, sizeof(why), "%s", tcomms_last_error());
    tcomms_status_t cs = tc_fsdp_ctl(rt->groups.members, TC_FSDP_ALL_REDUCE, &ok, &ok, 1, TCOMMS_INT64, TCOMMS_MIN,
                                     rt->cfg.timeout_ms);
    if (cs != TCOMMS_SUCCESS)
        st = tc_error_prefix(cs, "%s: agreeing on window memory over groups->members: ", fn);
    else if (!ok && st == TCOMMS_SUCCESS)
        st = tc_error(TCOMMS_ERR_NO_MEMORY, "%s: another rank could not allocate its window memory", fn);
    else if (!ok)
        st = tc_error(st, "%s", why);
    if (st == TCOMMS_SUCCESS && (st = register_pool(bufs, n, mem, comms, ncomms)) == TCOMMS_SUCCESS) {
        for (int i = 0; i < n; i++) {
            tc_fsdp_free(rt, bufs[i].data);
            bufs[i].data = mem[i];
            if (st == TCOMMS_SUCCESS) /* pools start zeroed, as tc_fsdp_alloc's memory */
                st = tc_fsdp_zero(rt, mem[i], bufs[i].bytes, TCOMMS_UINT8);
        }
        free(mem);
        return st;
    }
    for (int i = 0; mem != NULL && i < n; i++) {
        release(&bufs[i], &mem[i]);
        bufs[i].owner = NULL;
    }
    free(mem);
    return st;
}

tcomms_status_t tc_fsdp_windows(tcomms_fsdp_t *rt)
{
    if (rt->cfg.windows < 0 || rt->ops->device_type != TCOMMS_DEVICE_CUDA)
        return TCOMMS_SUCCESS;
    tcomms_status_t st = window_pool(rt, rt->ubufs, rt->nubufs, TC_FSDP_ON_AG);
    if (st == TCOMMS_SUCCESS)
        st = window_pool(rt, rt->gslots, rt->ngslots, TC_FSDP_ON_SHARD);
    /* Where the backend has no windows (NOT_SUPPORTED, on every rank alike) the plain buffers serve, unless
     * config->windows insists. */
    if (st == TCOMMS_ERR_NOT_SUPPORTED && rt->cfg.windows == 0) {
        tc_log(TCOMMS_LOG_INFO, "fsdp", "tcomms_fsdp_finalize: no symmetric windows (%s); plain device buffers",
               tcomms_last_error());
        return TCOMMS_SUCCESS;
    }
    return st == TCOMMS_SUCCESS ? st : tc_error_prefix(st, "tcomms_fsdp_finalize: symmetric windows: ");
}
