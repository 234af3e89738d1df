/* The built-in store server: one thread runs a poll() loop over non-blocking sockets and keeps the keys in a
 * store_table.h hash table. A WAIT parks its connection with a deadline the loop enforces, so no client ever blocks
 * another; every length is checked against its limit before a byte of body is buffered. Protocol: store_proto.h. */
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

#include "log.h"
#include "store_proto.h"
#include "store_table.h"

#define WHO "store"
#define FIRST_BODY_CHUNK (64u << 10) /* bodies grow as bytes arrive, never straight to the declared length */
#define CLOSE_GRACE_MS 2000          /* how long a refused client gets to read its error reply */
#define ACCEPT_PAUSE_MS 100          /* out of descriptors: retry accept later instead of spinning */
#define REQUESTS_PER_TURN 16         /* a client pipelining requests still lets the others have their turn */

/* ---- connections ---------------------------------------------------------------------------------------------- */

typedef struct conn {
    int fd;
    int authed;
    int closing; /* an error reply is queued: close once it is sent, or at deadline_ms */
    int dead;    /* closed at the end of this loop turn */
    uint8_t hdr_buf[TC_STORE_HDR_LEN];
    size_t hdr_got;
    tc_store_hdr_t hdr;
    uint8_t *body; /* key bytes then value bytes */
    size_t body_len, body_cap, body_got;
    int waiting;     /* a parked WAIT; its keys stay in body */
    int send_value;  /* the parked WAIT is a GET_WAIT: reply with its one key's value */
    size_t wait_off; /* offset in body of the first key not yet seen present */
    uint64_t deadline_ms;
    uint8_t *out; /* the one reply in flight: no request is read while it is pending */
    size_t out_len, out_off;
} conn_t;

struct tc_store_server {
    int listen_fd, wake[2], port, thread_started;
    pthread_t thread;
    uint8_t *token;
    size_t token_len;
    tc_store_table_t table;
    conn_t **conns;
    struct pollfd *pfds; /* wake pipe, listener, then one per connection */
    size_t nconns, cap;
    uint64_t accept_resume_ms;
    _Atomic uint64_t linger_until_ms; /* set before a lingering stop's wake-up: serve clients until then */
    int draining;                     /* server thread: woken to linger, stops when the last client is gone */
};

static void conn_flush(conn_t *c)
{
    while (c->out != NULL && c->out_off < c->out_len) {
        ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            c->dead = 1;
            return;
        }
        c->out_off += (size_t)n;
    }
    free(c->out);
    c->out = NULL;
    c->out_len = c->out_off = 0;
    if (c->closing)
        c->dead = 1;
}

static void conn_reset_request(conn_t *c)
{
    free(c->body);
    c->body = NULL;
    c->body_len = c->body_cap = c->body_got = c->hdr_got = 0;
    c->waiting = c->send_value = 0;
}

static void conn_reply(conn_t *c, uint16_t code, const void *value, uint32_t vlen)
{
    c->out = malloc(TC_STORE_HDR_LEN + (size_t)vlen);
    if (c->out == NULL) {
        tc_log(TCOMMS_LOG_ERROR, WHO, "server: out of memory for a %u-byte reply; dropping the client", vlen);
        c->dead = 1;
        return;
    }
    tc_store_hdr_pack(c->out, code, 0, vlen);
    if (vlen > 0)
        memcpy(c->out + TC_STORE_HDR_LEN, value, vlen);
    c->out_len = TC_STORE_HDR_LEN + (size_t)vlen;
    c->out_off = 0;
    conn_flush(c);
}

/* Reply with an error text; BAD_REQUEST and REFUSED also close the connection, whose stream can't be trusted. */
static void conn_fail(conn_t *c, uint16_t code, const char *fmt, ...) TC_PRINTF(3, 4);
static void conn_fail(conn_t *c, uint16_t code, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    size_t len = n < 0 ? 0 : (size_t)n >= sizeof(msg) ? sizeof(msg) - 1 : (size_t)n;
    if (code == TC_STORE_BAD_REQUEST || code == TC_STORE_REFUSED) {
        tc_log(TCOMMS_LOG_WARN, WHO, "server: closing a client: %s", msg);
        c->closing = 1;
        c->deadline_ms = tc_store_now_ms() + CLOSE_GRACE_MS;
    }
    conn_reset_request(c);
    conn_reply(c, code, msg, (uint32_t)len);
}

