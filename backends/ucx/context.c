/* SPDX-License-Identifier: BSD-3-Clause */
/* The process-wide UCX context: one UCP context and worker shared by every communicator, created with the first and
 * destroyed with the last, plus the endpoint cache (one endpoint per peer worker, keyed by its address) and the
 * settings read from the environment. comm.c takes references; progress.c drives the worker. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <ucs/debug/log_def.h>
#include <unistd.h>

#include "ucx.h"

#define DEFAULT_SPIN_US 10000 /* a waiting caller polls (yielding after 1 ms) this long, then sleeps */
#define DEFAULT_WARMUP 128
#define TEARDOWN_NS (2000ull * 1000 * 1000) /* flushing and closing endpoints at the end may take this long */

static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;
static tcu_ctx_t *the_ctx;

void tcu_create_lock(void)
{
    pthread_mutex_lock(&create_lock);
}

void tcu_create_unlock(void)
{
    pthread_mutex_unlock(&create_lock);
}

const char *tcu_version(void)
{
    return ucp_get_version_string();
}

/* UCX logs to stdout unless told otherwise (UCX_LOG_FILE), and the library must never write there: route every
 * line UCX decides to print (its own UCX_LOG_LEVEL filter still applies) to tcomms' logger on stderr, under the
 * component name "ucx". Installed once per process, before the first ucp_init; the module is never unloaded. */
static const tcomms_core_t *log_core;

static ucs_log_func_rc_t route_ucx_log(const char *file, unsigned line, const char *function, ucs_log_level_t level,
                                       const ucs_log_component_config_t *comp, const char *fmt, va_list ap)
{
    (void)file;
    (void)line;
    (void)comp;
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    tcomms_log_level_t to = level <= UCS_LOG_LEVEL_ERROR  ? TCOMMS_LOG_ERROR
                            : level == UCS_LOG_LEVEL_WARN ? TCOMMS_LOG_WARN
                            : level <= UCS_LOG_LEVEL_INFO ? TCOMMS_LOG_INFO
                            : level == UCS_LOG_LEVEL_DEBUG ? TCOMMS_LOG_DEBUG
                                                           : TCOMMS_LOG_TRACE;
    /* Messages nobody received, found when the worker goes: what a failed collective left (ranks that disagreed,
     * a peer that went on). They stay unreceived on purpose, since taking one would complete its sender's
     * synchronous send (shape.c), and the failure was reported already. */
    if (to == TCOMMS_LOG_WARN && strcmp(function, "ucp_tag_match_cleanup") == 0)
        to = TCOMMS_LOG_DEBUG;
    log_core->log(to, "ucx", "%s: %s", function, msg);
    return UCS_LOG_FUNC_RC_STOP;
}

void tcu_route_ucx_logs(const tcomms_core_t *core)
{
    if (log_core != NULL)
        return;
    log_core = core;
    ucs_log_push_handler(route_ucx_log);
}

static tcomms_status_t read_env(tcu_ctx_t *c)
{
    const char *mode = getenv("TCOMMS_UCX_ERR_MODE");
    if (mode && *mode && strcmp(mode, "none") != 0 && strcmp(mode, "peer") != 0)
        return c->core->error(TCOMMS_ERR_BAD_ENV, "TCOMMS_UCX_ERR_MODE='%s': expected 'none' or 'peer'", mode);
    c->peer_errors = mode && strcmp(mode, "peer") == 0;
    long spin, rounds;
    tcomms_status_t st = c->core->env_int("TCOMMS_UCX_SPIN_US", 0, 10 * 1000 * 1000, DEFAULT_SPIN_US, &spin);
    if (st == TCOMMS_SUCCESS)
        st = c->core->env_int("TCOMMS_UCX_WARMUP", 0, 100000, DEFAULT_WARMUP, &rounds);
    if (st == TCOMMS_SUCCESS)
        st = c->core->env_bool("TCOMMS_UCX_PROGRESS_THREAD", 1, &c->use_thread);
    if (st != TCOMMS_SUCCESS)
        return st;
    c->spin_ns = (uint64_t)spin * 1000;
    c->warmup_rounds = (int)rounds;
    return TCOMMS_SUCCESS;
}

