/* SPDX-License-Identifier: BSD-3-Clause */
/* The UCX backend's one exported symbol, tcomms_backend_module, and its entry points: query (can UCP start here?),
 * post (pick the algorithm and tag, start the task), and the work handle calls, which progress the worker on the
 * caller's thread. Communicators are in comm.c, the engine in engine.c, message.c and progress.c. */
#include <string.h>

#include "ucx.h"

const tcomms_core_t *tcu_core;

static tcomms_status_t query(const tcomms_core_t *core, char *reason, size_t len)
{
    tcu_core = core;
    tcu_route_ucx_logs(core);
    ucp_config_t *cfg;
    ucp_context_h ctx;
    ucs_status_t st = ucp_config_read(NULL, NULL, &cfg);
    if (st == UCS_OK) {
        ucp_params_t p = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP};
        st = ucp_init(&p, cfg, &ctx);
        ucp_config_release(cfg);
        if (st == UCS_OK)
            ucp_cleanup(ctx);
    }
    if (st != UCS_OK) {
        if (reason && len)
            snprintf(reason, len, "UCX %s cannot initialise: %s (check UCX_TLS and UCX_NET_DEVICES)",
                     tcu_version(), ucs_status_string(st));
        return TCOMMS_ERR_BACKEND_UNAVAILABLE;
    }
    if (reason && len)
        reason[0] = '\0';
    return TCOMMS_SUCCESS;
}

/* The common hints concern GPU streams and kernels, and no ucx.* key is honoured (UCX reads its own UCX_*
 * variables, e.g. UCX_TLS): every key is "not applicable". */
static tcomms_status_t comm_hint(void *bcomm, const char *key, char *buf, size_t len)
{
    (void)buf;
    (void)len;
    const tcu_comm_t *c = bcomm;
    return c->core->error(TCOMMS_ERR_NOT_SUPPORTED, "ucx: hint '%s' is not applicable", key);
}

static int room_in_flight(void *arg)
{
    return ((tcu_comm_t *)arg)->in_flight < TCU_MAX_IN_FLIGHT;
}

/* A collective's algorithm: the size and the forced choices are fixed at creation, so no lock is needed. */
static const tcu_algo_t *choose(const tcu_comm_t *c, const tcomms_coll_args_t *a)
{
    return c->size == 1 ? &tcu_algo_alone : tcu_select(c, a, c->core->dtype_size(a->dtype));
}

/* A blocking call outside a group that is one exchange on 2 ranks runs on the communicator's pair task (pair.c). */
static int pair_call(tcu_comm_t *c, const tcomms_coll_args_t *a)
{
    return (a->flags & TCOMMS_COLL_FLAG_INLINE) && c->size == 2 && tcu_pair_type(a->type) && tcu_pair_fits(c, a);
}

static tcomms_status_t post(void *bcomm, const tcomms_coll_args_t *a, void **bwork)
{
    tcu_comm_t *c = bcomm;
    tcu_ctx_t *x = c->ctx;
    const tcu_algo_t *algo;
    int kind = TCU_KIND_COLL;
    uint32_t seq;
    pthread_mutex_lock(&x->lock);
    /* A rank may run this many collectives ahead of its peers and no more (ucx.h): past that, the post waits for
     * the oldest, whose deadline bounds the wait. */
    if (a->type != TCOMMS_COLL_SEND && a->type != TCOMMS_COLL_RECV && c->in_flight >= TCU_MAX_IN_FLIGHT)
        tcu_drive(x, room_in_flight, c, UINT64_MAX);
    const char *why;
    if (tcu_comm_failed(c, &why) != TCOMMS_SUCCESS) { /* broke while this post waited for room */
        tcomms_status_t st = c->core->error(TCOMMS_ERR_ABORTED, "ucx %s on '%s': the communicator is unusable "
                                            "after an earlier error: %s", tcu_coll_name(a->type), c->name, why);
        pthread_mutex_unlock(&x->lock);
        return st;
    }
    tcu_task_t *t = NULL;
    /* A blocking call outside a group waits right here, under the lock already held, and a success hands back no
     * handle (TCOMMS_COLL_FLAG_INLINE): no second and third lock round trip for the wait and the free. Failures,
     * and an operation still running after its timeout, go back as a handle, whose wait reports them as before. */
    uint64_t timeout_ns = (uint64_t)a->timeout_ms * 1000000ull;
    if (a->type == TCOMMS_COLL_SEND || a->type == TCOMMS_COLL_RECV) {
        algo = &tcu_algo_p2p;
        kind = TCU_KIND_P2P;
        seq = a->type == TCOMMS_COLL_SEND ? c->send_seq[a->peer]++ : c->recv_seq[a->peer]++;
    } else {
        seq = c->coll_seq++;
        if (pair_call(c, a) && tcu_pair_run(c, a, seq, timeout_ns, &t)) {
            pthread_mutex_unlock(&x->lock);
            *bwork = t;
            return TCOMMS_SUCCESS;
        }
        algo = choose(c, a);
    }
    tcomms_status_t st = tcu_task_start(c, a, algo, kind, seq, &t);
    if (st == TCOMMS_SUCCESS && (a->flags & TCOMMS_COLL_FLAG_INLINE) && tcu_drive(x, tcu_task_final, t, timeout_ns) &&
        t->status == TCOMMS_SUCCESS) {
        tcu_task_release(t);
        t = NULL;
    }
    pthread_mutex_unlock(&x->lock);
    if (st == TCOMMS_SUCCESS)
        *bwork = t;
    return st;
}

