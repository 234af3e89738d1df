/* SPDX-License-Identifier: BSD-3-Clause */
/* Root communicators: bootstrap from parameters or the environment, pick a backend per device type, meet the other
 * ranks through the rendezvous store, create every backend eagerly; plus destroy and the queries. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h" /* lib/util/clock.h */
#include "comm.h"
#include "flight.h"
#include "env.h"
#include "error.h"
#include "hints.h"
#include "loader.h"
#include "log.h"
#include "topo.h"

#define DEFAULT_TIMEOUT_MS 300000u

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* Root communicators created so far per name in this process: all ranks create roots in the same order, so the
 * count makes each incarnation's store keys distinct ("world#2") without any communication. */
static struct incarnation {
    char name[128];
    unsigned count;
} incarnations[64];

static unsigned next_incarnation(const char *name)
{
    pthread_mutex_lock(&lock);
    size_t i = 0;
    while (i < 64 && incarnations[i].name[0] != '\0' && strcmp(incarnations[i].name, name) != 0)
        i++;
    unsigned n = 0;
    if (i < 64) {
        snprintf(incarnations[i].name, sizeof(incarnations[i].name), "%s", name);
        n = ++incarnations[i].count;
    }
    pthread_mutex_unlock(&lock);
    return n;
}

void tc_store_ref_acquire(tc_store_ref_t *ref)
{
    pthread_mutex_lock(&lock);
    ref->refs++;
    pthread_mutex_unlock(&lock);
}

