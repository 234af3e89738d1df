/* SPDX-License-Identifier: BSD-3-Clause */
/* The store server's requests (server.c runs the loop that calls in here): reading them off a non-blocking
 * socket with every length checked, and the server's byte budget, before a byte of body is buffered, answering
 * them from the table.h table, and parking WAITs with a deadline the loop enforces. Protocol: proto.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "clock.h" /* lib/util/clock.h */
#include "log.h"
#include "server.h"

#define WHO "store"
#define FIRST_BODY_CHUNK (64u << 10) /* bodies grow as bytes arrive, never straight to the declared length */
#define CLOSE_GRACE_MS 2000          /* how long a refused client gets to read its error reply */
#define REQUESTS_PER_TURN 16         /* a client pipelining requests still lets the others have their turn */
#define SMALL_BODY 4096u             /* requests that add nothing to the table pass a full budget up to this */

/* ---- replies -------------------------------------------------------------------------------------------------- */

void tc_store_srv_flush(conn_t *c)
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

static void conn_reset_request(tc_store_server_t *srv, conn_t *c)
{
    free(c->body);
    c->body = NULL;
    c->body_len = c->body_cap = c->body_got = c->hdr_got = 0;
    c->waiting = c->send_value = c->discard = 0;
    srv->reserved -= c->reserved;
    c->reserved = 0;
}

void tc_store_srv_release(tc_store_server_t *srv, conn_t *c)
{
    conn_reset_request(srv, c);
    free(c->out);
    c->out = NULL;
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
    tc_store_srv_flush(c);
}

/* Reply with an error text; BAD_REQUEST and REFUSED also close the connection, whose stream can't be trusted. */
static void conn_fail(tc_store_server_t *srv, conn_t *c, uint16_t code, const char *fmt, ...) TC_PRINTF(4, 5);
static void conn_fail(tc_store_server_t *srv, conn_t *c, uint16_t code, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    size_t len = n < 0 ? 0 : (size_t)n >= sizeof(msg) ? sizeof(msg) - 1 : (size_t)n;
    if (code == TC_STORE_BAD_REQUEST || code == TC_STORE_REFUSED) {
        tc_store_srv_dropped(srv, "closing a client: %s", msg);
        c->closing = 1;
        c->deadline_ms = tc_now_ms() + CLOSE_GRACE_MS;
    }
    conn_reset_request(srv, c);
    conn_reply(c, code, msg, (uint32_t)len);
}

/* ---- checks on the header ------------------------------------------------------------------------------------- */

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
        return conn_fail(srv, c, TC_STORE_BAD_REQUEST, "bad magic 0x%08x", h->magic), 0;
    if (srv->token != NULL && !c->admitted && h->code != TC_STORE_OP_HELLO)
        return conn_fail(srv, c, TC_STORE_REFUSED, "a token is required: the first request must be HELLO"), 0;
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
    default: return conn_fail(srv, c, TC_STORE_BAD_REQUEST, "unknown op %u", h->code), 0;
    }
    if (h->klen > kmax)
        return conn_fail(srv, c, TC_STORE_BAD_REQUEST, "key length %u is over %u for op %u", h->klen, kmax, h->code),
               0;
    if (h->vlen < vmin || h->vlen > vmax)
        return conn_fail(srv, c, TC_STORE_BAD_REQUEST, "value length %u is outside [%u, %u] for op %u", h->vlen,
                         vmin, vmax, h->code),
               0;
    return 1;
}

/* Reserve the request's share of the byte budget, or mark it to be read and refused. Requests that may add an entry
 * (SET, ADD) reserve their body and an entry's overhead and must fit; the others reserve their body and are held to
 * the budget only when large (a WAIT on thousands of keys), so that a full store still answers GET and DEL. */
static void reserve(tc_store_server_t *srv, conn_t *c)
{
    int grows = c->hdr.code == TC_STORE_OP_SET || c->hdr.code == TC_STORE_OP_ADD;
    uint64_t need = c->body_len + (grows ? TC_STORE_ENTRY_OVERHEAD : 0);
    if ((grows || need > SMALL_BODY) && srv->table.bytes + srv->reserved + need > srv->limits.max_bytes) {
        c->discard = 1;
        return;
    }
    c->reserved = need;
    srv->reserved += need;
}

/* ---- WAIT ----------------------------------------------------------------------------------------------------- */

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
    conn_reset_request(srv, c);
}

void tc_store_srv_wait_expired(tc_store_server_t *srv, conn_t *c)
{
    wait_finish(srv, c, TC_STORE_TIMEOUT);
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
        return conn_fail(srv, c, TC_STORE_BAD_REQUEST, "malformed WAIT body of %zu bytes", c->body_len);
    c->wait_off = 8;
    if (wait_advance(srv, c))
        return wait_finish(srv, c, TC_STORE_OK);
    if (timeout_ms == 0)
        return wait_finish(srv, c, TC_STORE_TIMEOUT);
    c->waiting = 1;
    c->deadline_ms = tc_now_ms() + timeout_ms;
}

/* GET_WAIT: its body (key, timeout) rewritten as a WAIT body for that one key, so parking, waking and expiry are
 * WAIT's; wait_finish then replies with the value. */
static void do_get_wait(tc_store_server_t *srv, conn_t *c)
{
    uint32_t klen = c->hdr.klen;
    uint8_t *w = malloc(12 + (size_t)klen);
    if (w == NULL)
        return conn_fail(srv, c, TC_STORE_NO_MEMORY, "server out of memory parking a %u-byte key", klen);
    tc_store_put_u32(w, tc_store_get_u32(c->body + klen));
    tc_store_put_u32(w + 4, 1);
    tc_store_put_u32(w + 8, klen);
    memcpy(w + 12, c->body, klen);
    free(c->body);
    c->body = w;
    c->body_len = c->body_cap = 12 + (size_t)klen;
    srv->reserved += 8; /* the rewritten body is 8 bytes longer */
    c->reserved += 8;
    c->send_value = 1;
    do_wait(srv, c);
}

