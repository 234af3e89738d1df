/* SPDX-License-Identifier: BSD-3-Clause */
/* Asynchrony over blocking Gloo: each communicator owns one worker thread draining a FIFO of posted operations, so
 * operations run in posting order (identical on every rank, which keeps Gloo tags in step). Work handles report
 * completion through a condition variable and may be freed while running. */
#include "gloo.h"

#include <pthread.h>

namespace tcg {
namespace {

void finish(Work &w, tcomms_status_t status, std::string message)
{
    std::lock_guard<std::mutex> lock(w.mu);
    w.status = status;
    w.message = std::move(message);
    w.done = true;
    w.cv.notify_all();
}

/* Run one operation unless an earlier failure broke the communicator; the first failure breaks it. */
void execute(Comm &c, Work &w)
{
    const char *op = coll_name(w.args.type);
    tcomms_status_t status = TCOMMS_SUCCESS;
    std::string message;
    const char *why = nullptr;
    if (c.core->comm_failed(c.state, &why) != TCOMMS_SUCCESS) {
        status = TCOMMS_ERR_ABORTED;
        message = strf("gloo %s on '%s': communicator is unusable after an earlier error: %s", op, c.name.c_str(),
                       why);
    }
    if (status == TCOMMS_SUCCESS) {
        try {
            run_op(c, w);
        } catch (...) {
            Failure f = current_failure();
            status = f.status;
            message = strf("gloo %s on '%s' (rank %d of %d): %s%s", op, c.name.c_str(), c.rank, c.size,
                           f.message.empty() ? "failed" : f.message.c_str(),
                           status == TCOMMS_ERR_TIMEOUT ? " (a peer did not join, or the ranks' counts, dtypes, "
                                                          "ops or roots differ)" : "");
            std::lock_guard<std::mutex> lock(c.mu);
            if (c.aborted) { /* the abort closed the pairs under it: that is the cause, not the peer */
                status = TCOMMS_ERR_ABORTED;
                message = strf("gloo %s on '%s' (rank %d of %d): aborted by tcomms_comm_abort (gloo: %s)", op,
                               c.name.c_str(), c.rank, c.size, f.message.c_str());
            }
            c.core->comm_fail(c.state, status, "%s", message.c_str());
        }
    }
    /* The transfer is over: its buffer goes now rather than with the handle. */
    w.p2p.reset();
    if (status != TCOMMS_SUCCESS)
        c.core->log(TCOMMS_LOG_DEBUG, "gloo", "%s", message.c_str());
    finish(w, status, std::move(message));
}

void worker_main(Comm *c)
{
    pthread_setname_np(pthread_self(), "tcomms-gloo");
    for (;;) {
        std::shared_ptr<Work> w;
        {
            std::unique_lock<std::mutex> lock(c->mu);
            c->cv.wait(lock, [c] { return c->stopping || !c->queue.empty(); });
            if (c->queue.empty())
                return; /* stopping, and everything posted has run */
            w = std::move(c->queue.front());
            c->queue.pop_front();
        }
        execute(*c, *w);
    }
}

/* Copy a v-variant's per-rank array (the caller's may not outlive post()). */
void keep_array(const size_t *src, int n, std::vector<size_t> &dst, const size_t *&field)
{
    if (!src)
        return;
    dst.assign(src, src + n);
    field = dst.data();
}

tcomms_status_t report(Work &w)
{
    if (w.status == TCOMMS_SUCCESS)
        return TCOMMS_SUCCESS;
    return w.core->error(w.status, "%s", w.message.c_str());
}

/* Refuse early, before anything is queued or issued, a post on a communicator that broke since the core checked
 * (a queued operation failed meanwhile). (A send or receive to this rank itself, which Gloo could not connect,
 * never arrives: the core refuses it.) */
tcomms_status_t refuse(Comm &c, const tcomms_coll_args_t &a)
{
    const char *why = nullptr;
    if (c.core->comm_failed(c.state, &why) != TCOMMS_SUCCESS)
        return c.core->error(TCOMMS_ERR_ABORTED, "gloo %s on '%s': communicator is unusable after an earlier "
                             "error: %s", coll_name(a.type), c.name.c_str(), why);
    return TCOMMS_SUCCESS;
}

} // namespace

void start_worker(Comm &c)
{
    c.worker = std::thread(worker_main, &c);
}

/* Pending operations still run (each bounded by its timeout, or failing fast once the communicator broke). */
void stop_worker(Comm &c)
{
    {
        std::lock_guard<std::mutex> lock(c.mu);
        c.stopping = true;
    }
    c.cv.notify_all();
    if (c.worker.joinable())
        c.worker.join();
}

tcomms_status_t post(void *bcomm, const tcomms_coll_args_t *args, void **bwork)
{
    Comm &c = *static_cast<Comm *>(bcomm);
    return guard(c.core, "post", [&]() -> tcomms_status_t {
        std::lock_guard<std::mutex> order(c.post_mu);
        tcomms_status_t st = refuse(c, *args);
        if (st != TCOMMS_SUCCESS)
            return st;
        auto w = std::make_shared<Work>();
        w->core = c.core;
        w->comm = &c;
        w->args = *args;
        if (args->type == TCOMMS_COLL_ALL_GATHER_V || args->type == TCOMMS_COLL_REDUCE_SCATTER_V ||
            args->type == TCOMMS_COLL_ALL_TO_ALL_V) {
            keep_array(args->sendcounts, c.size, w->sendcounts, w->args.sendcounts);
            keep_array(args->sdispls, c.size, w->sdispls, w->args.sdispls);
            keep_array(args->recvcounts, c.size, w->recvcounts, w->args.recvcounts);
            keep_array(args->rdispls, c.size, w->rdispls, w->args.rdispls);
        }
        if (args->type == TCOMMS_COLL_SEND || args->type == TCOMMS_COLL_RECV) {
            /* Issued now, not on the worker, so that a rank may post a send and a recv before waiting for
             * either: Gloo completes a send only once the peer's matching recv is posted. */
            try {
                start_p2p(c, *w);
            } catch (...) {
                Failure f = current_failure();
                std::string msg = strf("gloo %s on '%s' (rank %d of %d): %s", coll_name(args->type),
                                       c.name.c_str(), c.rank, c.size, f.message.c_str());
                c.core->comm_fail(c.state, f.status, "%s", msg.c_str());
                return c.core->error(f.status, "%s", msg.c_str());
            }
        } else {
            w->tag = collective_tag(c, *args);
        }
        std::unique_ptr<WorkHandle> h(new WorkHandle{w});
        {
            std::lock_guard<std::mutex> lock(c.mu);
            c.queue.push_back(std::move(w));
        }
        c.cv.notify_one();
        *bwork = h.release();
        return TCOMMS_SUCCESS;
    });
}

/* Gloo cannot cancel an operation, so the abort takes the transport away from it: shut_down pairs make the
 * running operation throw at once, and the worker then fails every queued one on the broken communicator, each
 * dropping its transfer before its handle reports, so nothing writes into the caller's buffers afterwards. */
tcomms_status_t comm_abort(void *bcomm)
{
    Comm &c = *static_cast<Comm *>(bcomm);
    NoSigpipe no_sigpipe;
    return guard(c.core, "comm_abort", [&]() -> tcomms_status_t {
        { /* the core recorded the abort before calling this: queued operations fail on it */
            std::lock_guard<std::mutex> lock(c.mu);
            c.aborted = true;
        }
        shutdown_pairs(c);
        return TCOMMS_SUCCESS;
    });
}

tcomms_status_t work_test(void *bwork)
{
    Work &w = *static_cast<WorkHandle *>(bwork)->work;
    return guard(w.core, "work_test", [&]() -> tcomms_status_t {
        std::lock_guard<std::mutex> lock(w.mu);
        return w.done ? report(w) : TCOMMS_IN_PROGRESS;
    });
}

tcomms_status_t work_wait(void *bwork, uint32_t timeout_ms)
{
    Work &w = *static_cast<WorkHandle *>(bwork)->work;
    return guard(w.core, "work_wait", [&]() -> tcomms_status_t {
        uint32_t ms = timeout_ms ? timeout_ms : w.args.timeout_ms;
        std::unique_lock<std::mutex> lock(w.mu);
        if (!w.cv.wait_for(lock, std::chrono::milliseconds(ms), [&w] { return w.done; }))
            return w.core->error(TCOMMS_ERR_TIMEOUT, "gloo %s on '%s' still running after a %u ms wait",
                                 coll_name(w.args.type), w.comm->name.c_str(), ms);
        return report(w);
    });
}

void work_free(void *bwork)
{
    /* Drops the caller's reference; a queued or running operation keeps the worker's until it completes. */
    delete static_cast<WorkHandle *>(bwork);
}

} // namespace tcg