void tc_store_ref_release(tc_store_ref_t *ref)
{
    if (ref == NULL)
        return;
    pthread_mutex_lock(&lock);
    int last = --ref->refs == 0;
    pthread_mutex_unlock(&lock);
    if (!last)
        return;
    tc_flight_listen_stop(ref->flight, ref->store);
    tc_store_free(ref->store);
    /* Other ranks may still use the store (splits of children without rank 0): serve them until they disconnect. */
    tc_store_server_linger(ref->server, ref->linger_ms);
    free(ref);
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

#define SERVER_ID_KEY "tcomms/server"

/* Connect to the built-in store and make sure the server is this incarnation's: a rank that finished the previous
 * root communicator faster than rank 0 could otherwise reach rank 0's old server, still listening on the port.
 * That old server may also stop while this connection waits in its backlog, which resets it: retried too. */
static tcomms_status_t connect_store(tcomms_comm_t *comm, int port, const char *id, tc_store_ref_t *ref)
{
    const char *token = getenv("TCOMMS_STORE_TOKEN");
    uint64_t deadline = tc_now_ms() + comm->timeout_ms;
    for (unsigned backoff = 10;; backoff = backoff < 1000 ? backoff * 2 : 1000) {
        uint64_t now = tc_now_ms();
        if (now >= deadline)
            return tc_error(TCOMMS_ERR_TIMEOUT, "store at %s:%d: no server for communicator '%s' within %u ms",
                            comm->master_addr, port, id, comm->timeout_ms);
        tcomms_status_t st =
            tc_store_connect(comm->master_addr, port, token, (uint32_t)(deadline - now), &ref->store);
        if (st == TCOMMS_ERR_REMOTE) {
            tc_log(TCOMMS_LOG_DEBUG, "store", "%s:%d: %s; retrying", comm->master_addr, port, tcomms_last_error());
            sleep_ms(backoff);
            continue;
        }
        if (st != TCOMMS_SUCCESS)
            return st;
        if (ref->server != NULL)
            return tc_store_set(ref->store, SERVER_ID_KEY, id, strlen(id));
        void *seen = NULL;
        size_t len = 0;
        st = tc_store_get(ref->store, SERVER_ID_KEY, &seen, &len, 1000);
        int match = st == TCOMMS_SUCCESS && len == strlen(id) && memcmp(seen, id, len) == 0;
        free(seen);
        if (match)
            return TCOMMS_SUCCESS;
        tc_log(TCOMMS_LOG_DEBUG, "store", "%s:%d serves another communicator; retrying", comm->master_addr, port);
        tc_store_free(ref->store);
        ref->store = NULL;
        sleep_ms(backoff);
    }
}

static tcomms_status_t open_store(tcomms_comm_t *comm, const tcomms_comm_params_t *p, int port, const char *id)
{
    tc_store_ref_t *ref = calloc(1, sizeof(*ref));
    if (ref == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "out of memory");
    ref->refs = 1;
    ref->linger_ms = comm->timeout_ms;
    comm->store = ref;
    if (p != NULL && (p->field_mask & TCOMMS_COMM_PARAM_STORE))
        return tc_store_from_ops(p->store_ops, p->store_ctx, &ref->store);
    const char *token = getenv("TCOMMS_STORE_TOKEN");
    if (comm->size == 1 && comm->master_addr[0] == '\0') {
        /* A single process needs no master: serve a private store on loopback. */
        snprintf(comm->master_addr, sizeof(comm->master_addr), "127.0.0.1");
        tcomms_status_t st = tc_store_server_start("127.0.0.1", 0, token, &ref->server);
        if (st != TCOMMS_SUCCESS)
            return st;
        port = tc_store_server_port(ref->server);
    } else if (comm->rank == 0) {
        tcomms_status_t st = tc_store_server_start(getenv("TCOMMS_STORE_BIND_ADDR"), port, token, &ref->server);
        if (st != TCOMMS_SUCCESS)
            return tc_error_prefix(st, "rank 0 serving the rendezvous store on port %d: ", port);
    }
    return connect_store(comm, port, id, ref);
}

/* Which backend serves each device type: the selection names it, or, for the bound device, the module that ranks
 * first by the priorities the modules declare (lib/loader.c). */
static tcomms_status_t select_backends(tcomms_comm_t *comm, const char *spec)
{
    tc_selection_t sel;
    tcomms_status_t st = tc_selection_parse(spec, &sel);
    if (st != TCOMMS_SUCCESS)
        return st;
    for (int t = 0; t < TCOMMS_DEVICE_TYPE_COUNT; t++) {
        if (!sel.explicit_[t])
            continue;
        st = tc_backend_load(sel.names[t], &comm->slot[t].be);
        if (st != TCOMMS_SUCCESS)
            return tc_error_prefix(st, "backend selection '%s': ", spec);
    }
    int bound = comm->device.type;
    if (comm->slot[bound].be != NULL)
        return TCOMMS_SUCCESS;
    if (sel.explicit_[TCOMMS_DEVICE_CPU] || sel.explicit_[TCOMMS_DEVICE_CUDA])
        return tc_error(TCOMMS_ERR_NO_BACKEND_FOR_DEVICE,
                            "backend selection '%s' names no backend for the bound device '%s'", spec,
                            tcomms_device_type_name(comm->device.type));
    return tc_backend_default(comm->device.type, &comm->slot[bound].be);
}

/* No lazy creation, ever: a device backend the communicator is not bound to stays loaded but uncreated, so every
 * rank agrees on what exists without talking. */
static void mark_bound(tcomms_comm_t *comm)
{
    for (int t = 0; t < TCOMMS_DEVICE_TYPE_COUNT; t++)
        comm->slot[t].bound = t == (int)comm->device.type || t == TCOMMS_DEVICE_CPU;
}

void tc_comm_cleanup_keys(tcomms_comm_t *comm, const char *prefix, int members)
{
    char key[TC_KEY_MAX];
    int64_t n = 0;
    snprintf(key, sizeof(key), "%.*sdone", TC_SUBPREFIX_MAX, prefix);
    if (tc_store_add(comm->store->store, key, 1, &n) == TCOMMS_SUCCESS && n == members &&
        tc_store_del_prefix(comm->store->store, prefix) == TCOMMS_ERR_NOT_SUPPORTED)
        tc_store_del(comm->store->store, key); /* a user store: at least drop the counter */
    tc_error_clear();
}

void tc_comm_backend_args(const tcomms_comm_t *comm, int t, const char *prefix, const tcomms_comm_t *parent,
                          const int *parent_ranks, tcomms_backend_comm_args_t *args)
{
    *args = (tcomms_backend_comm_args_t){
        .core = &tc_core,
        .name = comm->name,
        .prefix = prefix,
        .store = comm->store->store,
        .rank = comm->rank,
        .size = comm->size,
        .local_rank = comm->local_rank,
        .local_size = comm->local_size,
        .hosts = comm->hosts,
        .device = comm->device,
        .master_addr = comm->master_addr[0] ? comm->master_addr : NULL,
        .timeout_ms = comm->timeout_ms,
        .hints = comm->hints,
        .parent = parent ? parent->slot[t].bcomm : NULL,
        .parent_ranks = parent_ranks,
        .comm_prefix = comm->prefix,
        .state = comm->state,
    };
    if (args->device.type != (tcomms_device_type_t)t)
        args->device = (tcomms_device_t){(tcomms_device_type_t)t, 0}; /* a CPU slot on a GPU-bound communicator */
}

/* Slot `t`'s backend communicator of `comm`, as `how` says. */
static tcomms_status_t create_slot(tcomms_comm_t *comm, int t, const char *prefix, const tcomms_comm_t *parent,
                                   const int *parent_ranks, tc_derive_t how)
{
    const tcomms_backend_t *be = comm->slot[t].be;
    tcomms_backend_comm_args_t args;
    tc_comm_backend_args(comm, t, prefix, parent, parent_ranks, &args);
    if (how == TC_DERIVE_SHRINK && be->comm_shrink != NULL)
        return be->comm_shrink(parent->slot[t].bcomm, &args, &comm->slot[t].bcomm);
    if (how != TC_DERIVE_SPLIT) {
        args.parent = NULL;
        args.parent_ranks = NULL;
    }
    return be->comm_create(&args, &comm->slot[t].bcomm);
}

tcomms_status_t tc_comm_create_backends(tcomms_comm_t *comm, const tcomms_comm_t *parent, const int *parent_ranks,
                                        tc_derive_t how)
{
    tcomms_status_t made = tc_comm_state_new(comm->name, comm->rank, comm->size, &comm->state);
    if (made != TCOMMS_SUCCESS)
        return made;
    for (int t = 0; t < TCOMMS_DEVICE_TYPE_COUNT; t++) {
        if (comm->slot[t].be == NULL || !comm->slot[t].bound)
            continue;
        char prefix[TC_KEY_MAX];
        snprintf(prefix, sizeof(prefix), "%s/create/%.32s", comm->prefix, comm->slot[t].be->name);
        tc_log_set_comm(comm->name); /* what the backend logs while it creates names this communicator */
        tcomms_status_t st = create_slot(comm, t, prefix, parent, parent_ranks, how);
        tc_log_set_comm(NULL);
        if (st != TCOMMS_SUCCESS) {
            tc_error_prefix(st, "creating communicator '%s' on backend '%s': ", comm->name, comm->slot[t].be->name);
            for (int u = 0; u < t; u++)
                if (comm->slot[u].bcomm != NULL)
                    comm->slot[u].be->comm_destroy(comm->slot[u].bcomm);
            tc_comm_state_unref(comm->state);
            comm->state = NULL;
            return st;
        }
    }
    for (int t = 0; t < TCOMMS_DEVICE_TYPE_COUNT; t++)
        if (comm->slot[t].bcomm != NULL)
            tc_comm_state_own(comm->state, t, comm->slot[t].be, comm->slot[t].bcomm);
    char create[TC_KEY_MAX];
    snprintf(create, sizeof(create), "%s/create/", comm->prefix);
    tc_comm_cleanup_keys(comm, create, comm->size);
    tc_flight_attach(comm, parent, parent_ranks);
    comm->magic = tc_handle_magic[TC_HANDLE_COMM];
    tc_log(TCOMMS_LOG_INFO, "core", "communicator '%s' ready: rank %d of %d", comm->name, comm->rank, comm->size);
    return TCOMMS_SUCCESS;
}

/* Fill identity, timeout and hints from `p` and the environment; *claim is what they say of the local rank and
 * size, for topo.c's cross-check. */
static tcomms_status_t read_params(tcomms_comm_t *comm, const tcomms_comm_params_t *p, int *port,
                                   tc_topo_claim_t *claim)
{
    uint64_t mask = p ? p->field_mask : 0;
    tc_bootstrap_t bs;
    tcomms_status_t st = TCOMMS_SUCCESS;
    if (mask & TCOMMS_COMM_PARAM_RANK) {
        if (p->size < 1 || p->rank < 0 || p->rank >= p->size || p->local_rank < -1)
            return tc_error(TCOMMS_ERR_INVALID_ARG, "params: rank %d / size %d / local_rank %d are inconsistent",
                            p->rank, p->size, p->local_rank);
        comm->rank = p->rank;
        comm->size = p->size;
        *claim = (tc_topo_claim_t){p->local_rank, -1, "params.local_rank"};
        if (!(mask & TCOMMS_COMM_PARAM_MASTER) && (st = tc_env_bootstrap(&bs)) == TCOMMS_SUCCESS) {
            snprintf(comm->master_addr, sizeof(comm->master_addr), "%s", bs.master_addr);
            *port = bs.master_port;
        }
    } else if ((st = tc_env_bootstrap(&bs)) == TCOMMS_SUCCESS) {
        comm->rank = bs.rank;
        comm->size = bs.size;
        *claim = (tc_topo_claim_t){bs.local_rank, bs.local_size, bs.local_vars};
        snprintf(comm->master_addr, sizeof(comm->master_addr), "%s", bs.master_addr);
        *port = bs.master_port;
    }
    if (st != TCOMMS_SUCCESS)
        return st;
    /* The rank is known from here on: log lines carry it, and TCOMMS_LOG_FILE's %r can be expanded. */
    tc_log_set_rank(comm->rank);
    if ((st = tc_log_env_check()) != TCOMMS_SUCCESS)
        return st;
    if (mask & TCOMMS_COMM_PARAM_MASTER) {
        if (p->master_addr == NULL || *p->master_addr == '\0' || p->master_port < 1 || p->master_port > 65535)
            return tc_error(TCOMMS_ERR_INVALID_ARG, "params: master_addr '%s' / master_port %d are not valid",
                            p->master_addr ? p->master_addr : "(null)", p->master_port);
        snprintf(comm->master_addr, sizeof(comm->master_addr), "%s", p->master_addr);
        *port = p->master_port;
    }
    if (comm->size > 1 && !(mask & TCOMMS_COMM_PARAM_STORE) && (comm->master_addr[0] == '\0' || *port == 0))
        return tc_error(TCOMMS_ERR_BAD_ENV, "%d ranks need a rendezvous address: set TCOMMS_MASTER_ADDR and "
                        "TCOMMS_MASTER_PORT (or MASTER_ADDR and MASTER_PORT)%s", comm->size,
                        comm->master_addr[0] == '\0' ? " (the address is missing)" : " (the port is missing)");
    long timeout = DEFAULT_TIMEOUT_MS;
    if (mask & TCOMMS_COMM_PARAM_TIMEOUT) {
        if (p->timeout_ms == 0)
            return tc_error(TCOMMS_ERR_INVALID_ARG, "params: timeout_ms must be > 0");
        timeout = p->timeout_ms;
    } else if ((st = tc_env_int("TCOMMS_TIMEOUT_MS", 1, UINT32_MAX, DEFAULT_TIMEOUT_MS, &timeout)) != 0)
        return st;
    comm->timeout_ms = (uint32_t)timeout;
    if ((st = tc_env_bool("TCOMMS_CHECK_CALLS", 0, &comm->check_calls)) != TCOMMS_SUCCESS)
        return st;
    if ((st = tcomms_hints_create(&comm->hints)) != TCOMMS_SUCCESS)
        return st;
    const char *env_hints = getenv("TCOMMS_HINTS");
    if (env_hints != NULL && (st = tcomms_hints_parse(comm->hints, env_hints)) != TCOMMS_SUCCESS)
        return tc_error_prefix(TCOMMS_ERR_BAD_ENV, "environment variable TCOMMS_HINTS: ");
    if ((mask & TCOMMS_COMM_PARAM_HINTS) && (st = tc_hints_merge(comm->hints, p->hints)) != TCOMMS_SUCCESS)
        return st;
    return tc_hints_check(comm->hints);
}

static tcomms_status_t read_device(tcomms_comm_t *comm, const tcomms_comm_params_t *p)
{
    comm->device = (tcomms_device_t){TCOMMS_DEVICE_CPU, 0};
    if (p == NULL || !(p->field_mask & TCOMMS_COMM_PARAM_DEVICE))
        return TCOMMS_SUCCESS;
    if ((unsigned)p->device.type >= TCOMMS_DEVICE_TYPE_COUNT)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "params: device type %d is not a tcomms_device_type_t",
                        (int)p->device.type);
    if (p->device.type == TCOMMS_DEVICE_CPU && p->device.index != 0)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "params: cpu device index must be 0, not %d", p->device.index);
    if (p->device.index < -1)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "params: device index %d must be >= -1", p->device.index);
    comm->device = p->device; /* index -1 becomes the local rank once the rendezvous found it */
    return TCOMMS_SUCCESS;
}

