/* SPDX-License-Identifier: BSD-3-Clause */
/* Ending an NCCL communicator (ncclCommAbort or ncclCommDestroy) on a thread of its own, waited for up to a bound.
 * Either normally returns soon. They need not: NCCL 2.28 cannot interrupt a copy-engine collective whose peer is
 * lost (its stream waits on a flag in memory, which no abort flag reaches), and its abort then waits for good; a
 * destroy can wait on a peer that died. The caller goes on after the bound, so the calls still end; at destroy
 * (tcn_end_done) a communicator whose end is stuck leaves its device memory allocated, since freeing it would wait
 * for a device that never drains (docs/nccl.md, "Watchdog and abort"). An abort first deregisters the buffers
 * registered with ncclCommRegister (tcomms_mem_register's, the registered scratch): NCCL 2.28.3's ncclCommAbort
 * killed 4-rank jobs (SIGSEGV) after collectives over such buffers, and did not once they were deregistered first
 * (docs/nccl.md, "Known problem"). That deregistration talks to the peers' proxies, so it too runs under the bound. */
#include <stdlib.h>

#include "tcn.h"

struct tcn_ender {
    ncclComm_t nccl, wnccl; /* wnccl: the window communicator, or NULL; ended first */
    void **dereg;           /* ncclCommRegister handles on nccl to deregister before an abort */
    size_t ndereg;
    int device, destroy, done, refs; /* refs: the thread's and the communicator's */
    pthread_mutex_t m;
    pthread_cond_t cv;
};

static void drop(struct tcn_ender *e)
{
    pthread_mutex_lock(&e->m);
    int last = --e->refs == 0;
    pthread_mutex_unlock(&e->m);
    if (last) {
        pthread_mutex_destroy(&e->m);
        pthread_cond_destroy(&e->cv);
        free(e->dereg);
        free(e);
    }
}

static void end_both(ncclComm_t nccl, ncclComm_t wnccl, int destroy, void **dereg, size_t ndereg)
{
#if TCN_HAS_MEM
    for (size_t i = 0; i < ndereg && nccl != NULL && !destroy; i++)
        ncclCommDeregister(nccl, dereg[i]);
#else
    (void)dereg, (void)ndereg; /* nothing is registered before NCCL 2.19 */
#endif
    ncclComm_t comms[2] = {wnccl, nccl};
    for (int i = 0; i < 2; i++)
        if (comms[i] != NULL && destroy)
            ncclCommDestroy(comms[i]);
        else if (comms[i] != NULL)
            ncclCommAbort(comms[i]);
}

static void *end_main(void *arg)
{
    struct tcn_ender *e = arg;
    cudaSetDevice(e->device);
    end_both(e->nccl, e->wnccl, e->destroy, e->dereg, e->ndereg);
    pthread_mutex_lock(&e->m);
    e->done = 1;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->m);
    drop(e);
    return NULL;
}

static int wait_done(struct tcn_ender *e, long ms)
{
    struct timespec ts = tcn_in_ms(ms);
    pthread_mutex_lock(&e->m);
    while (!e->done && pthread_cond_timedwait(&e->cv, &e->m, &ts) == 0)
        ;
    int done = e->done;
    pthread_mutex_unlock(&e->m);
    return done;
}

/* The handles an abort deregisters first (c->lock held); none where memory runs out: the abort goes on without. */
static void take_regs(tcn_comm_t *c, struct tcn_ender *e)
{
    size_t n = tcn_mem_buffer_regs(c, NULL, 0) + tcn_scratch_regs(c, NULL, 0);
    if (n == 0 || (e->dereg = malloc(n * sizeof(void *))) == NULL)
        return;
    e->ndereg = tcn_mem_buffer_regs(c, e->dereg, n);
    e->ndereg += tcn_scratch_regs(c, e->dereg + e->ndereg, n - e->ndereg);
    tcn_core->log(TCOMMS_LOG_DEBUG, "nccl", "'%s' rank %d: deregistering %zu buffers before ncclCommAbort", c->name,
                  c->rank, e->ndereg);
}

int tcn_end_nccl(tcn_comm_t *c, int destroy, int deregister, long wait_ms)
{
    struct tcn_ender *e = calloc(1, sizeof(*e));
    pthread_attr_t attr;
    pthread_t t;
    int made = e != NULL && pthread_attr_init(&attr) == 0;
    if (made && !destroy && deregister)
        take_regs(c, e);
    if (made) {
        e->nccl = c->nccl;
        e->wnccl = c->wnccl;
        e->device = c->device;
        e->destroy = destroy;
        e->refs = 2;
        pthread_mutex_init(&e->m, NULL);
        pthread_cond_init(&e->cv, NULL);
        made = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) == 0 &&
               pthread_create(&t, &attr, end_main, e) == 0;
        pthread_attr_destroy(&attr);
        if (!made) {
            pthread_mutex_destroy(&e->m);
            pthread_cond_destroy(&e->cv);
        }
    }
    if (!made) { /* no thread to spare: end it here, unbounded */
        end_both(c->nccl, c->wnccl, destroy, e ? e->dereg : NULL, e ? e->ndereg : 0);
        if (e != NULL)
            free(e->dereg);
        free(e);
        return 1;
    }
    if (c->ender != NULL) /* an earlier end of the same communicator is given up on */
        drop(c->ender);
    c->ender = e;
    return wait_done(e, wait_ms);
}

int tcn_end_done(tcn_comm_t *c, long wait_ms)
{
    struct tcn_ender *e = c->ender;
    if (e == NULL)
        return 1;
    int done = wait_done(e, wait_ms);
    c->ender = NULL;
    drop(e);
    return done;
}