/* ---- requests ------------------------------------------------------------------------------------------------- */

static int tokens_match(const tc_store_server_t *srv, const uint8_t *given, size_t len)
{
    /* Time depends on the length given, never on where the secret first differs. */
    unsigned diff = len != srv->token_len;
    for (size_t i = 0; i < len; i++)
        diff |= given[i] ^ srv->token[i % srv->token_len];
    return diff == 0;
}

/* The limits of each op, checked on the header alone; 0 when it is refused (a reply is then queued). */
static int header_ok(tc_store_server_t *srv, conn_t *c)
{
    const tc_store_hdr_t *h = &c->hdr;
    uint32_t kmax = TC_STORE_MAX_KEY, vmin = 0, vmax = 0;
    if (h->magic != TC_STORE_MAGIC)
        return conn_fail(c, TC_STORE_BAD_REQUEST, "bad magic 0x%08x", h->magic), 0;
    if (srv->token != NULL && !c->authed && h->code != TC_STORE_OP_HELLO)
        return conn_fail(c, TC_STORE_REFUSED, "a token is required: the first request must be HELLO"), 0;
    switch (h->code) {
    case TC_STORE_OP_HELLO: kmax = 0; vmax = TC_STORE_MAX_KEY; break;
    case TC_STORE_OP_SET: vmax = TC_STORE_MAX_VALUE; break;
    case TC_STORE_OP_GET:
    case TC_STORE_OP_DEL:
    case TC_STORE_OP_DEL_PREFIX: break;
    case TC_STORE_OP_WAIT: kmax = 0; vmin = 8; vmax = TC_STORE_MAX_WAIT_BODY; break;
    case TC_STORE_OP_GET_WAIT: vmin = vmax = 4; break;
    case TC_STORE_OP_ADD: vmin = vmax = 8; break;
    case TC_STORE_OP_NUM_KEYS: kmax = 0; break;
    default: return conn_fail(c, TC_STORE_BAD_REQUEST, "unknown op %u", h->code), 0;
    }
    if (h->klen > kmax)
        return conn_fail(c, TC_STORE_BAD_REQUEST, "key length %u is over %u for op %u", h->klen, kmax, h->code), 0;
    if (h->vlen < vmin || h->vlen > vmax)
        return conn_fail(c, TC_STORE_BAD_REQUEST, "value length %u is outside [%u, %u] for op %u", h->vlen, vmin,
                         vmax, h->code),
               0;
    return 1;
}

/* Check the whole WAIT body before parking: counts, every key length, no trailing bytes. */
static int wait_body_ok(const conn_t *c, uint32_t *timeout_ms)
{
    const uint8_t *v = c->body;
    size_t len = c->body_len, off = 8;
    *timeout_ms = tc_store_get_u32(v);
    uint32_t nkeys = tc_store_get_u32(v + 4);
    if (nkeys > TC_STORE_MAX_KEYS)
        return 0;
    for (uint32_t i = 0; i < nkeys; i++) {
        if (len - off < 4)
            return 0;
        uint32_t klen = tc_store_get_u32(v + off);
        if (klen > TC_STORE_MAX_KEY || len - off - 4 < klen)
            return 0;
        off += 4 + (size_t)klen;
    }
    return off == len;
}

/* Move past the keys present; 1 once none is missing. */
static int wait_advance(tc_store_server_t *srv, conn_t *c)
{
    while (c->wait_off < c->body_len) {
        uint32_t klen = tc_store_get_u32(c->body + c->wait_off);
        if (tc_store_table_find(&srv->table, c->body + c->wait_off + 4, klen) == NULL)
            return 0;
        c->wait_off += 4 + (size_t)klen;
    }
    return 1;
}