static tcomms_status_t ucx_fail(tcu_ctx_t *c, const char *call, ucs_status_t st)
{
    return c->core->error(TCOMMS_ERR_SYSTEM, "ucx: %s failed: %s (UCX %s)", call, ucs_status_string(st),
                          tcu_version());
}

/* Whether UCX_TLS (NULL: unset) lets UCX use a shared-memory FIFO transport, the only ones that read the
 * MM_FIFO_* settings (posix and sysv; xpmem is built on them): unset, or a list naming one of them or an alias that
 * covers them (all, sm, shm, mm), or a "^" exclusion list that leaves posix or sysv. UCX warns about a setting no
 * transport in use reads ("invalid configuration: MM_FIFO_ELEM_SIZE=4096" under UCX_TLS=tcp,self). */
static int tls_has_mm(const char *tls)
{
    static const char *const mm[] = {"posix", "sysv", "xpmem"}, *const aliases[] = {"all", "sm", "shm", "mm"};
    if (tls == NULL)
        return 1;
    int negated = tls[0] == '^', named[3] = {0, 0, 0}, alias = 0;
    for (const char *p = tls + negated; *p != '\0';) {
        size_t n = strcspn(p, ","), len = strcspn(p, ",:"); /* "ud:aux" names ud */
        for (int i = 0; i < 3; i++)
            named[i] |= len == strlen(mm[i]) && strncmp(p, mm[i], len) == 0;
        for (int i = 0; i < 4; i++)
            alias |= len == strlen(aliases[i]) && strncmp(p, aliases[i], len) == 0;
        p += n + (p[n] == ',');
    }
    if (negated)
        return !alias && !(named[0] && named[1]);
    return alias || named[0] || named[1] || named[2];
}

/* UCX settings tcomms picks differently from UCX's defaults, each applied only when the user set none of the
 * variables that name it (UCX_<name>, or a transport's own spelling) and a transport that reads it can be in use.
 * Measured on 2 ranks (docs/ucx.md). */
static const struct {
    const char *name;  /* for ucp_config_modify: the variable without UCX_ */
    const char *value;
    const char *env[3]; /* variables that, when set, leave the choice to the user */
    int mm_only;        /* read by the shared-memory FIFO transports alone */
} tuned[] = {
    /* Shared-memory FIFO elements of one page, which hold a message of up to ~4000 bytes inline (am_short: one
     * copy, no bounce segment); UCX's 128 bytes send everything above ~100 B through a separate segment, which
     * made small all_reduces slower. One page, not more, so that the transport warm-up, which writes every element,
     * faults in all of the FIFO (larger elements left the first operations to fault pages in). 64 elements:
     * 256 KiB of shared memory per worker. Figures: docs/perf.md, "Measurements behind the code". */
    {"MM_FIFO_ELEM_SIZE", "4096", {"UCX_MM_FIFO_ELEM_SIZE", "UCX_SYSV_FIFO_ELEM_SIZE", "UCX_POSIX_FIFO_ELEM_SIZE"}, 1},
    /* Sends posted with UCP_OP_ATTR_FLAG_FAST_CMPL go eager (copied through shared memory by both sides) below
     * 1 MiB, rendezvous (one process_vm_readv by the receiver, cma) from 1 MiB; the others follow UCX_RNDV_THRESH,
     * left to UCX (auto, computed from the transports' figures). message.c (tcu_send) picks per message, which a single
     * threshold cannot: the copying operations want one copy from 32 KiB, the reducing ones eager up to 1 MiB on
     * an oversubscribed host, where a rendezvous handshake waits for the peer to be scheduled. Setting
     * UCX_RNDV_THRESH makes one threshold for all. Figures: docs/perf.md, issue 29's copy work. */
    {"RNDV_SEND_NBR_THRESH", "1M", {"UCX_RNDV_SEND_NBR_THRESH", "UCX_RNDV_THRESH", NULL}, 0},
};

