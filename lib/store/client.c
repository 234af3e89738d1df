/* SPDX-License-Identifier: BSD-3-Clause */
/* The TCP store client behind tc_store_connect: one connection per handle, one request/reply in flight at a time
 * under a mutex, every socket wait bounded by a deadline. A connection that fails mid-exchange is closed for good
 * (its byte stream can no longer be trusted) and later calls report it lost. Protocol: proto.h. */
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "clock.h" /* lib/util/clock.h */
#include "impl.h"
#include "log.h"
#include "proto.h"

#define WHO "store"
#define REPLY_MARGIN_MS 2000u   /* beyond a WAIT's own timeout, for the server's reply to arrive */
#define MIN_IO_TIMEOUT_MS 10000u /* reply deadline floor for requests that never wait */
#define BACKOFF_FIRST_MS 10u
#define BACKOFF_MAX_MS 1000u
#define MIN_ATTEMPT_MS 100u
#define IO_EOF (-1) /* io helpers return 0, IO_EOF or an errno value (ETIMEDOUT at the deadline) */

typedef struct tcp_store {
    tcomms_store_t super;
    pthread_mutex_t lock;
    int fd;                 /* -1 once the connection is lost */
    uint64_t io_timeout_ms; /* reply deadline of requests that do not wait */
    char where[300];        /* "host:port", for messages */
} tcp_store_t;

typedef struct reply {
    uint16_t code;
    uint32_t len;
    uint8_t *value; /* malloc'ed, NUL-terminated one past len */
} reply_t;

/* 0 when fd is ready for `events`, else ETIMEDOUT or an errno value. */
static int wait_fd(int fd, short events, uint64_t deadline)
{
    for (;;) {
        uint64_t now = tc_now_ms();
        if (now >= deadline)
            return ETIMEDOUT;
        struct pollfd p = {.fd = fd, .events = events};
        int rc = poll(&p, 1, deadline - now > INT_MAX ? INT_MAX : (int)(deadline - now));
        if (rc > 0)
            return 0; /* errors and hang-ups surface in the send/recv that follows */
        if (rc < 0 && errno != EINTR)
            return errno;
    }
}

static int send_iov(int fd, struct iovec *iov, int n, uint64_t deadline)
{
    while (n > 0) {
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(fd, &m, MSG_NOSIGNAL);
        if (w < 0) {
            int e = errno;
            if (e == EINTR)
                continue;
            if (e != EAGAIN && e != EWOULDBLOCK)
                return e;
            if ((e = wait_fd(fd, POLLOUT, deadline)) != 0)
                return e;
            continue;
        }
        size_t done = (size_t)w;
        for (; n > 0 && done >= iov->iov_len; iov++, n--)
            done -= iov->iov_len;
        if (n > 0) {
            iov->iov_base = (uint8_t *)iov->iov_base + done;
            iov->iov_len -= done;
        }
    }
    return 0;
}

static int recv_all(int fd, void *buf, size_t len, uint64_t deadline)
{
    size_t got = 0;
    while (got < len) {
        ssize_t r = recv(fd, (uint8_t *)buf + got, len - got, 0);
        if (r > 0) {
            got += (size_t)r;
            continue;
        }
        if (r == 0)
            return IO_EOF;
        int e = errno;
        if (e == EINTR)
            continue;
        if (e != EAGAIN && e != EWOULDBLOCK)
            return e;
        if ((e = wait_fd(fd, POLLIN, deadline)) != 0)
            return e;
    }
    return 0;
}

/* The connection can't be trusted any more: close it and say why. */
static tcomms_status_t lost(tcp_store_t *s, const char *what, int err, uint64_t waited_ms)
{
    close(s->fd);
    s->fd = -1;
    if (err == IO_EOF)
        return tc_error(TCOMMS_ERR_REMOTE, "store %s: the store at %s closed the connection", what, s->where);
    if (err == ETIMEDOUT)
        return tc_error(TCOMMS_ERR_REMOTE, "store %s: no reply from the store at %s within %llu ms; connection dropped",
                        what, s->where, (unsigned long long)waited_ms);
    return tc_error(TCOMMS_ERR_REMOTE, "store %s: connection to the store at %s lost: %s", what, s->where,
                    strerror(err));
}

