/* SPDX-License-Identifier: BSD-3-Clause */
/* The built-in store server: one thread runs a poll() loop over non-blocking sockets and keeps the keys in a
 * table.h hash table; request.c reads and answers each request. A WAIT parks its connection with a
 * deadline the loop enforces, so no client ever blocks another. Connections are admitted by their first request
 * (HELLO with the token): until then they have a short deadline and a capped number of places, so strangers
 * cannot take rank 0's descriptors or hold up its last destroy. Protocol: proto.h. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h" /* lib/util/clock.h */
#include "env.h"
#include "log.h"
#include "server.h"

#define WHO "store"
#define ACCEPT_PAUSE_MS 100    /* out of descriptors: retry accept later instead of spinning */
#define ACCEPTS_PER_TURN 256   /* a flood of connections still lets the clients already in have their turn */
#define DROPS_LOGGED_FIRST 3   /* dropped clients logged one by one; after these, a count per interval */
#define DROPS_REPORT_MS 10000

/* ---- the log of dropped clients ------------------------------------------------------------------------------- */

static void drops_report(tc_store_server_t *srv, uint64_t now)
{
    if (srv->drops_unlogged > 0)
        tc_log(TCOMMS_LOG_WARN, WHO, "server on port %d: %llu more client(s) dropped or refused since the last report; "
               "the latest: %s", srv->port, (unsigned long long)srv->drops_unlogged, srv->drops_last);
    srv->drops_unlogged = 0;
    srv->drops_report_ms = now + DROPS_REPORT_MS;
}

void tc_store_srv_dropped(tc_store_server_t *srv, const char *fmt, ...)
{
    char msg[sizeof(srv->drops_last)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    uint64_t now = tc_now_ms();
    if (srv->drops_logged < DROPS_LOGGED_FIRST) {
        srv->drops_logged++;
        tc_log(TCOMMS_LOG_WARN, WHO, "server on port %d: %s%s", srv->port, msg,
               srv->drops_logged == DROPS_LOGGED_FIRST ? " (further ones are counted and reported every 10 s)" : "");
        srv->drops_report_ms = now + DROPS_REPORT_MS;
        return;
    }
    srv->drops_unlogged++;
    memcpy(srv->drops_last, msg, sizeof(msg));
    if (now >= srv->drops_report_ms)
        drops_report(srv, now);
}

/* ---- admission ---------------------------------------------------------------------------------------------- */

typedef struct census {
    size_t live, pending; /* connections not dead; those of them not admitted */
    size_t oldest;        /* where the search for the oldest connection not admitted resumes */
} census_t;

/* Room for a newcomer under both caps: the oldest connections not admitted go first, each given a last read in
 * case its HELLO is already waiting (a rank connecting during a flood). 0 when only admitted ones are left. */
static int make_room(tc_store_server_t *srv, census_t *k)
{
    while (k->pending >= srv->limits.max_pending || k->live >= srv->limits.max_conns) {
        conn_t *old = NULL;
        for (; k->oldest < srv->nconns && old == NULL; k->oldest++)
            if (!srv->conns[k->oldest]->admitted && !srv->conns[k->oldest]->dead)
                old = srv->conns[k->oldest];
        if (old == NULL)
            return 0;
        if (!old->closing && old->out == NULL)
            tc_store_srv_read(srv, old);
        k->pending--;
        if (old->admitted && !old->dead)
            continue;
        if (!old->dead)
            tc_store_srv_dropped(srv, "closing the oldest of %zu clients not authenticated yet, to make room for a "
                                 "newcomer (TCOMMS_STORE_MAX_PENDING=%u, TCOMMS_STORE_MAX_CONNS=%u)", k->pending + 1,
                                 srv->limits.max_pending, srv->limits.max_conns);
        old->dead = 1;
        k->live--;
    }
    return 1;
}

static conn_t *add_conn(tc_store_server_t *srv, int fd)
{
    if (srv->nconns == srv->cap) {
        size_t cap = srv->cap ? srv->cap * 2 : 16;
        conn_t **conns = realloc(srv->conns, cap * sizeof(*conns));
        if (conns != NULL)
            srv->conns = conns;
        struct pollfd *pfds = conns ? realloc(srv->pfds, (cap + 2) * sizeof(*pfds)) : NULL;
        if (pfds != NULL) {
            srv->pfds = pfds;
            srv->cap = cap;
        }
    }
    conn_t *c = srv->nconns < srv->cap ? calloc(1, sizeof(*c)) : NULL;
    if (c == NULL)
        return NULL;
    c->fd = fd;
    c->since_ms = tc_now_ms();
    srv->conns[srv->nconns++] = c;
    return c;
}

static void accept_some(tc_store_server_t *srv)
{
    census_t k = {0, 0, 0};
    for (size_t i = 0; i < srv->nconns; i++) {
        k.live += !srv->conns[i]->dead;
        k.pending += !srv->conns[i]->dead && !srv->conns[i]->admitted;
    }
    for (int n = 0; n < ACCEPTS_PER_TURN; n++) {
        int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                tc_store_srv_dropped(srv, "accept: %s; pausing %d ms", strerror(errno), ACCEPT_PAUSE_MS);
                srv->accept_resume_ms = tc_now_ms() + ACCEPT_PAUSE_MS;
            }
            return;
        }
        if (!make_room(srv, &k)) {
            tc_store_srv_dropped(srv, "refusing a newcomer: %zu clients are connected (TCOMMS_STORE_MAX_CONNS=%u)",
                                 k.live, srv->limits.max_conns);
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        conn_t *c = add_conn(srv, fd);
        if (c == NULL) {
            tc_log(TCOMMS_LOG_ERROR, WHO, "server: out of memory for a new client; refusing it");
            close(fd);
            continue;
        }
        k.live++;
        k.pending++;
        tc_store_srv_read(srv, c); /* a client's HELLO often comes with its connection: admit it at once */
        k.pending -= c->admitted;
    }
}