static tcomms_status_t work_test(void *bwork)
{
    tcu_task_t *t = bwork;
    tcu_ctx_t *x = t->comm->ctx;
    pthread_mutex_lock(&x->lock);
    if (t->status == TCOMMS_IN_PROGRESS) {
        x->wait_epoch++;
        ucp_worker_progress(x->worker);
        if (x->events)
            tcu_sweep(x);
        uint64_t now = tc_now_ns();
        if (now >= x->next_check_ns)
            tcu_check_deadlines(x, now);
    }
    tcomms_status_t st = t->status;
    pthread_mutex_unlock(&x->lock);
    return st == TCOMMS_IN_PROGRESS ? st : tcu_task_report(t);
}

static tcomms_status_t work_wait(void *bwork, uint32_t timeout_ms)
{
    tcu_task_t *t = bwork;
    tcu_ctx_t *x = t->comm->ctx;
    pthread_mutex_lock(&x->lock);
    int done = tcu_drive(x, tcu_task_final, t, (uint64_t)timeout_ms * 1000000ull);
    pthread_mutex_unlock(&x->lock);
    if (!done)
        return t->core->error(TCOMMS_ERR_TIMEOUT, "ucx %s: still running after a %u ms wait (the operation's "
                              "timeout is %u ms)", tcu_coll_name(t->a.type), timeout_ms, t->a.timeout_ms);
    return tcu_task_report(t);
}

static void work_free(void *bwork)
{
    tcu_task_t *t = bwork;
    tcu_ctx_t *x = t->comm->ctx;
    pthread_mutex_lock(&x->lock);
    tcu_task_release(t);
    pthread_mutex_unlock(&x->lock);
}

/* Fail the communicator's running tasks here and now: tcu_task_fail cancels their requests, so no completion writes
 * into the caller's buffers afterwards. A caller waiting in tcu_drive drops the lock between polls and while it
 * sleeps on the worker's event fd, which ucp_worker_signal (callable from any thread) then wakes. Other
 * communicators, split children included, share the worker but not the tasks. */
static tcomms_status_t comm_abort(void *bcomm)
{
    tcu_comm_t *c = bcomm;
    tcu_ctx_t *x = c->ctx;
    pthread_mutex_lock(&x->lock); /* the core recorded the abort before calling this */
    for (tcu_task_t *t = c->live.cnext, *next; t != &c->live; t = next) {
        next = t->cnext; /* failing a task the caller no longer holds recycles it */
        if (t->status == TCOMMS_IN_PROGRESS)
            tcu_task_fail(t, TCOMMS_ERR_ABORTED, "aborted by tcomms_comm_abort");
    }
    ucs_status_t st = ucp_worker_signal(x->worker);
    pthread_mutex_unlock(&x->lock);
    if (st != UCS_OK) /* the waiter still sees it at its next poll, within TCU_CHECK_EVERY_NS */
        c->core->log(TCOMMS_LOG_DEBUG, "ucx", "'%s': ucp_worker_signal: %s", c->name, ucs_status_string(st));
    return TCOMMS_SUCCESS;
}

/* For the core's trace line, what post() will choose. Point-to-point has nothing to choose. */
static const char *algorithm(void *bcomm, const tcomms_coll_args_t *a)
{
    if (a->type == TCOMMS_COLL_SEND || a->type == TCOMMS_COLL_RECV)
        return NULL;
    return pair_call(bcomm, a) ? tcu_algo_pair.name : choose(bcomm, a)->name;
}

static const char *const honoured_hints[] = {NULL};

__attribute__((visibility("default"))) const tcomms_backend_t tcomms_backend_module = {
    .abi = TCOMMS_ABI_INIT(tcomms_backend_t),
    .name = "ucx",
    .description = "collectives over UCX tagged point-to-point (UCP; shared memory or TCP), CPU buffers",
    .device_types = 1u << TCOMMS_DEVICE_CPU,
    .hints = honoured_hints,
    .query = query,
    .comm_create = tcu_comm_create,
    .comm_destroy = tcu_comm_destroy,
    .comm_hint = comm_hint,
    .post = post,
    .work_test = work_test,
    .work_wait = work_wait,
    .work_free = work_free,
    .priority = 20, /* above gloo (10): faster for every collective and size measured (docs/perf.md) */
    .comm_abort = comm_abort,
    .algorithm = algorithm,
};