static void tune_config(tcu_ctx_t *c, ucp_config_t *cfg)
{
    const char *tls = getenv("UCX_TLS");
    for (size_t i = 0; i < sizeof(tuned) / sizeof(tuned[0]); i++) {
        int user = 0;
        for (int k = 0; k < 3 && tuned[i].env[k]; k++)
            user |= getenv(tuned[i].env[k]) != NULL;
        if (user)
            continue;
        if (tuned[i].mm_only && !tls_has_mm(tls)) {
            c->core->log(TCOMMS_LOG_DEBUG, "ucx", "UCX_%s left to UCX: UCX_TLS='%s' leaves no shared-memory FIFO "
                         "transport", tuned[i].name, tls);
            continue;
        }
        ucs_status_t st = ucp_config_modify(cfg, tuned[i].name, tuned[i].value);
        if (st != UCS_OK)
            c->core->log(TCOMMS_LOG_DEBUG, "ucx", "cannot set UCX_%s=%s: %s", tuned[i].name, tuned[i].value,
                         ucs_status_string(st));
        else
            c->core->log(TCOMMS_LOG_DEBUG, "ucx", "UCX_%s=%s", tuned[i].name, tuned[i].value);
    }
}

/* SERIALIZED: our lock already serialises every worker call, so UCX's own locking (MULTI) would be pure cost. */
static tcomms_status_t open_worker(tcu_ctx_t *c)
{
    ucp_config_t *cfg;
    ucs_status_t st = ucp_config_read(NULL, NULL, &cfg);
    if (st != UCS_OK)
        return ucx_fail(c, "ucp_config_read", st);
    tune_config(c, cfg);
    ucp_params_t p = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP};
    st = ucp_init(&p, cfg, &c->ucp);
    ucp_config_release(cfg);
    if (st != UCS_OK)
        return ucx_fail(c, "ucp_init", st);
    tcu_task_lend_requests(c->ucp);
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SERIALIZED};
    if ((st = ucp_worker_create(c->ucp, &wp, &c->worker)) != UCS_OK)
        return ucx_fail(c, "ucp_worker_create", st);
    if ((st = ucp_worker_get_efd(c->worker, &c->efd)) != UCS_OK)
        return ucx_fail(c, "ucp_worker_get_efd", st);
    if ((st = ucp_worker_get_address(c->worker, &c->addr, &c->addr_len)) != UCS_OK)
        return ucx_fail(c, "ucp_worker_get_address", st);
    return TCOMMS_SUCCESS;
}

/* Progress until `req` (from a *_nbx call) completes or `until`; then release it. */
static void finish_request(tcu_ctx_t *c, void *req, uint64_t until)
{
    if (req == NULL || UCS_PTR_IS_ERR(req))
        return;
    while (ucp_request_check_status(req) == UCS_INPROGRESS && tc_now_ns() < until)
        ucp_worker_progress(c->worker);
    ucp_request_free(req);
}

struct closing {
    tcu_ctx_t *c;
    uint64_t until;
};

static void close_endpoint(tc_hlink_t *link, void *arg)
{
    const struct closing *x = arg;
    tcu_ep_t *e = (tcu_ep_t *)link;
    ucp_request_param_t cp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                              .flags = x->c->peer_errors ? UCP_EP_CLOSE_FLAG_FORCE : 0};
    finish_request(x->c, ucp_ep_close_nbx(e->ep, &cp), x->until);
    free(e);
}

/* Flush what is still in flight (a last eager message over TCP may sit in a send buffer), then close every
 * endpoint: forced where peers use error handling (no reply needed), flushed otherwise, all within TEARDOWN_NS. */
static void close_endpoints(tcu_ctx_t *c)
{
    uint64_t until = tc_now_ns() + TEARDOWN_NS;
    ucp_request_param_t fp = {.op_attr_mask = 0};
    finish_request(c, ucp_worker_flush_nbx(c->worker, &fp), until);
    tc_htable_free(&c->eps, close_endpoint, &(struct closing){c, until});
}

static void destroy(tcu_ctx_t *c)
{
    tcu_thread_stop(c);
    if (c->worker) {
        close_endpoints(c);
        if (c->addr)
            ucp_worker_release_address(c->worker, c->addr);
        ucp_worker_destroy(c->worker);
    }
    tcu_task_free_stranded(c);
    if (c->ucp)
        ucp_cleanup(c->ucp);
    if (c->wake_fd >= 0)
        close(c->wake_fd);
    tc_htable_free(&c->eps, NULL, NULL); /* emptied by close_endpoints, or never filled: no worker, no endpoint */
    pthread_mutex_destroy(&c->lock);
    free(c);
}