static tcomms_status_t exchange(tcp_store_t *s, const char *what, uint16_t op, const char *key, const void *val,
                                uint32_t vlen, uint64_t reply_ms, reply_t *r)
{
    uint32_t klen = key != NULL ? (uint32_t)strlen(key) : 0;
    uint8_t hdr[TC_STORE_HDR_LEN];
    tc_store_hdr_pack(hdr, op, klen, vlen);
    struct iovec iov[3] = {{hdr, sizeof(hdr)}, {(void *)key, klen}, {(void *)val, vlen}};
    uint64_t deadline = tc_now_ms() + reply_ms;
    int e = send_iov(s->fd, iov, 3, deadline);
    if (e == 0)
        e = recv_all(s->fd, hdr, sizeof(hdr), deadline);
    if (e != 0)
        return lost(s, what, e, reply_ms);
    tc_store_hdr_t h = tc_store_hdr_unpack(hdr);
    if (h.magic != TC_STORE_MAGIC || h.klen != 0 || h.vlen > TC_STORE_MAX_VALUE) {
        close(s->fd);
        s->fd = -1;
        return tc_error(TCOMMS_ERR_PROTOCOL, "store %s: malformed reply from the store at %s (magic 0x%08x, length %u)",
                        what, s->where, h.magic, h.vlen);
    }
    r->value = malloc((size_t)h.vlen + 1);
    if (r->value == NULL) {
        close(s->fd); /* the unread reply would desynchronise the stream */
        s->fd = -1;
        return tc_error(TCOMMS_ERR_NO_MEMORY, "store %s: out of memory for a %u-byte reply", what, h.vlen);
    }
    if ((e = recv_all(s->fd, r->value, h.vlen, deadline)) != 0)
        return lost(s, what, e, reply_ms);
    r->value[h.vlen] = '\0';
    r->len = h.vlen;
    r->code = h.code;
    if (h.code == TC_STORE_BAD_REQUEST || h.code == TC_STORE_REFUSED) {
        close(s->fd); /* the server closes its end after these */
        s->fd = -1;
    }
    return TCOMMS_SUCCESS;
}

/* One request and its reply, under the handle's lock. On success the caller frees r->value. */
static tcomms_status_t transact(tcp_store_t *s, const char *what, uint16_t op, const char *key, const void *val,
                                uint32_t vlen, uint64_t reply_ms, reply_t *r)
{
    tcomms_status_t st;
    *r = (reply_t){0};
    pthread_mutex_lock(&s->lock);
    if (s->fd < 0)
        st = tc_error(TCOMMS_ERR_REMOTE, "store %s: the connection to the store at %s was lost earlier", what,
                      s->where);
    else
        st = exchange(s, what, op, key, val, vlen, reply_ms, r);
    pthread_mutex_unlock(&s->lock);
    if (st != TCOMMS_SUCCESS) {
        free(r->value);
        r->value = NULL;
    }
    return st;
}