static void wait_finish(tc_store_server_t *srv, conn_t *c, uint16_t code)
{
    c->waiting = 0;
    if (code == TC_STORE_OK && c->send_value) { /* set just now, or found present: the table holds it */
        const tc_store_entry_t *e = tc_store_table_find(&srv->table, c->body + 12, tc_store_get_u32(c->body + 8));
        conn_reply(c, e ? code : TC_STORE_NOT_FOUND, e ? e->value : NULL, e ? e->vlen : 0);
    } else if (code == TC_STORE_OK) {
        conn_reply(c, code, NULL, 0);
    } else /* name the first missing key; the reply copies it before the body goes */
        conn_reply(c, code, c->body + c->wait_off + 4, tc_store_get_u32(c->body + c->wait_off));
    conn_reset_request(c);
}

/* A key was set: wake the waiters whose first missing key it is. */
static void notify_waiters(tc_store_server_t *srv, const uint8_t *key, uint32_t klen)
{
    for (size_t i = 0; i < srv->nconns; i++) {
        conn_t *w = srv->conns[i];
        if (!w->waiting || w->dead || tc_store_get_u32(w->body + w->wait_off) != klen ||
            memcmp(w->body + w->wait_off + 4, key, klen) != 0)
            continue;
        if (wait_advance(srv, w))
            wait_finish(srv, w, TC_STORE_OK);
    }
}

static void do_wait(tc_store_server_t *srv, conn_t *c)
{
    uint32_t timeout_ms;
    if (!wait_body_ok(c, &timeout_ms))
        return conn_fail(c, TC_STORE_BAD_REQUEST, "malformed WAIT body of %zu bytes", c->body_len);
    c->wait_off = 8;
    if (wait_advance(srv, c))
        return wait_finish(srv, c, TC_STORE_OK);
    if (timeout_ms == 0)
        return wait_finish(srv, c, TC_STORE_TIMEOUT);
    c->waiting = 1;
    c->deadline_ms = tc_store_now_ms() + timeout_ms;
}

/* GET_WAIT: its body (key, timeout) rewritten as a WAIT body for that one key, so parking, waking and expiry are
 * WAIT's; wait_finish then replies with the value. */
static void do_get_wait(tc_store_server_t *srv, conn_t *c)
{
    uint32_t klen = c->hdr.klen;
    uint8_t *w = malloc(12 + (size_t)klen);
    if (w == NULL)
        return conn_fail(c, TC_STORE_NO_MEMORY, "server out of memory parking a %u-byte key", klen);
    tc_store_put_u32(w, tc_store_get_u32(c->body + klen));
    tc_store_put_u32(w + 4, 1);
    tc_store_put_u32(w + 8, klen);
    memcpy(w + 12, c->body, klen);
    free(c->body);
    c->body = w;
    c->body_len = c->body_cap = 12 + (size_t)klen;
    c->send_value = 1;
    do_wait(srv, c);
}

static void do_set(tc_store_server_t *srv, conn_t *c, const uint8_t *key, uint32_t klen, const uint8_t *val,
                   uint32_t vlen, const uint8_t *reply, uint32_t reply_len)
{
    if (tc_store_table_set(&srv->table, key, klen, val, vlen) != 0)
        return conn_fail(c, TC_STORE_NO_MEMORY, "server out of memory storing %u bytes", vlen);
    conn_reply(c, TC_STORE_OK, reply, reply_len);
    notify_waiters(srv, key, klen);
}

