/* SPDX-License-Identifier: BSD-3-Clause */
/* The root communicator of a multi-rank test child, and the thread that aborts one (tests/mrank_world.h). */
#include "mrank_world.h"

#include "mrank.h"

tcomms_comm_t *mrank_world(const char *backend, uint32_t timeout_ms, int rank)
{
    tcomms_comm_params_t p = {0};
    p.field_mask = TCOMMS_COMM_PARAM_TIMEOUT;
    p.timeout_ms = timeout_ms;
    if (backend != NULL && backend[0] != '\0') {
        p.field_mask |= TCOMMS_COMM_PARAM_BACKEND;
        p.backend = backend;
    }
    tcomms_comm_t *comm = NULL;
    if (tcomms_comm_create(&p, &comm) != TCOMMS_SUCCESS) {
        mrank_logf("FAIL rank %d: tcomms_comm_create(%s): %s", rank, backend && backend[0] ? backend : "default",
                   tcomms_last_error());
        return NULL;
    }
    return comm;
}

static void *abort_thread(void *arg)
{
    mrank_aborter_t *a = arg;
    mrank_sleep_ms(a->after_ms);
    double at = mrank_now();
    a->st = tcomms_comm_abort(a->comm);
    a->took = mrank_now() - at;
    a->at = at;
    return NULL;
}

int mrank_abort_later(mrank_aborter_t *a, tcomms_comm_t *comm, int after_ms)
{
    *a = (mrank_aborter_t){.comm = comm, .after_ms = after_ms, .st = TCOMMS_SUCCESS};
    return pthread_create(&a->thread, NULL, abort_thread, a) == 0 ? 0 : -1;
}

void mrank_abort_join(mrank_aborter_t *a)
{
    pthread_join(a->thread, NULL);
}