/* The status of a reply other than OK (and TIMEOUT, which only WAIT interprets); frees the reply. */
static tcomms_status_t reply_status(const tcp_store_t *s, const char *what, const char *key, reply_t *r,
                                    uint32_t ok_len)
{
    tcomms_status_t st = TCOMMS_SUCCESS;
    const char *msg = r->value != NULL ? (const char *)r->value : "";
    switch (r->code) {
    case TC_STORE_OK:
        if (ok_len != UINT32_MAX && r->len != ok_len)
            st = tc_error(TCOMMS_ERR_PROTOCOL, "store %s '%s': reply of %u bytes from the store at %s, expected %u",
                          what, key, r->len, s->where, ok_len);
        return st; /* the caller reads and frees the value */
    case TC_STORE_NOT_FOUND:
        st = tc_error(TCOMMS_ERR_NOT_FOUND, "store %s: key '%s' not found in the store at %s", what, key, s->where);
        break;
    case TC_STORE_BAD_VALUE: st = tc_error(TCOMMS_ERR_INVALID_ARG, "store %s '%s': %.300s", what, key, msg); break;
    case TC_STORE_NO_MEMORY: st = tc_error(TCOMMS_ERR_NO_MEMORY, "store %s '%s': %.300s", what, key, msg); break;
    case TC_STORE_BAD_REQUEST:
    case TC_STORE_REFUSED:
        st = tc_error(TCOMMS_ERR_PROTOCOL, "store %s: the store at %s refused the request: %.300s", what, s->where,
                      msg);
        break;
    default:
        st = tc_error(TCOMMS_ERR_PROTOCOL, "store %s: unknown reply code %u from the store at %s", what, r->code,
                      s->where);
    }
    free(r->value);
    r->value = NULL;
    return st;
}

/* For a reply whose value the caller does not need. */
static tcomms_status_t simple(tcp_store_t *s, const char *what, uint16_t op, const char *key, const void *val,
                              uint32_t vlen)
{
    reply_t r;
    tcomms_status_t st = transact(s, what, op, key, val, vlen, s->io_timeout_ms, &r);
    if (st == TCOMMS_SUCCESS)
        st = reply_status(s, what, key, &r, UINT32_MAX);
    free(r.value);
    return st;
}

static tcomms_status_t tcp_set(tcomms_store_t *base, const char *key, const void *value, size_t len)
{
    return simple((tcp_store_t *)base, "set", TC_STORE_OP_SET, key, value, (uint32_t)len);
}

static tcomms_status_t tcp_wait(tcomms_store_t *base, const char *const *keys, size_t nkeys, uint32_t timeout_ms)
{
    tcp_store_t *s = (tcp_store_t *)base;
    size_t blen = 8;
    for (size_t i = 0; i < nkeys; i++)
        blen += 4 + strlen(keys[i]);
    uint8_t *body = malloc(blen);
    if (body == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "store wait: out of memory for %zu keys", nkeys);
    tc_store_put_u32(body, timeout_ms);
    tc_store_put_u32(body + 4, (uint32_t)nkeys);
    for (size_t i = 0, off = 8; i < nkeys; i++) {
        size_t n = strlen(keys[i]);
        tc_store_put_u32(body + off, (uint32_t)n);
        memcpy(body + off + 4, keys[i], n);
        off += 4 + n;
    }
    reply_t r;
    tcomms_status_t st =
        transact(s, "wait", TC_STORE_OP_WAIT, NULL, body, (uint32_t)blen, (uint64_t)timeout_ms + REPLY_MARGIN_MS, &r);
    free(body);
    if (st == TCOMMS_SUCCESS && r.code == TC_STORE_TIMEOUT)
        st = tc_error(TCOMMS_ERR_TIMEOUT, "store wait: key '%s' not set within %u ms (store at %s)", (char *)r.value,
                      timeout_ms, s->where);
    else if (st == TCOMMS_SUCCESS)
        st = reply_status(s, "wait", keys[0], &r, UINT32_MAX);
    free(r.value);
    return st;
}

/* One GET_WAIT: the server replies once the key is set, with its value. */
static tcomms_status_t tcp_get(tcomms_store_t *base, const char *key, void **value, size_t *len, uint32_t timeout_ms)
{
    tcp_store_t *s = (tcp_store_t *)base;
    uint8_t t[4];
    tc_store_put_u32(t, timeout_ms);
    reply_t r;
    tcomms_status_t st =
        transact(s, "get", TC_STORE_OP_GET_WAIT, key, t, 4, (uint64_t)timeout_ms + REPLY_MARGIN_MS, &r);
    if (st == TCOMMS_SUCCESS && r.code == TC_STORE_TIMEOUT) {
        st = tc_error(TCOMMS_ERR_TIMEOUT, "store get: key '%s' not set within %u ms (store at %s)", key, timeout_ms,
                      s->where);
        free(r.value);
    } else if (st == TCOMMS_SUCCESS) {
        st = reply_status(s, "get", key, &r, UINT32_MAX);
    }
    if (st != TCOMMS_SUCCESS)
        return st;
    *value = r.value;
    *len = r.len;
    return TCOMMS_SUCCESS;
}