/* ---- the loop ------------------------------------------------------------------------------------------------- */

static int poll_timeout(const tc_store_server_t *srv, uint64_t now)
{
    uint64_t next = srv->accept_resume_ms > now ? srv->accept_resume_ms : UINT64_MAX;
    for (size_t i = 0; i < srv->nconns; i++) {
        const conn_t *c = srv->conns[i];
        if ((c->waiting || c->closing) && c->deadline_ms < next)
            next = c->deadline_ms;
        if (!c->admitted && c->since_ms + srv->limits.handshake_ms < next)
            next = c->since_ms + srv->limits.handshake_ms;
    }
    if (srv->drops_unlogged > 0 && srv->drops_report_ms < next)
        next = srv->drops_report_ms;
    if (srv->draining && srv->linger_until_ms < next)
        next = srv->linger_until_ms;
    if (next == UINT64_MAX)
        return -1;
    return next <= now ? 0 : next - now > 60000 ? 60000 : (int)(next - now);
}

static size_t fill_pollset(tc_store_server_t *srv, uint64_t now)
{
    srv->pfds[0] = (struct pollfd){.fd = srv->wake[0], .events = POLLIN};
    srv->pfds[1] = (struct pollfd){.fd = srv->listen_fd, .events = srv->accept_resume_ms > now ? 0 : POLLIN};
    for (size_t i = 0; i < srv->nconns; i++) {
        const conn_t *c = srv->conns[i];
        short ev = c->out != NULL ? POLLOUT : c->waiting ? POLLRDHUP : (short)(POLLIN | POLLRDHUP);
        srv->pfds[i + 2] = (struct pollfd){.fd = c->fd, .events = ev};
    }
    return srv->nconns + 2;
}

static void serve_conn(tc_store_server_t *srv, conn_t *c, short revents)
{
    if (c->dead)
        return; /* dropped for a newcomer this turn */
    if (revents & (POLLERR | POLLNVAL))
        c->dead = 1;
    else if (c->out != NULL && (revents & POLLOUT))
        tc_store_srv_flush(c);
    else if (c->out != NULL)
        c->dead = (revents & POLLHUP) != 0;
    else if (c->waiting)
        c->dead = (revents & (POLLHUP | POLLRDHUP)) != 0; /* the waiter went away */
    else
        tc_store_srv_read(srv, c);
}