static void do_add(tc_store_server_t *srv, conn_t *c, const uint8_t *key, uint32_t klen, const uint8_t *delta)
{
    const tc_store_entry_t *e = tc_store_table_find(&srv->table, key, klen);
    if (e != NULL && e->vlen != 8)
        return conn_fail(c, TC_STORE_BAD_VALUE, "key '%.*s' holds a %u-byte value, not an 8-byte counter",
                         (int)(klen > 200 ? 200 : klen), (const char *)key, e->vlen);
    /* Wrap around like the hardware rather than overflow a signed integer. */
    uint64_t sum = (uint64_t)(e != NULL ? tc_store_get_i64(e->value) : 0) + (uint64_t)tc_store_get_i64(delta);
    int64_t result;
    memcpy(&result, &sum, sizeof(result));
    uint8_t bytes[8];
    tc_store_put_i64(bytes, result);
    do_set(srv, c, key, klen, bytes, 8, bytes, 8);
}

static void handle_request(tc_store_server_t *srv, conn_t *c)
{
    static const uint8_t empty[1];
    const uint8_t *key = c->body != NULL ? c->body : empty; /* a request may have no body at all */
    const uint8_t *val = key + c->hdr.klen;
    uint32_t klen = c->hdr.klen, vlen = c->hdr.vlen;
    uint8_t num[8];
    c->hdr_got = 0;
    switch (c->hdr.code) {
    case TC_STORE_OP_HELLO:
        if (srv->token != NULL && !tokens_match(srv, val, vlen))
            return conn_fail(c, TC_STORE_REFUSED, "wrong token");
        c->authed = 1;
        conn_reply(c, TC_STORE_OK, NULL, 0);
        break;
    case TC_STORE_OP_SET: do_set(srv, c, key, klen, val, vlen, NULL, 0); break;
    case TC_STORE_OP_GET: {
        const tc_store_entry_t *e = tc_store_table_find(&srv->table, key, klen);
        conn_reply(c, e ? TC_STORE_OK : TC_STORE_NOT_FOUND, e ? e->value : NULL, e ? e->vlen : 0);
        break;
    }
    case TC_STORE_OP_WAIT: return do_wait(srv, c); /* keeps the body while parked */
    case TC_STORE_OP_GET_WAIT: return do_get_wait(srv, c);
    case TC_STORE_OP_ADD: do_add(srv, c, key, klen, val); break;
    case TC_STORE_OP_DEL:
        tc_store_table_del(&srv->table, key, klen);
        conn_reply(c, TC_STORE_OK, NULL, 0);
        break;
    case TC_STORE_OP_DEL_PREFIX:
        tc_store_put_i64(num, tc_store_table_del_prefix(&srv->table, key, klen));
        conn_reply(c, TC_STORE_OK, num, 8);
        break;
    case TC_STORE_OP_NUM_KEYS:
        tc_store_put_i64(num, (int64_t)srv->table.count);
        conn_reply(c, TC_STORE_OK, num, 8);
        break;
    }
    if (!c->waiting)
        conn_reset_request(c);
}

/* Read what the socket holds, one request at a time: nothing more is read while a reply is pending or a WAIT is
 * parked, which bounds each client to one request's worth of server memory. */
static void conn_read(tc_store_server_t *srv, conn_t *c)
{
    int served = 0;
    while (!c->dead && !c->closing && !c->waiting && c->out == NULL && served < REQUESTS_PER_TURN) {
        uint8_t *dst;
        size_t want;
        if (c->hdr_got < TC_STORE_HDR_LEN) {
            dst = c->hdr_buf + c->hdr_got;
            want = TC_STORE_HDR_LEN - c->hdr_got;
        } else {
            if (c->body_got == c->body_cap) {
                size_t cap = c->body_cap == 0 ? FIRST_BODY_CHUNK : c->body_cap * 2;
                cap = cap < c->body_len ? cap : c->body_len;
                uint8_t *b = realloc(c->body, cap);
                if (b == NULL)
                    return conn_fail(c, TC_STORE_NO_MEMORY, "server out of memory reading a request");
                c->body = b;
                c->body_cap = cap;
            }
            dst = c->body + c->body_got;
            want = c->body_cap - c->body_got;
        }
        ssize_t n = recv(c->fd, dst, want, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) { /* EOF or reset: a partial request dies with its client */
            c->dead = 1;
            return;
        }
        if (c->hdr_got < TC_STORE_HDR_LEN) {
            c->hdr_got += (size_t)n;
            if (c->hdr_got < TC_STORE_HDR_LEN)
                continue;
            c->hdr = tc_store_hdr_unpack(c->hdr_buf);
            if (!header_ok(srv, c))
                return;
            c->body_len = (size_t)c->hdr.klen + c->hdr.vlen;
        } else {
            c->body_got += (size_t)n;
        }
        if (c->body_got == c->body_len) {
            handle_request(srv, c);
            served++;
        }
    }
}

