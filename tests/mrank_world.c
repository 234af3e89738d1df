/* SPDX-License-Identifier: BSD-3-Clause */
/* The root communicator of a multi-rank test child (tests/mrank_world.h). */
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