static void expire_and_sweep(tc_store_server_t *srv)
{
    uint64_t now = tc_now_ms();
    size_t kept = 0;
    for (size_t i = 0; i < srv->nconns; i++) {
        conn_t *c = srv->conns[i];
        if (c->waiting && !c->dead && c->deadline_ms <= now)
            tc_store_srv_wait_expired(srv, c);
        if (c->closing && c->deadline_ms <= now)
            c->dead = 1;
        if (!c->admitted && !c->dead && !c->closing && c->since_ms + srv->limits.handshake_ms <= now) {
            tc_store_srv_dropped(srv, "closing a client that did not authenticate within %u ms "
                                 "(TCOMMS_STORE_HANDSHAKE_MS)", srv->limits.handshake_ms);
            c->dead = 1;
        }
        if (!c->dead) {
            srv->conns[kept++] = c;
            continue;
        }
        close(c->fd);
        tc_store_srv_release(srv, c);
        free(c);
    }
    srv->nconns = kept;
    if (srv->drops_unlogged > 0 && now >= srv->drops_report_ms)
        drops_report(srv, now);
}

static size_t count_admitted(const tc_store_server_t *srv)
{
    size_t n = 0;
    for (size_t i = 0; i < srv->nconns; i++)
        n += srv->conns[i]->admitted;
    return n;
}

static void *server_main(void *arg)
{
    tc_store_server_t *srv = arg;
    for (;;) {
        uint64_t now = tc_now_ms();
        size_t n = fill_pollset(srv, now);
        if (poll(srv->pfds, n, poll_timeout(srv, now)) < 0) {
            if (errno == EINTR)
                continue;
            tc_log(TCOMMS_LOG_ERROR, WHO, "server: poll: %s; the store stops serving", strerror(errno));
            break;
        }
        if (srv->pfds[0].revents != 0) {
            char buf[16];
            while (read(srv->wake[0], buf, sizeof(buf)) > 0) {
            }
            if (atomic_load(&srv->linger_until_ms) == 0)
                break;
            srv->draining = 1;
        }
        if (srv->pfds[1].revents & POLLIN)
            accept_some(srv);
        for (size_t i = 0; i + 2 < n; i++)
            if (srv->pfds[i + 2].revents != 0)
                serve_conn(srv, srv->conns[i], srv->pfds[i + 2].revents);
        expire_and_sweep(srv);
        if (!srv->draining)
            continue;
        size_t admitted = count_admitted(srv);
        if (admitted == 0) /* strangers and half-open connections are not worth waiting for */
            break;
        if (tc_now_ms() >= srv->linger_until_ms) {
            tc_log(TCOMMS_LOG_WARN, WHO, "server on port %d: stopping with %zu client(s) still connected after "
                   "lingering for them; their later store requests fail", srv->port, admitted);
            break;
        }
    }
    return NULL;
}

/* ---- start and stop ------------------------------------------------------------------------------------------- */

static int listen_on(const struct sockaddr *sa, socklen_t salen, int dual_stack)
{
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1, zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (dual_stack)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    if (bind(fd, sa, salen) != 0 || listen(fd, SOMAXCONN) != 0) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

static tcomms_status_t open_listener(tc_store_server_t *srv, const char *bind_addr, int port)
{
    int fd = -1;
    if (bind_addr == NULL || *bind_addr == '\0') {
        struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port),
                                  .sin6_addr = in6addr_any};
        struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        a4.sin_addr.s_addr = htonl(INADDR_ANY);
        fd = listen_on((struct sockaddr *)&a6, sizeof(a6), 1);
        if (fd < 0)
            fd = listen_on((struct sockaddr *)&a4, sizeof(a4), 0);
        bind_addr = "*";
    } else {
        char service[16];
        snprintf(service, sizeof(service), "%d", port);
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                                 .ai_flags = AI_PASSIVE | AI_NUMERICSERV}, *res = NULL;
        int rc = getaddrinfo(bind_addr, service, &hints, &res);
        if (rc != 0)
            return tc_error(TCOMMS_ERR_INVALID_ARG, "store server: bind_addr '%s': %s", bind_addr, gai_strerror(rc));
        for (struct addrinfo *ai = res; ai != NULL && fd < 0; ai = ai->ai_next)
            fd = listen_on(ai->ai_addr, ai->ai_addrlen, 0);
        freeaddrinfo(res);
    }
    if (fd < 0)
        return tc_error(TCOMMS_ERR_SYSTEM, "store server: cannot listen on %s port %d: %s", bind_addr, port,
                        strerror(errno));
    srv->listen_fd = fd;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
        return tc_error(TCOMMS_ERR_SYSTEM, "store server: getsockname: %s", strerror(errno));
    srv->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                               : ((struct sockaddr_in *)&ss)->sin_port);
    return TCOMMS_SUCCESS;
}