/* ---- the loop ------------------------------------------------------------------------------------------------- */

static void accept_all(tc_store_server_t *srv)
{
    for (;;) {
        int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                tc_log(TCOMMS_LOG_WARN, WHO, "server: accept: %s; pausing %d ms", strerror(errno), ACCEPT_PAUSE_MS);
                srv->accept_resume_ms = tc_store_now_ms() + ACCEPT_PAUSE_MS;
            }
            return;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
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
        if (c == NULL) {
            tc_log(TCOMMS_LOG_ERROR, WHO, "server: out of memory for a new client; refusing it");
            close(fd);
            continue;
        }
        c->fd = fd;
        c->authed = srv->token == NULL;
        srv->conns[srv->nconns++] = c;
    }
}

static int poll_timeout(const tc_store_server_t *srv, uint64_t now)
{
    uint64_t next = srv->accept_resume_ms > now ? srv->accept_resume_ms : UINT64_MAX;
    for (size_t i = 0; i < srv->nconns; i++)
        if ((srv->conns[i]->waiting || srv->conns[i]->closing) && srv->conns[i]->deadline_ms < next)
            next = srv->conns[i]->deadline_ms;
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
    if (revents & (POLLERR | POLLNVAL))
        c->dead = 1;
    else if (c->out != NULL && (revents & POLLOUT))
        conn_flush(c);
    else if (c->out != NULL)
        c->dead = (revents & POLLHUP) != 0;
    else if (c->waiting)
        c->dead = (revents & (POLLHUP | POLLRDHUP)) != 0; /* the waiter went away */
    else
        conn_read(srv, c);
}

static void expire_and_sweep(tc_store_server_t *srv)
{
    uint64_t now = tc_store_now_ms();
    size_t kept = 0;
    for (size_t i = 0; i < srv->nconns; i++) {
        conn_t *c = srv->conns[i];
        if (c->waiting && !c->dead && c->deadline_ms <= now)
            wait_finish(srv, c, TC_STORE_TIMEOUT);
        if (c->closing && c->deadline_ms <= now)
            c->dead = 1;
        if (!c->dead) {
            srv->conns[kept++] = c;
            continue;
        }
        close(c->fd);
        free(c->body);
        free(c->out);
        free(c);
    }
    srv->nconns = kept;
}

static void *server_main(void *arg)
{
    tc_store_server_t *srv = arg;
    for (;;) {
        uint64_t now = tc_store_now_ms();
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
            accept_all(srv);
        for (size_t i = 0; i + 2 < n; i++)
            if (srv->pfds[i + 2].revents != 0)
                serve_conn(srv, srv->conns[i], srv->pfds[i + 2].revents);
        expire_and_sweep(srv);
        if (srv->draining && srv->nconns == 0)
            break;
        if (srv->draining && tc_store_now_ms() >= srv->linger_until_ms) {
            tc_log(TCOMMS_LOG_WARN, WHO, "server on port %d: stopping with %zu client(s) still connected after "
                   "lingering for them; their later store requests fail", srv->port, srv->nconns);
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
    tc_store_server_t *srv = calloc(1, sizeof(*srv));
    if (srv == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "store server: out of memory");
    srv->listen_fd = srv->wake[0] = srv->wake[1] = -1;
    tcomms_status_t st = TCOMMS_SUCCESS;
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
        atomic_store(&srv->linger_until_ms, tc_store_now_ms() + linger_ms);
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
