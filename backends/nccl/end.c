/* SPDX-License-Identifier: BSD-3-Clause */
/* Ending an NCCL communicator (ncclCommAbort or ncclCommDestroy) on a thread of its own, waited for up to a bound.
 * Either normally returns soon. They need not: NCCL 2.28 cannot interrupt a copy-engine collective whose peer is
 * lost (its stream waits on a flag in memory, which no abort flag reaches), and its abort then waits for good; a
 * destroy can wait on a peer that died. The caller goes on after the bound, so the calls still end; at destroy
 * (tcn_end_done) a communicator whose end is stuck leaves its device memory allocated, since freeing it would wait
 * for a device that never drains (docs/nccl.md, "Watchdog and abort"). */
#include <stdlib.h>

#include "tcn.h"

struct tcn_ender {
    ncclComm_t nccl, wnccl; /* wnccl: the window communicator, or NULL; ended first */
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
        free(e);
    }
}

static void end_both(ncclComm_t nccl, ncclComm_t wnccl, int destroy)
{
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
    end_both(e->nccl, e->wnccl, e->destroy);
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

int tcn_end_nccl(tcn_comm_t *c, int destroy, long wait_ms)
{
    struct tcn_ender *e = calloc(1, sizeof(*e));
    pthread_attr_t attr;
    pthread_t t;
    int made = e != NULL && pthread_attr_init(&attr) == 0;
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
        free(e);
        end_both(c->nccl, c->wnccl, destroy);
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