tcomms_status_t tc_store_server_start(const char *bind_addr, int port, const char *token, tc_store_server_t **out)
{
    if (out == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "store server: out is NULL");
    *out = NULL;
    if (port < 0 || port > 65535)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "store server: port %d is outside 0..65535", port);
    size_t token_len = token != NULL ? strlen(token) : 0;
    if (token_len > TC_STORE_MAX_KEY)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "store server: token is %zu bytes, over %u", token_len,
                        TC_STORE_MAX_KEY);
    tc_store_limits_t limits;
    tcomms_status_t st = tc_env_store_limits(&limits);
    if (st != TCOMMS_SUCCESS)
        return tc_error_prefix(st, "store server: ");
    tc_store_server_t *srv = calloc(1, sizeof(*srv));
    if (srv == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "store server: out of memory");
    srv->limits = limits;
    srv->listen_fd = srv->wake[0] = srv->wake[1] = -1;
    int table_failed = tc_store_table_init(&srv->table);
    srv->pfds = calloc(2, sizeof(struct pollfd));
    srv->token = token_len > 0 ? malloc(token_len) : NULL;
    if (table_failed || srv->pfds == NULL || (token_len > 0 && srv->token == NULL)) {
        st = tc_error(TCOMMS_ERR_NO_MEMORY, "store server: out of memory");
        goto fail;
    }
    if (token_len > 0)
        memcpy(srv->token, token, token_len);
    srv->token_len = token_len;
    if ((st = open_listener(srv, bind_addr, port)) != TCOMMS_SUCCESS)
        goto fail;
    if (pipe2(srv->wake, O_NONBLOCK | O_CLOEXEC) != 0) {
        st = tc_error(TCOMMS_ERR_SYSTEM, "store server: pipe: %s", strerror(errno));
        goto fail;
    }
    int rc = pthread_create(&srv->thread, NULL, server_main, srv);
    if (rc != 0) {
        st = tc_error(TCOMMS_ERR_SYSTEM, "store server: pthread_create: %s", strerror(rc));
        goto fail;
    }
    srv->thread_started = 1;
    tc_log(TCOMMS_LOG_DEBUG, WHO, "server listening on port %d%s", srv->port, token_len ? " (token required)" : "");
    *out = srv;
    return TCOMMS_SUCCESS;
fail:
    tc_store_server_stop(srv);
    return st;
}

int tc_store_server_port(const tc_store_server_t *server)
{
    return server != NULL ? server->port : -1;
}

static void wake_and_join(tc_store_server_t *srv)
{
    ssize_t w;
    do
        w = write(srv->wake[1], "x", 1);
    while (w < 0 && errno == EINTR);
    pthread_join(srv->thread, NULL);
    srv->thread_started = 0;
}

void tc_store_server_linger(tc_store_server_t *srv, uint32_t linger_ms)
{
    if (srv == NULL)
        return;
    if (srv->thread_started && linger_ms > 0) {
        atomic_store(&srv->linger_until_ms, tc_now_ms() + linger_ms);
        wake_and_join(srv);
    }
    tc_store_server_stop(srv);
}

void tc_store_server_stop(tc_store_server_t *srv)
{
    if (srv == NULL)
        return;
    if (srv->thread_started)
        wake_and_join(srv);
    for (size_t i = 0; i < srv->nconns; i++)
        srv->conns[i]->dead = 1;
    expire_and_sweep(srv);
    drops_report(srv, tc_now_ms());
    free(srv->conns);
    free(srv->pfds);
    for (int i = 0; i < 2; i++)
        if (srv->wake[i] >= 0)
            close(srv->wake[i]);
    if (srv->listen_fd >= 0)
        close(srv->listen_fd);
    tc_store_table_free(&srv->table);
    free(srv->token);
    free(srv);
}
