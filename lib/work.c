/* SPDX-License-Identifier: BSD-3-Clause */
/* Work handles: a backend's in-flight operation plus the timeout it was posted with and a reference to its
 * communicator's record (comm_state.h), so a handle may outlive its public communicator: the record keeps the
 * backend's communicator until the last handle is freed. The final status is kept so repeated wait/test calls
 * answer the same, and a final error breaks the communicator. Where the core finishes an operation itself
 * (integer AVG), it does so on the first call that sees it complete, and before the handle goes. */
#include <stdio.h>
#include <stdlib.h>

#include "comm.h"
#include "error.h"
#include "flight.h"
#include "handle.h"
#include "log.h"
#include "work.h"

struct tcomms_work {
    uint32_t magic; /* handle.h */
    tc_posted_t p;
};

/* A wait gives the backend its operation's timeout plus a margin, so the backend reports a timeout of its own
 * (with its detail) before the core gives up; the sum saturates instead of wrapping. */
static uint32_t with_margin(uint32_t ms)
{
    return ms > UINT32_MAX - TC_WAIT_MARGIN_MS ? UINT32_MAX : ms + TC_WAIT_MARGIN_MS;
}

/* Is the error `st`, returned by a wait, the wait's own (a timeout, a wait before its group's end) while the
 * operation goes on? The backend is asked once more, keeping this thread's message. */
static int still_running(const tc_posted_t *p, tcomms_status_t st)
{
    char msg[1024];
    snprintf(msg, sizeof(msg), "%s", tcomms_last_error());
    int running = p->be->work_test(p->bwork) == TCOMMS_IN_PROGRESS;
    tc_error(st, "%s", msg);
    return running;
}

/* Has `p` been running for its whole timeout? A wait's own shorter timeout is no reason to ask the other ranks.
 * The slack covers the flight record's coarse clock. */
static int overdue(const tc_posted_t *p)
{
    int64_t posted = tc_flight_posted_us(p->flight, p->seq);
    return p->flight != NULL && (posted == 0 || tc_flight_now_us() - posted + 50000 >= (int64_t)p->timeout_ms * 1000);
}

/* Run the core's part of `p` once the backend reported `st` (`tested`: by work_test, whose errors are always the
 * operation's own): a final error breaks the communicator for good (comm_state.h), and an integer AVG is narrowed
 * once the backend no longer uses the buffers it was given. */
static tcomms_status_t finish(tc_posted_t *p, tcomms_status_t st, int tested)
{
    int diagnosed = 0;
    if (st < 0) { /* a success passes one test here */
        if (st == TCOMMS_ERR_TIMEOUT && !p->asked && overdue(p)) {
            p->asked = 1;
            diagnosed = tc_flight_timed_out(p->flight, p->seq, p->timeout_ms, st);
        } else if (st == TCOMMS_ERR_ABORTED) {
            /* an NCCL watchdog's timeout of another operation */
            diagnosed = tc_flight_broken(p->flight, p->timeout_ms, st);
        }
        if (diagnosed) /* a backend may have reported the same failure in its own words already */
            tc_comm_state_explain(p->state);
    }
    if (st == TCOMMS_IN_PROGRESS || (st < 0 && !tested && still_running(p, st)))
        return st;
    tc_flight_mark(p->flight, p->seq, st < 0 ? TC_FLIGHT_FAILED : TC_FLIGHT_COMPLETED);
    if (st < 0) {
        tc_comm_state_fail(p->state, st);
        if (diagnosed) /* recorded just now, from the diagnosis itself or, after a backend's report, replacing it */
            tc_comm_state_explain(p->state);
    }
    if (p->avg != NULL) {
        tc_wide_avg_end(p->avg, st);
        p->avg = NULL;
    }
    return st;
}