/* ---- the other requests --------------------------------------------------------------------------------------- */

static void do_set(tc_store_server_t *srv, conn_t *c, const uint8_t *key, uint32_t klen, const uint8_t *val,
                   uint32_t vlen, const uint8_t *reply, uint32_t reply_len)
{
    if (tc_store_table_set(&srv->table, key, klen, val, vlen) != 0)
        return conn_fail(srv, c, TC_STORE_NO_MEMORY, "server out of memory storing %u bytes", vlen);
    conn_reply(c, TC_STORE_OK, reply, reply_len);
    notify_waiters(srv, key, klen);
}

static void do_add(tc_store_server_t *srv, conn_t *c, const uint8_t *key, uint32_t klen, const uint8_t *delta)
{
    const tc_store_entry_t *e = tc_store_table_find(&srv->table, key, klen);
    if (e != NULL && e->vlen != 8)
        return conn_fail(srv, c, TC_STORE_BAD_VALUE, "key '%.*s' holds a %u-byte value, not an 8-byte counter",
                         (int)(klen > 200 ? 200 : klen), (const char *)key, e->vlen);
    /* Wrap around like the hardware rather than overflow a signed integer. */
    uint64_t sum = (uint64_t)(e != NULL ? tc_store_get_i64(e->value) : 0) + (uint64_t)tc_store_get_i64(delta);
    int64_t result;
    memcpy(&result, &sum, sizeof(result));
    uint8_t bytes[8];
    tc_store_put_i64(bytes, result);
    do_set(srv, c, key, klen, bytes, 8, bytes, 8);
}

/* The request was over the byte budget: its body has been read and dropped. Say which limit, and where to raise it. */
static void refuse_over_budget(tc_store_server_t *srv, conn_t *c)
{
    unsigned long long held = srv->table.bytes + srv->reserved, cap = srv->limits.max_bytes;
    tc_store_srv_dropped(srv, "refused a %zu-byte request: the store holds %llu of its %llu bytes", c->body_len, held,
                         cap);
    conn_fail(srv, c, TC_STORE_NO_MEMORY,
              "the store is full: it holds %llu bytes of keys, values and requests, and this %zu-byte request would "
              "pass its limit of %llu bytes (raise TCOMMS_STORE_MAX_BYTES on the rank that serves it, rank 0)",
              held, c->body_len, cap);
}

static void handle_request(tc_store_server_t *srv, conn_t *c)
{
    static const uint8_t empty[1];
    const uint8_t *key = c->body != NULL ? c->body : empty; /* a request may have no body at all */
    const uint8_t *val = key + c->hdr.klen;
    uint32_t klen = c->hdr.klen, vlen = c->hdr.vlen;
    uint8_t num[8];
    c->hdr_got = 0;
    if (srv->token == NULL)
        c->admitted = 1; /* without a token, any well-formed request is a client's */
    if (c->discard)
        return refuse_over_budget(srv, c);
    switch (c->hdr.code) {
    case TC_STORE_OP_HELLO:
        if (srv->token != NULL && !tokens_match(srv, val, vlen))
            return conn_fail(srv, c, TC_STORE_REFUSED, "wrong token");
        c->admitted = 1;
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
        tc_store_put_i64(num, (int64_t)srv->table.h.count);
        conn_reply(c, TC_STORE_OK, num, 8);
        break;
    }
    if (!c->waiting)
        conn_reset_request(srv, c);
}

/* ---- reading -------------------------------------------------------------------------------------------------- */

/* Where the next bytes go: the header, the body (grown as it fills), or a scratch buffer for a body being dropped.
 * NULL when out of memory (a reply is then queued). */
static uint8_t *next_buffer(tc_store_server_t *srv, conn_t *c, uint8_t *scratch, size_t scratch_len, size_t *want)
{
    if (c->hdr_got < TC_STORE_HDR_LEN) {
        *want = TC_STORE_HDR_LEN - c->hdr_got;
        return c->hdr_buf + c->hdr_got;
    }
    if (c->discard) {
        *want = c->body_len - c->body_got < scratch_len ? c->body_len - c->body_got : scratch_len;
        return scratch;
    }
    if (c->body_got == c->body_cap) {
        size_t cap = c->body_cap == 0 ? FIRST_BODY_CHUNK : c->body_cap * 2;
        cap = cap < c->body_len ? cap : c->body_len;
        uint8_t *b = realloc(c->body, cap);
        if (b == NULL)
            return conn_fail(srv, c, TC_STORE_NO_MEMORY, "server out of memory reading a request"), NULL;
        c->body = b;
        c->body_cap = cap;
    }
    *want = c->body_cap - c->body_got;
    return c->body + c->body_got;
}

/* Read what the socket holds, one request at a time: nothing more is read while a reply is pending or a WAIT is
 * parked, which bounds each client to one request's worth of server memory. */
void tc_store_srv_read(tc_store_server_t *srv, conn_t *c)
{
    uint8_t scratch[16384];
    int served = 0;
    while (!c->dead && !c->closing && !c->waiting && c->out == NULL && served < REQUESTS_PER_TURN) {
        size_t want;
        uint8_t *dst = next_buffer(srv, c, scratch, sizeof(scratch), &want);
        if (dst == NULL)
            return;
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
            reserve(srv, c);
        } else {
            c->body_got += (size_t)n;
        }
        if (c->body_got == c->body_len) {
            handle_request(srv, c);
            served++;
        }
    }
}