/* A request whose OK reply is one i64. */
static tcomms_status_t number(tcp_store_t *s, const char *what, uint16_t op, const char *key, const void *val,
                              uint32_t vlen, int64_t *out)
{
    reply_t r;
    tcomms_status_t st = transact(s, what, op, key, val, vlen, s->io_timeout_ms, &r);
    if (st == TCOMMS_SUCCESS)
        st = reply_status(s, what, key != NULL ? key : "", &r, 8);
    if (st == TCOMMS_SUCCESS)
        *out = tc_store_get_i64(r.value);
    free(r.value);
    return st;
}

static tcomms_status_t tcp_add(tcomms_store_t *base, const char *key, int64_t delta, int64_t *result)
{
    uint8_t d[8];
    tc_store_put_i64(d, delta);
    return number((tcp_store_t *)base, "add", TC_STORE_OP_ADD, key, d, 8, result);
}

static tcomms_status_t tcp_del(tcomms_store_t *base, const char *key)
{
    return simple((tcp_store_t *)base, "del", TC_STORE_OP_DEL, key, NULL, 0);
}

static tcomms_status_t tcp_del_prefix(tcomms_store_t *base, const char *prefix)
{
    int64_t removed;
    return number((tcp_store_t *)base, "del_prefix", TC_STORE_OP_DEL_PREFIX, prefix, NULL, 0, &removed);
}

static tcomms_status_t tcp_num_keys(tcomms_store_t *base, int64_t *count)
{
    return number((tcp_store_t *)base, "num_keys", TC_STORE_OP_NUM_KEYS, NULL, NULL, 0, count);
}