/* Wait for `p` to end and release it; the buffers the core lent the backend go only once it has ended. */
static tcomms_status_t release(tc_posted_t *p, uint32_t timeout_ms)
{
    if (!p->inline_call)
        tc_flight_mark(p->flight, p->seq, TC_FLIGHT_WAITING);
    tcomms_status_t st = p->be->work_wait(p->bwork, timeout_ms);
    finish(p, st, 0);
    if (p->avg != NULL) /* still running past its own timeout: lose the copy rather than free it under the backend */
        tc_log(TCOMMS_LOG_WARN, "core", "an integer avg still running after %u ms: its int64 copy is leaked",
               timeout_ms);
    p->be->work_free(p->bwork);
    if (!p->inline_call) { /* else the references are the communicator's */
        tc_comm_state_unref(p->state);
        tc_flight_unref(p->flight);
    }
    p->state = NULL;
    p->flight = NULL;
    return st;
}

tcomms_status_t tc_work_block(tc_posted_t *p)
{
    if (p->bwork == NULL) /* the backend ran it to its end inside post() (TCOMMS_COLL_FLAG_INLINE) */
        return finish(p, TCOMMS_SUCCESS, 1);
    return release(p, with_margin(p->timeout_ms));
}

tcomms_status_t tc_work_wrap(tc_posted_t p, tcomms_work_t **out)
{
    tcomms_work_t *w = malloc(sizeof(*w));
    if (w == NULL) {
        /* The operation is already posted: finish it rather than leak it half-done. */
        release(&p, with_margin(p.timeout_ms)); /* drops the state reference too */
        return tc_error(TCOMMS_ERR_NO_MEMORY, "out of memory for a work handle (the operation was completed)");
    }
    *w = (tcomms_work_t){tc_handle_magic[TC_HANDLE_WORK], p};
    *out = w;
    return TCOMMS_SUCCESS;
}

static tcomms_status_t check(const tcomms_work_t *work, const char *who)
{
    return tc_handle_check(work, TC_HANDLE_WORK, who, "work");
}

tcomms_status_t tcomms_work_wait(tcomms_work_t *work, uint32_t timeout_ms)
{
    tcomms_status_t st = check(work, "tcomms_work_wait");
    if (st != TCOMMS_SUCCESS)
        return st;
    tc_flight_mark(work->p.flight, work->p.seq, TC_FLIGHT_WAITING);
    st = work->p.be->work_wait(work->p.bwork, timeout_ms ? timeout_ms : with_margin(work->p.timeout_ms));
    return finish(&work->p, st, 0);
}

/* A CPU backend's wait already blocks the host, so it is the fallback. */
tcomms_status_t tcomms_work_synchronize(tcomms_work_t *work, uint32_t timeout_ms)
{
    tcomms_status_t st = check(work, "tcomms_work_synchronize");
    if (st != TCOMMS_SUCCESS)
        return st;
    uint32_t ms = timeout_ms ? timeout_ms : with_margin(work->p.timeout_ms);
    const tcomms_backend_t *be = work->p.be;
    tc_flight_mark(work->p.flight, work->p.seq, TC_FLIGHT_WAITING);
    st = be->work_synchronize != NULL ? be->work_synchronize(work->p.bwork, ms) : be->work_wait(work->p.bwork, ms);
    return finish(&work->p, st, 0);
}

tcomms_status_t tcomms_work_test(tcomms_work_t *work)
{
    tcomms_status_t st = check(work, "tcomms_work_test");
    if (st != TCOMMS_SUCCESS)
        return st;
    return finish(&work->p, work->p.be->work_test(work->p.bwork), 1);
}

/* A running operation whose result the core still writes is waited for: freeing it must not lose the result. */
tcomms_status_t tcomms_work_free(tcomms_work_t *work)
{
    if (work == NULL)
        return TCOMMS_SUCCESS;
    tcomms_status_t st = check(work, "tcomms_work_free");
    if (st != TCOMMS_SUCCESS)
        return st;
    if (work->p.avg != NULL) {
        release(&work->p, with_margin(work->p.timeout_ms));
    } else {
        work->p.be->work_free(work->p.bwork);
        tc_comm_state_unref(work->p.state);
        tc_flight_unref(work->p.flight);
    }
    tc_handle_retire(work, TC_HANDLE_WORK);
    return TCOMMS_SUCCESS;
}
