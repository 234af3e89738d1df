/* Work handles: a backend's in-flight operation plus the timeout it was posted with; the final status is kept so
 * repeated wait/test calls answer the same. */
#include <stdlib.h>

#include "comm.h"
#include "error.h"
#include "work.h"

struct tcomms_work {
    const tcomms_backend_t *be;
    void *bwork;
    uint32_t timeout_ms;
};

/* A wait gives the backend its operation's timeout plus a margin, so the backend reports a timeout of its own
 * (with its detail) before the core gives up; the sum saturates instead of wrapping. */
static uint32_t with_margin(uint32_t ms)
{
    return ms > UINT32_MAX - TC_WAIT_MARGIN_MS ? UINT32_MAX : ms + TC_WAIT_MARGIN_MS;
}

tcomms_status_t tc_work_block(const tcomms_backend_t *be, void *bwork, uint32_t timeout_ms)
{
    tcomms_status_t st = be->work_wait(bwork, with_margin(timeout_ms));
    be->work_free(bwork);
    return st;
}

tcomms_status_t tc_work_wrap(const tcomms_backend_t *be, void *bwork, uint32_t timeout_ms, tcomms_work_t **out)
{
    tcomms_work_t *w = malloc(sizeof(*w));
    if (w == NULL) {
        /* The operation is already posted: finish it rather than leak it half-done. */
        be->work_wait(bwork, with_margin(timeout_ms));
        be->work_free(bwork);
        return tc_error(TCOMMS_ERR_NO_MEMORY, "out of memory for a work handle (the operation was completed)");
    }
    *w = (tcomms_work_t){be, bwork, timeout_ms};
    *out = w;
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcomms_work_wait(tcomms_work_t *work, uint32_t timeout_ms)
{
    if (work == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_work_wait: work is NULL");
    return work->be->work_wait(work->bwork, timeout_ms ? timeout_ms : with_margin(work->timeout_ms));
}

/* A CPU backend's wait already blocks the host, so it is the fallback. */
tcomms_status_t tcomms_work_synchronize(tcomms_work_t *work, uint32_t timeout_ms)
{
    if (work == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_work_synchronize: work is NULL");
    uint32_t ms = timeout_ms ? timeout_ms : with_margin(work->timeout_ms);
    if (work->be->work_synchronize != NULL)
        return work->be->work_synchronize(work->bwork, ms);
    return work->be->work_wait(work->bwork, ms);
}

tcomms_status_t tcomms_work_test(tcomms_work_t *work)
{
    if (work == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_work_test: work is NULL");
    return work->be->work_test(work->bwork);
}

void tcomms_work_free(tcomms_work_t *work)
{
    if (work == NULL)
        return;
    work->be->work_free(work->bwork);
    free(work);
}