static void tcp_destroy(tcomms_store_t *base)
{
    tcp_store_t *s = (tcp_store_t *)base;
    if (s->fd >= 0)
        close(s->fd);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static const tc_store_vtable_t tcp_vtable = {
    .set = tcp_set,
    .get = tcp_get,
    .wait = tcp_wait,
    .add = tcp_add,
    .del = tcp_del,
    .del_prefix = tcp_del_prefix,
    .num_keys = tcp_num_keys,
    .destroy = tcp_destroy,
};

/* ---- connecting ----------------------------------------------------------------------------------------------- */

static int connect_one(const struct addrinfo *ai, uint64_t deadline, int *err)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
        *err = errno;
        return -1;
    }
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        int e = errno, soerr = 0;
        socklen_t sl = sizeof(soerr);
        if (e == EINPROGRESS && (e = wait_fd(fd, POLLOUT, deadline)) == 0)
            e = getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 ? errno : soerr;
        if (e != 0) {
            *err = e;
            close(fd);
            return -1;
        }
    }
    /* Dialing a local port nobody listens on yet can, through TCP simultaneous open, connect the socket to
     * itself when the kernel picks that same port as the source: that is no server. */
    struct sockaddr_storage self, peer;
    socklen_t ls = sizeof(self), lp = sizeof(peer);
    if (getsockname(fd, (struct sockaddr *)&self, &ls) == 0 && getpeername(fd, (struct sockaddr *)&peer, &lp) == 0 &&
        ls == lp && memcmp(&self, &peer, ls) == 0) {
        *err = ECONNREFUSED;
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

/* One attempt over every address `addr` resolves to; the socket, or -1 with the reason in `why`. */
static int dial(const char *addr, int port, uint64_t deadline, char *why, size_t whylen)
{
    char service[16];
    snprintf(service, sizeof(service), "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(addr, service, &hints, &res);
    if (rc != 0) {
        snprintf(why, whylen, "%s", rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
        return -1;
    }
    int fd = -1, err = ENOENT;
    for (const struct addrinfo *ai = res; ai != NULL && fd < 0; ai = ai->ai_next)
        fd = connect_one(ai, deadline, &err);
    freeaddrinfo(res);
    if (fd < 0)
        snprintf(why, whylen, "%s", strerror(err));
    return fd;
}

static void sleep_ms(uint64_t ms)
{
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static tcomms_status_t hello(tcp_store_t *s, const char *token)
{
    reply_t r;
    size_t tlen = token != NULL ? strlen(token) : 0;
    tcomms_status_t st = transact(s, "connect", TC_STORE_OP_HELLO, NULL, tlen ? token : "", (uint32_t)tlen,
                                  s->io_timeout_ms, &r);
    if (st == TCOMMS_SUCCESS && r.code == TC_STORE_REFUSED)
        st = tc_error(TCOMMS_ERR_PROTOCOL, "store connect: the store at %s refused this client: %.300s", s->where,
                      (char *)r.value);
    else if (st == TCOMMS_SUCCESS)
        st = reply_status(s, "connect", "", &r, UINT32_MAX);
    free(r.value);
    return st;
}

tcomms_status_t tc_store_connect(const char *addr, int port, const char *token, uint32_t timeout_ms,
                                 tcomms_store_t **out)
{
    if (out == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "store connect: out is NULL");
    *out = NULL;
    if (addr == NULL || *addr == '\0')
        return tc_error(TCOMMS_ERR_INVALID_ARG, "store connect: addr is %s", addr == NULL ? "NULL" : "empty");
    if (port <= 0 || port > 65535)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "store connect: port %d is outside 1..65535", port);
    if (token != NULL && strlen(token) > TC_STORE_MAX_KEY)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "store connect: token is over %u bytes", TC_STORE_MAX_KEY);
    tcp_store_t *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "store connect: out of memory");
    snprintf(s->where, sizeof(s->where), strchr(addr, ':') ? "[%.255s]:%d" : "%.255s:%d", addr, port);

    uint64_t deadline = tc_now_ms() + timeout_ms, backoff = BACKOFF_FIRST_MS;
    char why[128] = "";
    for (;;) {
        /* Each attempt gets a little time even at the end, so that a short timeout still allows a handshake. */
        uint64_t now = tc_now_ms();
        s->fd = dial(addr, port, deadline > now + MIN_ATTEMPT_MS ? deadline : now + MIN_ATTEMPT_MS, why, sizeof(why));
        now = tc_now_ms();
        if (s->fd >= 0 || now >= deadline)
            break;
        tc_log(TCOMMS_LOG_DEBUG, WHO, "connect to %s: %s; retrying in %llu ms", s->where, why,
               (unsigned long long)backoff);
        sleep_ms(backoff < deadline - now ? backoff : deadline - now);
        backoff = backoff * 2 < BACKOFF_MAX_MS ? backoff * 2 : BACKOFF_MAX_MS;
    }
    if (s->fd < 0) {
        tcomms_status_t st = tc_error(TCOMMS_ERR_TIMEOUT,
                                      "store connect: cannot reach the store at %s within %u ms: %s", s->where,
                                      timeout_ms, why);
        free(s);
        return st;
    }
    s->super.vt = &tcp_vtable;
    s->io_timeout_ms = (timeout_ms > MIN_IO_TIMEOUT_MS ? timeout_ms : MIN_IO_TIMEOUT_MS) + REPLY_MARGIN_MS;
    pthread_mutex_init(&s->lock, NULL);
    tcomms_status_t st = hello(s, token);
    if (st != TCOMMS_SUCCESS) {
        tcp_destroy(&s->super);
        return st;
    }
    *out = &s->super;
    return TCOMMS_SUCCESS;
}
