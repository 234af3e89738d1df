/* SPDX-License-Identifier: BSD-3-Clause */
/* Internal declarations of the Gloo backend: the communicator and work objects shared by module.cc (the C table and
 * the exception-to-status boundary), comm.cc (create/destroy, device, store adapter, hints), coll.cc (the
 * operations) and worker.cc (the per-communicator worker thread and work handles). Nothing here is exported. */
#pragma once

#include <tcomms/backend.h>

#include <csignal>
#include <ctime>
#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

/* Gloo's classes carry no visibility attributes; keep their typeinfo default-visible so that exceptions thrown in
 * libgloo are caught here although this module is built with -fvisibility=hidden. */
#pragma GCC visibility push(default)
#include <gloo/rendezvous/context.h>
#include <gloo/transport/device.h>
#include <gloo/transport/unbound_buffer.h>
#pragma GCC visibility pop

namespace tcg {

/* Gloo writes to its sockets with writev, which raises SIGPIPE when the peer has closed: a library must not let
 * that kill the process. While one of these lives, the calling thread blocks SIGPIPE, so the threads started
 * meanwhile (Gloo's device loop, the communicator's worker, which do the writing) keep it blocked for good, and a
 * SIGPIPE raised by the calling thread itself is consumed before its mask comes back. */
class NoSigpipe {
public:
    NoSigpipe()
    {
        sigemptyset(&pipe_);
        sigaddset(&pipe_, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
        sigset_t p;
        was_pending_ = sigpending(&p) == 0 && sigismember(&p, SIGPIPE);
    }
    ~NoSigpipe()
    {
        sigset_t p;
        if (!was_pending_ && sigpending(&p) == 0 && sigismember(&p, SIGPIPE)) {
            const struct timespec zero = {0, 0};
            sigtimedwait(&pipe_, nullptr, &zero);
        }
        pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    }
    NoSigpipe(const NoSigpipe &) = delete;
    NoSigpipe &operator=(const NoSigpipe &) = delete;

private:
    sigset_t pipe_, old_;
    bool was_pending_;
};

/* An error raised inside the shim with the status it maps to. keep_message: the core already set the thread's
 * message (a failed core->store_* call in the caller's thread), so the boundary must not overwrite it. */
struct Error : std::runtime_error {
    Error(tcomms_status_t st, const std::string &msg, bool keep = false)
        : std::runtime_error(msg), status(st), keep_message(keep) {}
    tcomms_status_t status;
    bool keep_message;
};

/* What an exception means for the caller. */
struct Failure {
    tcomms_status_t status;
    std::string message;
    bool keep_message;
};

/* Classify the exception being handled; call only inside a catch block. */
Failure current_failure() noexcept;

/* printf into a std::string. */
std::string strf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The core that queried this module (set by tcg_query, which comes before any other entry). */
extern const tcomms_core_t *module_core;

/* The operation's name in the core's table, for messages. */
const char *coll_name(tcomms_coll_type_t type);

/* Run `fn` (returning a status) so that no exception escapes into C: failures become core->error(...). */
template <typename F>
tcomms_status_t guard(const tcomms_core_t *core, const char *what, F &&fn) noexcept
{
    try {
        return fn();
    } catch (...) {
        Failure f = current_failure();
        if (f.keep_message)
            return f.status;
        return core->error(f.status, "gloo %s: %s", what, f.message.c_str());
    }
}

struct Work;

/* One communicator: a gloo context over a TCP device (shared with split children), and a worker thread that runs
 * queued operations one at a time in posting order, so tags agree across ranks. */
struct Comm {
    const tcomms_core_t *core = nullptr;
    std::string name;
    int rank = 0, size = 1;
    uint32_t timeout_ms = 0;

    std::shared_ptr<gloo::transport::Device> device;
    std::string host;  /* the address the device is bound to */
    std::string iface; /* the interface holding it ("" when unknown) */
    std::shared_ptr<gloo::rendezvous::Context> ctx;

    std::mutex post_mu;              /* serialises post(): tag and p2p sequence order == posting order */
    uint32_t next_tag = 1;           /* collectives' sequence (tag 0 is the creation barrier) */
    std::vector<uint64_t> send_seq;  /* per peer: messages sent / received so far */
    std::vector<uint64_t> recv_seq;

    tcomms_comm_state_t *state = nullptr; /* the core's failure state: gloo pairs are unusable after any failure */

    std::mutex mu;                   /* guards the fields below */
    std::condition_variable cv;
    std::deque<std::shared_ptr<Work>> queue;
    bool stopping = false;
    bool aborted = false;            /* tcomms_comm_abort: what fails from now on fails as TCOMMS_ERR_ABORTED */
    std::thread worker;
};

/* One posted operation. Arrays of v-variants are copied so the caller's may go away after post(). `comm` outlives
 * it: the core destroys a communicator only after its last handle, and comm_destroy drains the queue. */
struct Work {
    const tcomms_core_t *core = nullptr;
    const Comm *comm = nullptr;
    tcomms_coll_args_t args{};
    std::vector<size_t> sendcounts, sdispls, recvcounts, rdispls;
    uint32_t tag = 0;
    std::unique_ptr<gloo::transport::UnboundBuffer> p2p; /* send/recv: the transfer issued at post time */

    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    tcomms_status_t status = TCOMMS_IN_PROGRESS;
    std::string message;
};

/* The handle given to the core; freeing it drops one reference, so an operation freed while queued or running
 * still completes on the worker, which holds the other. */
struct WorkHandle {
    std::shared_ptr<Work> work;
};

/* comm.cc */
tcomms_status_t comm_create(const tcomms_backend_comm_args_t *args, void **bcomm);
tcomms_status_t comm_destroy(void *bcomm);
tcomms_status_t comm_hint(void *bcomm, const char *key, char *buf, size_t len);
/* Shut down the sockets of every pair of `c` (tcomms_comm_abort): see comm.cc. */
void shutdown_pairs(Comm &c);

/* coll.cc: issue a send/recv at post time (caller's thread); run any operation to completion (worker thread).
 * Both throw on failure. collective_tag: the next collective's Gloo tag, its shape hash over its sequence number. */
uint32_t collective_tag(Comm &c, const tcomms_coll_args_t &a);
void start_p2p(Comm &c, Work &w);
void run_op(Comm &c, Work &w);

/* worker.cc */
void start_worker(Comm &c);
void stop_worker(Comm &c);
tcomms_status_t post(void *bcomm, const tcomms_coll_args_t *args, void **bwork);
tcomms_status_t work_test(void *bwork);
tcomms_status_t work_wait(void *bwork, uint32_t timeout_ms);
void work_free(void *bwork);
tcomms_status_t comm_abort(void *bcomm);

} // namespace tcg