tcomms_status_t tcu_ctx_acquire(const tcomms_core_t *core, tcu_ctx_t **out)
{
    if (the_ctx) {
        the_ctx->refs++;
        *out = the_ctx;
        return TCOMMS_SUCCESS;
    }
    tcu_ctx_t *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return core->error(TCOMMS_ERR_NO_MEMORY, "ucx: out of memory for the context");
    c->core = core;
    c->wake_fd = -1;
    tcu_route_ucx_logs(core);
    c->active.anext = c->active.aprev = &c->active;
    c->ready.rnext = c->ready.rprev = &c->ready;
    c->next_check_ns = UINT64_MAX;
    c->yield_after_ns = TCU_YIELD_AFTER_NS; /* until a communicator says how crowded the host is (progress.c) */
    pthread_mutex_init(&c->lock, NULL);
    tcomms_status_t st = read_env(c);
    if (st == TCOMMS_SUCCESS)
        st = open_worker(c);
    if (st == TCOMMS_SUCCESS) {
        int no_cache = tc_htable_init(&c->eps, 64);
        c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (no_cache)
            st = core->error(TCOMMS_ERR_NO_MEMORY, "ucx: out of memory for the endpoint cache");
        else if (c->wake_fd < 0)
            st = core->error(TCOMMS_ERR_SYSTEM, "ucx: eventfd: %s", strerror(errno));
    }
    if (st == TCOMMS_SUCCESS)
        st = tcu_thread_start(c);
    if (st != TCOMMS_SUCCESS) {
        destroy(c);
        return st;
    }
    core->log(TCOMMS_LOG_DEBUG, "ucx", "context up (UCX %s, error mode %s, spin %llu us)", tcu_version(),
              c->peer_errors ? "peer" : "none", (unsigned long long)(c->spin_ns / 1000));
    c->refs = 1;
    the_ctx = c;
    *out = c;
    return TCOMMS_SUCCESS;
}

int tcu_ctx_release(tcu_ctx_t *ctx)
{
    if (--ctx->refs > 0)
        return 0;
    the_ctx = NULL;
    destroy(ctx);
    return 1;
}

/* ---- endpoint cache ------------------------------------------------------------------------------------------ */

/* Runs inside ucp_worker_progress (lock held): record the failure; the next sweep breaks the communicators. */
static void on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    (void)ep;
    tcu_ep_t *e = arg;
    e->failed = (int)status;
    if (the_ctx) {
        the_ctx->ep_failed = 1;
        the_ctx->events = 1;
    }
}

tcu_ep_t *tcu_ep_get(tcu_ctx_t *c, const void *addr, size_t len)
{
    uint64_t h = tc_hash_bytes(addr, len);
    for (tc_hlink_t *l = *tc_htable_chain(&c->eps, h); l; l = l->next) {
        tcu_ep_t *e = (tcu_ep_t *)l;
        if (l->hash == h && e->addr_len == len && memcmp(e->addr, addr, len) == 0)
            return e;
    }
    tcu_ep_t *e = calloc(1, sizeof(*e) + len);
    if (e == NULL) {
        c->core->error(TCOMMS_ERR_NO_MEMORY, "ucx: out of memory for an endpoint");
        return NULL;
    }
    memcpy(e->addr, addr, len);
    e->addr_len = len;
    e->link.hash = h;
    ucp_ep_params_t p = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
                         .address = (const ucp_address_t *)e->addr,
                         .err_mode = c->peer_errors ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE};
    if (c->peer_errors) {
        p.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
        p.err_handler.cb = on_ep_error;
        p.err_handler.arg = e;
    }
    ucs_status_t st = ucp_ep_create(c->worker, &p, &e->ep);
    if (st != UCS_OK) {
        free(e);
        ucx_fail(c, "ucp_ep_create", st);
        return NULL;
    }
    tc_htable_insert(&c->eps, &e->link);
    return e;
}