/* What a communicator owns besides its backends; the struct itself is freed or retired by the caller. */
static void comm_release(tcomms_comm_t *comm)
{
    tc_store_ref_release(comm->store);
    tcomms_hints_free(comm->hints);
    free(comm->hosts);
    comm->hosts = NULL;
}

#define KNOWN_PARAMS                                                                                              \
    (TCOMMS_COMM_PARAM_BACKEND | TCOMMS_COMM_PARAM_DEVICE | TCOMMS_COMM_PARAM_NAME | TCOMMS_COMM_PARAM_RANK |     \
     TCOMMS_COMM_PARAM_MASTER | TCOMMS_COMM_PARAM_TIMEOUT | TCOMMS_COMM_PARAM_HINTS | TCOMMS_COMM_PARAM_STORE)

/* What can be checked in `params` alone, before anything is read from the environment. */
static tcomms_status_t check_params(const tcomms_comm_params_t *p, const char *name)
{
    const char *who = "tcomms_comm_create";
    tcomms_status_t st = p ? tc_check_mask(p->field_mask, KNOWN_PARAMS, who, "params.field_mask") : TCOMMS_SUCCESS;
    if (st != TCOMMS_SUCCESS)
        return st;
    if (name == NULL || *name == '\0' || strlen(name) >= sizeof(((tcomms_comm_t *)0)->name) - 16 ||
        strchr(name, '/'))
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: name must be 1..100 characters without '/'", who);
    if (p == NULL)
        return TCOMMS_SUCCESS;
    /* An empty selection would silently mean the default: the caller meant something else. */
    if ((p->field_mask & TCOMMS_COMM_PARAM_BACKEND) && (p->backend == NULL || *p->backend == '\0'))
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: params.backend is %s with TCOMMS_COMM_PARAM_BACKEND set: name a "
                        "backend (\"gloo\", \"cpu:gloo,cuda:nccl\"), or clear that bit for the default "
                        "(TCOMMS_BACKEND, else the default by module priority)", who, p->backend ? "empty" : "NULL");
    if ((p->field_mask & TCOMMS_COMM_PARAM_STORE) && p->store_ops == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: params.store_ops is NULL", who);
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcomms_comm_create(const tcomms_comm_params_t *params, tcomms_comm_t **out)
{
    if (out == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_comm_create: out is NULL");
    *out = NULL;
    tcomms_comm_t *comm = calloc(1, sizeof(*comm));
    if (comm == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "tcomms_comm_create: out of memory");
    int port = 0;
    tc_topo_claim_t claim = {-1, -1, "(none)"};
    const char *name = params && (params->field_mask & TCOMMS_COMM_PARAM_NAME) ? params->name : "world";
    const char *spec = params && (params->field_mask & TCOMMS_COMM_PARAM_BACKEND) ? params->backend
                                                                                   : getenv("TCOMMS_BACKEND");
    tcomms_status_t st = check_params(params, name);
    tc_log_set_comm(st == TCOMMS_SUCCESS ? name : NULL);
    if (st == TCOMMS_SUCCESS)
        st = read_params(comm, params, &port, &claim);
    if (st == TCOMMS_SUCCESS)
        st = read_device(comm, params);
    if (st == TCOMMS_SUCCESS) {
        st = select_backends(comm, spec);
        if (st != TCOMMS_SUCCESS && spec != NULL && !(params && (params->field_mask & TCOMMS_COMM_PARAM_BACKEND)))
            tc_error_prefix(st, "TCOMMS_BACKEND: ");
        mark_bound(comm);
    }
    if (st == TCOMMS_SUCCESS) {
        snprintf(comm->name, sizeof(comm->name), "%s", name);
        unsigned n = next_incarnation(name);
        char id[160];
        snprintf(id, sizeof(id), "%s#%u", name, n);
        snprintf(comm->prefix, sizeof(comm->prefix), "tcomms/%s", id);
        st = open_store(comm, params, port, id);
    }
    if (st == TCOMMS_SUCCESS && (st = tc_topo_root(comm, &claim)) == TCOMMS_SUCCESS && comm->device.index == -1)
        comm->device.index = comm->local_rank;
    if (st == TCOMMS_SUCCESS)
        st = tc_comm_create_backends(comm, NULL, NULL, TC_DERIVE_SPLIT);
    /* Only now, once every rank's own connection is in: the listener's must not take a place the server's
     * connection limit keeps for them. */
    if (st == TCOMMS_SUCCESS && comm->size > 1 && !(params && (params->field_mask & TCOMMS_COMM_PARAM_STORE)))
        comm->store->flight = tc_flight_listen(comm->master_addr, port, comm->rank);
    tc_log_set_comm(NULL);
    if (st != TCOMMS_SUCCESS) {
        comm_release(comm);
        free(comm);
        return st;
    }
    *out = comm;
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcomms_comm_destroy(tcomms_comm_t *comm)
{
    if (comm == NULL)
        return TCOMMS_SUCCESS;
    tcomms_status_t st = tc_comm_check(comm, "tcomms_comm_destroy", "comm");
    if (st != TCOMMS_SUCCESS)
        return st;
    tc_comm_state_t *state = comm->state;
    comm->state = NULL;
    tc_flight_detach(comm);
    comm_release(comm);
    tc_handle_retire(comm, TC_HANDLE_COMM);
    /* The backends' communicators go with the last reference: here, or with the last work handle still held
     * (backend.h, "Lifetime"). */
    return tc_comm_state_unref(state);
}

/* The core records the abort first, so every call made from now on is refused before any backend sees it; then
 * each backend ends what is pending. A backend without comm_abort leaves its pending operations to their
 * timeouts: say so, since the caller expects them to end now. */
tcomms_status_t tcomms_comm_abort(tcomms_comm_t *comm)
{
    tcomms_status_t first = tc_comm_check(comm, "tcomms_comm_abort", "comm");
    if (first != TCOMMS_SUCCESS || !tc_comm_state_abort(comm->state))
        return first; /* a second abort: the backends were told by the first */
    tc_log(TCOMMS_LOG_INFO, "core", "communicator '%s' (rank %d of %d): tcomms_comm_abort", comm->name, comm->rank,
           comm->size);
    tc_flight_dump("tcomms_comm_abort");
    if (comm->flight != NULL) /* the operations it ends are no failure to ask the other ranks about */
        tc_flight_first_failure(comm->flight);
    for (int t = 0; t < TCOMMS_DEVICE_TYPE_COUNT; t++) {
        const tc_slot_t *slot = &comm->slot[t];
        if (slot->bcomm == NULL)
            continue;
        if (slot->be->comm_abort == NULL) {
            tc_log(TCOMMS_LOG_WARN, "core", "communicator '%s': backend '%s' cannot abort; its pending operations "
                   "end at their timeouts", comm->name, slot->be->name);
            continue;
        }
        tcomms_status_t st = slot->be->comm_abort(slot->bcomm);
        if (st != TCOMMS_SUCCESS && first == TCOMMS_SUCCESS)
            first = tc_error_prefix(st, "tcomms_comm_abort: backend '%s' of '%s': ", slot->be->name, comm->name);
    }
    return first;
}

/* ---- queries ---------------------------------------------------------------------------------------------------- */

#define CHECK_QUERY(comm, out)                                                                                    \
    do {                                                                                                          \
        tcomms_status_t st_ = tc_comm_check(comm, __func__, "comm");                                              \
        if (st_ != TCOMMS_SUCCESS)                                                                                \
            return st_;                                                                                           \
        if ((out) == NULL)                                                                                        \
            return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: %s is NULL", __func__, #out);                            \
    } while (0)

tcomms_status_t tcomms_comm_rank(const tcomms_comm_t *comm, int *rank)
{
    CHECK_QUERY(comm, rank);
    *rank = comm->rank;
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcomms_comm_size(const tcomms_comm_t *comm, int *size)
{
    CHECK_QUERY(comm, size);
    *size = comm->size;
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcomms_comm_local_rank(const tcomms_comm_t *comm, int *local_rank)
{
    CHECK_QUERY(comm, local_rank);
    *local_rank = comm->local_rank;
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcomms_comm_local_size(const tcomms_comm_t *comm, int *local_size)
{
    CHECK_QUERY(comm, local_size);
    *local_size = comm->local_size;
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcomms_comm_name(const tcomms_comm_t *comm, const char **name)
{
    CHECK_QUERY(comm, name);
    *name = comm->name;
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcomms_comm_device(const tcomms_comm_t *comm, tcomms_device_t *device)
{
    CHECK_QUERY(comm, device);
    *device = comm->device;
    return TCOMMS_SUCCESS;
}

/* The loaded slot serving `type`, bound or not. */
static tcomms_status_t loaded_slot(const tcomms_comm_t *comm, tcomms_device_type_t type, const char *who,
                                   const tc_slot_t **out)
{
    if ((unsigned)type >= TCOMMS_DEVICE_TYPE_COUNT)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: device type %d is not a tcomms_device_type_t", who, (int)type);
    if (comm->slot[type].be == NULL) {
        char held[128] = "";
        for (int t = 0; t < TCOMMS_DEVICE_TYPE_COUNT; t++)
            if (comm->slot[t].be != NULL) {
                size_t n = strlen(held);
                snprintf(held + n, sizeof(held) - n, "%s%s:%s", n ? "," : "",
                         tcomms_device_type_name((tcomms_device_type_t)t), comm->slot[t].be->name);
            }
        return tc_error(TCOMMS_ERR_NO_BACKEND_FOR_DEVICE,
                        "%s: requested backend for device '%s' is not present in communicator '%s' (it holds %s)",
                        who, tcomms_device_type_name(type), comm->name, held);
    }
    *out = &comm->slot[type];
    return TCOMMS_SUCCESS;
}

static tcomms_status_t not_bound(const tcomms_comm_t *comm, int t, const char *who)
{
    const char *type = tcomms_device_type_name((tcomms_device_type_t)t);
    return tc_error(TCOMMS_ERR_NOT_BOUND, "%s: communicator '%s' is bound to device '%s', so its %s backend '%s' was "
                    "not created: create the communicator on a %s device (e.g. %s:0) to use it", who, comm->name,
                    tcomms_device_type_name(comm->device.type), type, comm->slot[t].be->name, type, type);
}

tcomms_status_t tc_comm_slot(const tcomms_comm_t *comm, tcomms_device_type_t type, const char *who,
                             const tc_slot_t **out)
{
    const tc_slot_t *slot = NULL;
    tcomms_status_t st = loaded_slot(comm, type, who, &slot);
    if (st != TCOMMS_SUCCESS)
        return st;
    if (!slot->bound)
        return not_bound(comm, (int)type, who);
    *out = slot;
    return TCOMMS_SUCCESS;
}

tcomms_status_t tc_comm_check_bound(const tcomms_comm_t *comm, const char *who)
{
    tcomms_status_t st = tc_comm_check(comm, who, "parent");
    if (st != TCOMMS_SUCCESS)
        return st;
    for (int t = 0; t < TCOMMS_DEVICE_TYPE_COUNT; t++)
        if (comm->slot[t].be != NULL && !comm->slot[t].bound)
            return not_bound(comm, t, who);
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcomms_comm_backend(const tcomms_comm_t *comm, tcomms_device_type_t type, const char **name)
{
    CHECK_QUERY(comm, name);
    const tc_slot_t *slot = NULL;
    tcomms_status_t st = loaded_slot(comm, type, __func__, &slot);
    if (st == TCOMMS_SUCCESS)
        *name = slot->be->name;
    return st;
}
