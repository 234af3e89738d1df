/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of the rendezvous store (lib/store*.c): a real server on loopback with TCP clients, forged malformed frames
 * over raw sockets, and the user-callback adapter over a small in-memory store written here as the reference. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"
#include "store/proto.h"
#include "check_run.h"

#define ck_ok(expr)                                                                                                   \
    do {                                                                                                              \
        tcomms_status_t st_ = (expr);                                                                                 \
        ck_assert_msg(st_ == TCOMMS_SUCCESS, "%s -> %d: %s", #expr, (int)st_, tcomms_last_error());                   \
    } while (0)

#define ck_status(expr, want)                                                                                         \
    do {                                                                                                              \
        tcomms_status_t st_ = (expr);                                                                                 \
        ck_assert_msg(st_ == (want), "%s -> %d, expected %d (%s)", #expr, (int)st_, (int)(want), tcomms_last_error()); \
    } while (0)

static tc_store_server_t *server;
static int port;

static void setup(void)
{
    ck_ok(tc_store_server_start("127.0.0.1", 0, NULL, &server));
    port = tc_store_server_port(server);
    ck_assert_int_gt(port, 0);
}

static void teardown(void)
{
    tc_store_server_stop(server);
    server = NULL;
}

static uint64_t ms_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void msleep(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static tcomms_store_t *client(int p, const char *token)
{
    tcomms_store_t *s = NULL;
    ck_ok(tc_store_connect("127.0.0.1", p, token, 5000, &s));
    return s;
}

static void expect_value(tcomms_store_t *s, const char *key, const void *want, size_t want_len)
{
    void *v = NULL;
    size_t len = 0;
    ck_ok(tc_store_get(s, key, &v, &len, 1000));
    ck_assert_uint_eq(len, want_len);
    ck_assert(memcmp(v, want, len) == 0);
    ck_assert_int_eq(((char *)v)[len], '\0');
    free(v);
}

static int64_t num_keys(tcomms_store_t *s)
{
    int64_t n = -1;
    ck_ok(tc_store_num_keys(s, &n));
    return n;
}

/* A port nobody listens on right now: bind port 0, read it back, close. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(a);
    ck_assert(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
    ck_assert(getsockname(fd, (struct sockaddr *)&a, &sl) == 0);
    close(fd);
    return ntohs(a.sin_port);
}

START_TEST(test_roundtrip)
{
    tcomms_store_t *s = client(port, NULL);
    ck_ok(tc_store_set(s, "a", "hello", 5));
    expect_value(s, "a", "hello", 5);
    ck_ok(tc_store_set(s, "a", "bye", 3));
    expect_value(s, "a", "bye", 3);
    ck_assert_int_eq(num_keys(s), 1);
    const char *pk[] = {"p/1", "p/2", "p/3", "q/1", "p"};
    for (int i = 0; i < 5; i++)
        ck_ok(tc_store_set(s, pk[i], pk[i], strlen(pk[i])));
    ck_assert_int_eq(num_keys(s), 6);
    ck_ok(tc_store_del_prefix(s, "p/"));
    ck_assert_int_eq(num_keys(s), 3); /* a, q/1, p */
    expect_value(s, "q/1", "q/1", 3);
    expect_value(s, "p", "p", 1);
    void *v = NULL;
    size_t len = 0;
    ck_status(tc_store_get(s, "p/2", &v, &len, 0), TCOMMS_ERR_TIMEOUT);
    ck_assert_ptr_null(v);
    ck_ok(tc_store_del(s, "a"));
    ck_ok(tc_store_del(s, "absent"));
    ck_assert_int_eq(num_keys(s), 2);
    ck_ok(tc_store_del_prefix(s, ""));
    ck_assert_int_eq(num_keys(s), 0);
    tc_store_free(s);
}
END_TEST

START_TEST(test_many_keys)
{
    tcomms_store_t *s = client(port, NULL);
    enum { N = 1000 };
    static char names[N][16];
    const char *keys[N];
    int64_t starts_with_1 = 0;
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "m/%d", i);
        keys[i] = names[i];
        starts_with_1 += names[i][2] == '1';
        ck_ok(tc_store_set(s, names[i], &i, sizeof(i)));
    }
    ck_assert_int_eq(num_keys(s), N);
    ck_ok(tc_store_wait(s, keys, N, 0));
    for (int i = 0; i < N; i++)
        expect_value(s, names[i], &i, sizeof(i));
    ck_ok(tc_store_del_prefix(s, "m/1"));
    ck_assert_int_eq(num_keys(s), N - starts_with_1);
    ck_status(tc_store_wait(s, keys, N, 0), TCOMMS_ERR_TIMEOUT);
    ck_assert_ptr_nonnull(strstr(tcomms_last_error(), "'m/1'"));
    tc_store_free(s);
}
END_TEST

START_TEST(test_binary_and_empty)
{
    tcomms_store_t *s = client(port, NULL);
    const unsigned char bin[] = {0, 1, 0, 255, 0, 'x', 0};
    ck_ok(tc_store_set(s, "bin", bin, sizeof(bin)));
    expect_value(s, "bin", bin, sizeof(bin));
    ck_ok(tc_store_set(s, "empty", NULL, 0));
    expect_value(s, "empty", "", 0);
    tc_store_free(s);
}
END_TEST

static unsigned char pattern_byte(size_t i)
{
    return (unsigned char)((i * 2654435761u) >> 13);
}

START_TEST(test_large_value)
{
    tcomms_store_t *s = client(port, NULL);
    size_t n = 1u << 20;
    unsigned char *big = malloc(n);
    for (size_t i = 0; i < n; i++)
        big[i] = pattern_byte(i);
    ck_ok(tc_store_set(s, "big", big, n));
    free(big);
    void *v = NULL;
    size_t len = 0;
    ck_ok(tc_store_get(s, "big", &v, &len, 1000));
    ck_assert_uint_eq(len, n);
    for (size_t i = 0; i < n; i++)
        if (((unsigned char *)v)[i] != pattern_byte(i))
            ck_abort_msg("byte %zu differs", i);
    free(v);
    tc_store_free(s);
}
END_TEST

START_TEST(test_wait_timeout)
{
    tcomms_store_t *s = client(port, NULL);
    ck_ok(tc_store_set(s, "present", "1", 1));
    const char *keys[] = {"present", "never-set"};
    uint64_t t0 = ms_now();
    ck_status(tc_store_wait(s, keys, 2, 200), TCOMMS_ERR_TIMEOUT);
    uint64_t took = ms_now() - t0;
    ck_assert_uint_ge(took, 150);
    ck_assert_uint_lt(took, 5000);
    ck_assert_ptr_nonnull(strstr(tcomms_last_error(), "never-set"));
    void *v = NULL;
    size_t len;
    ck_status(tc_store_get(s, "missing-key", &v, &len, 50), TCOMMS_ERR_TIMEOUT);
    ck_assert_ptr_nonnull(strstr(tcomms_last_error(), "missing-key"));
    ck_ok(tc_store_wait(s, keys, 1, 0));
    expect_value(s, "present", "1", 1); /* the connection survived the timeouts */
    tc_store_free(s);
}
END_TEST

typedef struct waiter {
    const char *const *keys;
    size_t nkeys;
    uint32_t timeout_ms;
    tcomms_status_t st;
    atomic_int done;
    char err[256];
} waiter_t;

static void *wait_thread(void *arg)
{
    waiter_t *w = arg;
    tcomms_store_t *s = client(port, NULL);
    w->st = tc_store_wait(s, w->keys, w->nkeys, w->timeout_ms);
    snprintf(w->err, sizeof(w->err), "%s", tcomms_last_error());
    atomic_store(&w->done, 1);
    tc_store_free(s);
    return NULL;
}

/* A get that waits (GET_WAIT) for w->keys[0], its value copied into w->err. */
static void *get_thread(void *arg)
{
    waiter_t *w = arg;
    tcomms_store_t *s = client(port, NULL);
    void *v = NULL;
    size_t len = 0;
    w->st = tc_store_get(s, w->keys[0], &v, &len, w->timeout_ms);
    snprintf(w->err, sizeof(w->err), "%.*s", w->st == TCOMMS_SUCCESS ? (int)len : 255,
             w->st == TCOMMS_SUCCESS ? (const char *)v : tcomms_last_error());
    free(v);
    atomic_store(&w->done, 1);
    tc_store_free(s);
    return NULL;
}

START_TEST(test_wait_satisfied_by_other_client)
{
    const char *keys[] = {"gate/a", "gate/b", "gate/c"}, *gkey[] = {"gate/v"};
    waiter_t w = {.keys = keys, .nkeys = 3, .timeout_ms = 10000};
    waiter_t g = {.keys = gkey, .nkeys = 1, .timeout_ms = 10000};
    pthread_t th, gth;
    pthread_create(&th, NULL, wait_thread, &w);
    pthread_create(&gth, NULL, get_thread, &g);
    tcomms_store_t *s = client(port, NULL);
    ck_ok(tc_store_set(s, "gate/c", "c", 1)); /* out of order: the waiter must still see it */
    msleep(100);
    /* The parked waiter must not block anyone else. */
    ck_ok(tc_store_set(s, "other", "o", 1));
    expect_value(s, "other", "o", 1);
    ck_assert_int_eq(atomic_load(&w.done), 0);
    ck_ok(tc_store_set(s, "gate/a", "a", 1));
    msleep(50);
    ck_assert_int_eq(atomic_load(&w.done), 0);
    ck_ok(tc_store_set(s, "gate/b", "b", 1));
    pthread_join(th, NULL);
    ck_assert_msg(w.st == TCOMMS_SUCCESS, "wait -> %d: %s", (int)w.st, w.err);
    ck_assert_int_eq(atomic_load(&g.done), 0); /* the get still waits for its own key */
    ck_ok(tc_store_set(s, "gate/v", "value", 5));
    pthread_join(gth, NULL);
    ck_assert_msg(g.st == TCOMMS_SUCCESS && strcmp(g.err, "value") == 0, "get -> %d: %s", (int)g.st, g.err);
    tc_store_free(s);
}
END_TEST

#define ADD_THREADS 4
#define ADDS_PER_THREAD 200

typedef struct adder {
    tcomms_store_t *shared; /* NULL: the thread opens its own client */
    int id;
    int monotonic;
} adder_t;

static int64_t add_delta(int thread, int i)
{
    return (int64_t)thread * 1000 + i + 1;
}

static void *add_thread(void *arg)
{
    adder_t *a = arg;
    tcomms_store_t *s = a->shared != NULL ? a->shared : client(port, NULL);
    int64_t last = INT64_MIN;
    a->monotonic = 1;
    for (int i = 0; i < ADDS_PER_THREAD; i++) {
        int64_t r = 0;
        ck_ok(tc_store_add(s, "counter", add_delta(a->id, i), &r));
        a->monotonic &= r > last; /* all deltas are positive */
        last = r;
    }
    if (a->shared == NULL)
        tc_store_free(s);
    return NULL;
}

START_TEST(test_concurrent_add)
{
    tcomms_store_t *shared = client(port, NULL);
    pthread_t th[ADD_THREADS + 2];
    adder_t ad[ADD_THREADS + 2];
    int64_t expect = 0;
    for (int t = 0; t < ADD_THREADS + 2; t++) {
        ad[t] = (adder_t){.shared = t >= ADD_THREADS ? shared : NULL, .id = t};
        for (int i = 0; i < ADDS_PER_THREAD; i++)
            expect += add_delta(t, i);
        pthread_create(&th[t], NULL, add_thread, &ad[t]);
    }
    for (int t = 0; t < ADD_THREADS + 2; t++) {
        pthread_join(th[t], NULL);
        ck_assert(ad[t].monotonic);
    }
    int64_t got = 0;
    ck_ok(tc_store_add(shared, "counter", 0, &got));
    ck_assert_int_eq(got, expect);
    /* Counters are 8-byte little-endian values: decode by hand. */
    void *v = NULL;
    size_t len = 0;
    ck_ok(tc_store_get(shared, "counter", &v, &len, 0));
    ck_assert_uint_eq(len, 8);
    uint64_t u = 0;
    for (int i = 7; i >= 0; i--)
        u = u << 8 | ((unsigned char *)v)[i];
    free(v);
    ck_assert_int_eq((int64_t)u, expect);
    tc_store_free(shared);
}
END_TEST

START_TEST(test_add_semantics)
{
    tcomms_store_t *s = client(port, NULL);
    int64_t r = 0;
    ck_ok(tc_store_add(s, "n", 5, &r));
    ck_assert_int_eq(r, 5);
    ck_ok(tc_store_add(s, "n", -7, &r));
    ck_assert_int_eq(r, -2);
    ck_ok(tc_store_add(s, "n", 1, NULL));
    ck_ok(tc_store_set(s, "text", "abc", 3));
    ck_status(tc_store_add(s, "text", 1, &r), TCOMMS_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tcomms_last_error(), "text"));
    expect_value(s, "text", "abc", 3); /* unchanged, and the connection still serves */
    ck_ok(tc_store_add(s, "n", 0, &r));
    ck_assert_int_eq(r, -1);
    tc_store_free(s);
}
END_TEST

static void *late_server(void *arg)
{
    tc_store_server_t **out = arg;
    msleep(300);
    ck_ok(tc_store_server_start("127.0.0.1", port, NULL, out));
    return NULL;
}

START_TEST(test_connect_retry)
{
    tc_store_server_stop(server);
    server = NULL;
    port = free_port();
    pthread_t th;
    pthread_create(&th, NULL, late_server, &server);
    tcomms_store_t *s = NULL;
    ck_ok(tc_store_connect("127.0.0.1", port, NULL, 5000, &s));
    pthread_join(th, NULL);
    ck_ok(tc_store_set(s, "k", "v", 1));
    expect_value(s, "k", "v", 1);
    tc_store_free(s);
}
END_TEST

START_TEST(test_connect_no_server)
{
    int p = free_port();
    tcomms_store_t *s = NULL;
    uint64_t t0 = ms_now();
    tcomms_status_t st = tc_store_connect("127.0.0.1", p, NULL, 300, &s);
    uint64_t took = ms_now() - t0;
    ck_assert_int_ne(st, TCOMMS_SUCCESS);
    ck_assert_ptr_null(s);
    ck_assert_uint_lt(took, 2000);
    char where[64];
    snprintf(where, sizeof(where), "127.0.0.1:%d", p);
    ck_assert_ptr_nonnull(strstr(tcomms_last_error(), where));
}
END_TEST

START_TEST(test_dual_stack_default_bind)
{
    tc_store_server_t *any = NULL;
    ck_ok(tc_store_server_start(NULL, 0, NULL, &any));
    int p = tc_store_server_port(any);
    tcomms_store_t *s = client(p, NULL);
    ck_ok(tc_store_set(s, "v4", "1", 1));
    tc_store_free(s);
    /* Over IPv6 too, where the host has it. */
    int probe = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_addr = in6addr_loopback};
    int have_v6 = probe >= 0 && bind(probe, (struct sockaddr *)&a6, sizeof(a6)) == 0;
    if (probe >= 0)
        close(probe);
    if (have_v6) {
        ck_ok(tc_store_connect("::1", p, NULL, 2000, &s));
        expect_value(s, "v4", "1", 1);
        tc_store_free(s);
    }
    tc_store_server_stop(any);
}
END_TEST

/* ---- raw sockets ---------------------------------------------------------------------------------------------- */

static int raw_connect(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
    struct timeval tv = {3, 0}; /* a server that neither replies nor closes fails the test instead of hanging it */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

static void raw_send(int fd, const void *buf, size_t len)
{
    ck_assert(send(fd, buf, len, MSG_NOSIGNAL) == (ssize_t)len);
}

static void raw_header(int fd, uint32_t magic, uint16_t op, uint32_t klen, uint32_t vlen)
{
    uint8_t h[TC_STORE_HDR_LEN];
    tc_store_hdr_pack(h, op, klen, vlen);
    tc_store_put_u32(h, magic);
    raw_send(fd, h, sizeof(h));
}

/* Read until EOF. `want_code` >= 0: an error reply with that code must come first (the server had read all we
 * sent, so it closes cleanly); -1: a reply is optional (unread bytes may turn the close into a reset). */
static void raw_expect_closed(int fd, int want_code)
{
    uint8_t h[TC_STORE_HDR_LEN], msg[512];
    size_t got = 0;
    ssize_t r = 1;
    while (got < sizeof(h) && (r = recv(fd, h + got, sizeof(h) - got, 0)) > 0)
        got += (size_t)r;
    if (got == sizeof(h)) {
        tc_store_hdr_t hd = tc_store_hdr_unpack(h);
        ck_assert_uint_eq(hd.magic, TC_STORE_MAGIC);
        if (want_code >= 0)
            ck_assert_int_eq(hd.code, want_code);
        ck_assert_uint_le(hd.vlen, sizeof(msg));
        while ((r = recv(fd, msg, sizeof(msg), 0)) > 0) {
        }
    } else {
        ck_assert_msg(want_code < 0, "no reply before the close (got %zu bytes)", got);
    }
    ck_assert_msg(r == 0 || errno == ECONNRESET, "connection not closed: %s", strerror(errno));
    close(fd);
}

static void expect_serving(int64_t keys_before)
{
    tcomms_store_t *s = client(port, NULL);
    ck_ok(tc_store_set(s, "alive", "yes", 3));
    expect_value(s, "alive", "yes", 3);
    ck_ok(tc_store_del(s, "alive"));
    ck_assert_int_eq(num_keys(s), keys_before);
    tc_store_free(s);
}

START_TEST(test_malformed_requests)
{
    tcomms_store_t *s = client(port, NULL);
    ck_ok(tc_store_set(s, "keep", "k", 1));
    int idle = raw_connect(); /* a stalled client holding half a header for the whole test */
    raw_send(idle, "\x31\x43\x53\x54\x02\x00\x00", 7);

    int fd = raw_connect();
    raw_header(fd, 0xdeadbeefu, TC_STORE_OP_SET, 1, 1);
    raw_expect_closed(fd, TC_STORE_BAD_REQUEST);
    expect_serving(1);

    fd = raw_connect();
    raw_header(fd, TC_STORE_MAGIC, TC_STORE_OP_SET, TC_STORE_MAX_KEY + 1, 1);
    raw_expect_closed(fd, TC_STORE_BAD_REQUEST);
    expect_serving(1);

    fd = raw_connect();
    raw_header(fd, TC_STORE_MAGIC, TC_STORE_OP_SET, 1, 0xFFFFFFFFu);
    raw_expect_closed(fd, TC_STORE_BAD_REQUEST);
    expect_serving(1);

    fd = raw_connect();
    raw_header(fd, TC_STORE_MAGIC, 0x77, 0, 0);
    raw_expect_closed(fd, TC_STORE_BAD_REQUEST);
    expect_serving(1);

    fd = raw_connect();
    raw_header(fd, TC_STORE_MAGIC, TC_STORE_OP_ADD, 1, 3); /* a delta is 8 bytes */
    raw_expect_closed(fd, TC_STORE_BAD_REQUEST);
    expect_serving(1);

    fd = raw_connect();
    raw_header(fd, TC_STORE_MAGIC, TC_STORE_OP_HELLO, 4, 0); /* HELLO carries no key */
    raw_expect_closed(fd, TC_STORE_BAD_REQUEST);
    expect_serving(1);

    uint8_t body[16];
    fd = raw_connect(); /* WAIT with too many keys */
    tc_store_put_u32(body, 100);
    tc_store_put_u32(body + 4, TC_STORE_MAX_KEYS + 1);
    raw_header(fd, TC_STORE_MAGIC, TC_STORE_OP_WAIT, 0, 8);
    raw_send(fd, body, 8);
    raw_expect_closed(fd, TC_STORE_BAD_REQUEST);
    expect_serving(1);

    fd = raw_connect(); /* WAIT whose key length runs past the body */
    tc_store_put_u32(body, 100);
    tc_store_put_u32(body + 4, 1);
    tc_store_put_u32(body + 8, 0xFFFFFFF0u);
    memcpy(body + 12, "abcd", 4);
    raw_header(fd, TC_STORE_MAGIC, TC_STORE_OP_WAIT, 0, 16);
    raw_send(fd, body, 16);
    raw_expect_closed(fd, TC_STORE_BAD_REQUEST);
    expect_serving(1);

    fd = raw_connect(); /* GET_WAIT's value is a 4-byte timeout */
    raw_header(fd, TC_STORE_MAGIC, TC_STORE_OP_GET_WAIT, 1, 3);
    raw_expect_closed(fd, TC_STORE_BAD_REQUEST);
    expect_serving(1);

    fd = raw_connect(); /* a waiter that goes away before its keys come */
    tc_store_put_u32(body, 10000);
    tc_store_put_u32(body + 4, 1);
    tc_store_put_u32(body + 8, 4);
    memcpy(body + 12, "gone", 4);
    raw_header(fd, TC_STORE_MAGIC, TC_STORE_OP_WAIT, 0, 16);
    raw_send(fd, body, 16);
    msleep(50);
    close(fd);
    msleep(50);
    ck_ok(tc_store_set(s, "gone", "g", 1));
    ck_ok(tc_store_del(s, "gone"));
    expect_serving(1);

    fd = raw_connect(); /* truncated header, then gone */
    raw_send(fd, "\x31\x43\x53\x54\x02\x00\x00", 7);
    close(fd);
    expect_serving(1);

    fd = raw_connect(); /* a body cut short, then gone */
    raw_header(fd, TC_STORE_MAGIC, TC_STORE_OP_SET, 3, 1000);
    raw_send(fd, "key0123456", 10);
    close(fd);
    expect_serving(1);

    unsigned char junk[4096];
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof(junk); i++)
        junk[i] = (unsigned char)((x = x * 1103515245u + 12345u) >> 16);
    junk[0] = 0; /* never the magic */
    fd = raw_connect();
    raw_send(fd, junk, sizeof(junk));
    raw_expect_closed(fd, -1);
    expect_serving(1);

    expect_value(s, "keep", "k", 1); /* an established client kept its connection through all of it */
    close(idle);
    tc_store_free(s);
}
END_TEST

START_TEST(test_token)
{
    tc_store_server_stop(server);
    ck_ok(tc_store_server_start("127.0.0.1", 0, "s3cret", &server));
    port = tc_store_server_port(server);
    tcomms_store_t *s = client(port, "s3cret");
    ck_ok(tc_store_set(s, "k", "v", 1));
    tcomms_store_t *bad = NULL;
    ck_status(tc_store_connect("127.0.0.1", port, "s3creT", 2000, &bad), TCOMMS_ERR_PROTOCOL);
    ck_assert_ptr_null(bad);
    ck_status(tc_store_connect("127.0.0.1", port, "s3cret-longer", 2000, &bad), TCOMMS_ERR_PROTOCOL);
    ck_status(tc_store_connect("127.0.0.1", port, NULL, 2000, &bad), TCOMMS_ERR_PROTOCOL);
    ck_status(tc_store_connect("127.0.0.1", port, "", 2000, &bad), TCOMMS_ERR_PROTOCOL);
    int fd = raw_connect(); /* skipping HELLO */
    raw_header(fd, TC_STORE_MAGIC, TC_STORE_OP_GET, 1, 0);
    raw_send(fd, "k", 1);
    raw_expect_closed(fd, -1);
    fd = raw_connect();
    raw_header(fd, TC_STORE_MAGIC, TC_STORE_OP_NUM_KEYS, 0, 0);
    raw_expect_closed(fd, TC_STORE_REFUSED);
    expect_value(s, "k", "v", 1);
    ck_assert_int_eq(num_keys(s), 1);
    tc_store_free(s);
    /* A server without a token takes any HELLO. */
    tc_store_server_t *open = NULL;
    ck_ok(tc_store_server_start("127.0.0.1", 0, NULL, &open));
    s = client(tc_store_server_port(open), "whatever");
    ck_assert_int_eq(num_keys(s), 0);
    tc_store_free(s);
    tc_store_server_stop(open);
}
END_TEST

static void *stop_later(void *arg)
{
    msleep(150);
    tc_store_server_stop(arg);
    return NULL;
}

START_TEST(test_server_gone)
{
    tcomms_store_t *s = client(port, NULL);
    ck_ok(tc_store_set(s, "k", "v", 1));
    pthread_t th;
    pthread_create(&th, NULL, stop_later, server);
    server = NULL;
    const char *keys[] = {"never"};
    uint64_t t0 = ms_now();
    ck_status(tc_store_wait(s, keys, 1, 20000), TCOMMS_ERR_REMOTE); /* a parked WAIT learns of the loss at once */
    ck_assert_uint_lt(ms_now() - t0, 5000);
    char where[64];
    snprintf(where, sizeof(where), "127.0.0.1:%d", port);
    ck_assert_ptr_nonnull(strstr(tcomms_last_error(), where));
    pthread_join(th, NULL);
    ck_status(tc_store_set(s, "k", "v", 1), TCOMMS_ERR_REMOTE);
    ck_assert_ptr_nonnull(strstr(tcomms_last_error(), where));
    tc_store_free(s);
}
END_TEST

static void *linger_stop(void *arg)
{
    tc_store_server_linger(arg, 400);
    return NULL;
}

/* A lingering stop keeps serving a connected client (requests during the linger succeed, a parked WAIT is
 * answered) and ends at its deadline while the client stays connected; later requests find the store gone. */
START_TEST(test_server_linger)
{
    tcomms_store_t *s = client(port, NULL), *other = client(port, NULL);
    pthread_t th;
    pthread_create(&th, NULL, linger_stop, server);
    server = NULL;
    msleep(100);
    ck_ok(tc_store_set(s, "during", "v", 1));
    ck_ok(tc_store_set(other, "k", "v", 1));
    tc_store_free(other);       /* one client gone: the server goes on for the one left */
    const char *keys[] = {"k"}; /* answered from the table while lingering */
    ck_ok(tc_store_wait(s, keys, 1, 5000));
    pthread_join(th, NULL);     /* returns at the deadline: `s` never disconnected */
    ck_status(tc_store_set(s, "after", "v", 1), TCOMMS_ERR_REMOTE);
    tc_store_free(s);
}
END_TEST

START_TEST(test_invalid_args)
{
    tcomms_store_t *s = client(port, NULL);
    char longkey[TC_STORE_MAX_KEY + 2];
    memset(longkey, 'a', sizeof(longkey) - 1);
    longkey[sizeof(longkey) - 1] = '\0';
    void *v;
    size_t len;
    int64_t n;
    ck_status(tc_store_set(NULL, "k", "v", 1), TCOMMS_ERR_INVALID_ARG);
    ck_status(tc_store_set(s, NULL, "v", 1), TCOMMS_ERR_INVALID_ARG);
    ck_status(tc_store_set(s, longkey, "v", 1), TCOMMS_ERR_INVALID_ARG);
    ck_status(tc_store_set(s, "k", NULL, 4), TCOMMS_ERR_INVALID_ARG);
    ck_status(tc_store_set(s, "k", "v", (size_t)TC_STORE_MAX_VALUE + 1), TCOMMS_ERR_INVALID_ARG);
    ck_status(tc_store_get(s, "k", NULL, &len, 0), TCOMMS_ERR_INVALID_ARG);
    ck_status(tc_store_get(s, "k", &v, NULL, 0), TCOMMS_ERR_INVALID_ARG);
    const char *keys[] = {"a", NULL};
    ck_status(tc_store_wait(s, keys, 2, 0), TCOMMS_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tcomms_last_error(), "keys[1]"));
    ck_status(tc_store_wait(s, NULL, 1, 0), TCOMMS_ERR_INVALID_ARG);
    ck_status(tc_store_wait(s, keys, (size_t)TC_STORE_MAX_KEYS + 1, 0), TCOMMS_ERR_INVALID_ARG);
    ck_ok(tc_store_wait(s, NULL, 0, 0));
    ck_status(tc_store_num_keys(s, NULL), TCOMMS_ERR_INVALID_ARG);
    ck_status(tc_store_del_prefix(s, NULL), TCOMMS_ERR_INVALID_ARG);
    ck_status(tc_store_add(s, longkey, 1, &n), TCOMMS_ERR_INVALID_ARG);
    ck_assert_int_eq(num_keys(s), 0); /* nothing reached the server */
    tc_store_free(s);
    tc_store_free(NULL);
    tc_store_server_stop(NULL);
    tc_store_server_t *srv = NULL;
    ck_status(tc_store_server_start(NULL, 70000, NULL, &srv), TCOMMS_ERR_INVALID_ARG);
    ck_status(tc_store_server_start(NULL, 0, NULL, NULL), TCOMMS_ERR_INVALID_ARG);
    ck_status(tc_store_connect(NULL, port, NULL, 100, &s), TCOMMS_ERR_INVALID_ARG);
    ck_status(tc_store_connect("127.0.0.1", 0, NULL, 100, &s), TCOMMS_ERR_INVALID_ARG);
    ck_status(tc_store_connect("127.0.0.1", port, NULL, 100, NULL), TCOMMS_ERR_INVALID_ARG);
}
END_TEST

/* ---- the user-callback adapter over an in-memory reference store --------------------------------------------- */

#define MEM_MAX 32

typedef struct mem_store {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int n;
    char *keys[MEM_MAX];
    unsigned char *vals[MEM_MAX];
    size_t lens[MEM_MAX];
    int small_gets; /* get calls that found the buffer too small */
} mem_store_t;

static int mem_find(mem_store_t *m, const char *key)
{
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->keys[i], key) == 0)
            return i;
    return -1;
}

static void mem_put(mem_store_t *m, const char *key, const void *value, size_t len)
{
    int i = mem_find(m, key);
    if (i < 0) {
        ck_assert_int_lt(m->n, MEM_MAX);
        i = m->n++;
        m->keys[i] = strdup(key);
        m->vals[i] = NULL;
    }
    free(m->vals[i]);
    m->vals[i] = malloc(len + 1);
    memcpy(m->vals[i], value, len);
    m->lens[i] = len;
    pthread_cond_broadcast(&m->changed);
}

static tcomms_status_t mem_set(void *ctx, const char *key, const void *value, size_t len)
{
    mem_store_t *m = ctx;
    pthread_mutex_lock(&m->lock);
    mem_put(m, key, value, len);
    pthread_mutex_unlock(&m->lock);
    return TCOMMS_SUCCESS;
}

static tcomms_status_t mem_get(void *ctx, const char *key, void *buf, size_t cap, size_t *len)
{
    mem_store_t *m = ctx;
    tcomms_status_t st = TCOMMS_ERR_NOT_FOUND;
    pthread_mutex_lock(&m->lock);
    int i = mem_find(m, key);
    if (i >= 0) {
        *len = m->lens[i];
        st = cap < m->lens[i] ? TCOMMS_ERR_INVALID_ARG : TCOMMS_SUCCESS;
        if (st == TCOMMS_SUCCESS)
            memcpy(buf, m->vals[i], m->lens[i]);
        else
            m->small_gets++;
    }
    pthread_mutex_unlock(&m->lock);
    return st;
}

static tcomms_status_t mem_wait(void *ctx, const char *const *keys, size_t nkeys, uint32_t timeout_ms)
{
    mem_store_t *m = ctx;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    tcomms_status_t st = TCOMMS_SUCCESS;
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < nkeys && st == TCOMMS_SUCCESS; i++)
        while (mem_find(m, keys[i]) < 0 && st == TCOMMS_SUCCESS)
            if (pthread_cond_timedwait(&m->changed, &m->lock, &until) == ETIMEDOUT)
                st = TCOMMS_ERR_TIMEOUT;
    pthread_mutex_unlock(&m->lock);
    return st;
}

static tcomms_status_t mem_add(void *ctx, const char *key, int64_t delta, int64_t *result)
{
    mem_store_t *m = ctx;
    pthread_mutex_lock(&m->lock);
    int i = mem_find(m, key);
    int64_t v = 0;
    if (i >= 0)
        memcpy(&v, m->vals[i], sizeof(v));
    v += delta;
    mem_put(m, key, &v, sizeof(v));
    pthread_mutex_unlock(&m->lock);
    *result = v;
    return TCOMMS_SUCCESS;
}

static tcomms_status_t mem_del(void *ctx, const char *key)
{
    mem_store_t *m = ctx;
    pthread_mutex_lock(&m->lock);
    int i = mem_find(m, key);
    if (i >= 0) {
        free(m->keys[i]);
        free(m->vals[i]);
        m->n--;
        m->keys[i] = m->keys[m->n];
        m->vals[i] = m->vals[m->n];
        m->lens[i] = m->lens[m->n];
    }
    pthread_mutex_unlock(&m->lock);
    return TCOMMS_SUCCESS;
}

static void mem_free(mem_store_t *m)
{
    for (int i = 0; i < m->n; i++) {
        free(m->keys[i]);
        free(m->vals[i]);
    }
}

static const tcomms_store_ops_t mem_ops = {mem_set, mem_get, mem_wait, mem_add, mem_del};

START_TEST(test_user_ops)
{
    mem_store_t m = {.lock = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER};
    tcomms_store_t *s = NULL;
    ck_ok(tc_store_from_ops(&mem_ops, &m, &s));
    ck_ok(tc_store_set(s, "k", "v\0w", 3));
    expect_value(s, "k", "v\0w", 3);
    ck_assert_int_eq(m.small_gets, 0);
    size_t n = 5000; /* longer than any first guess of the adapter */
    char *big = malloc(n);
    for (size_t i = 0; i < n; i++)
        big[i] = (char)pattern_byte(i);
    ck_ok(tc_store_set(s, "big", big, n));
    expect_value(s, "big", big, n);
    ck_assert_int_ge(m.small_gets, 1); /* the regrow path ran */
    free(big);

    const char *keys[] = {"k", "absent"};
    ck_status(tc_store_wait(s, keys, 2, 100), TCOMMS_ERR_TIMEOUT);
    ck_assert_ptr_nonnull(strstr(tcomms_last_error(), "absent"));
    ck_ok(tc_store_wait(s, keys, 1, 100));

    int64_t r = 0;
    ck_ok(tc_store_add(s, "c", 5, &r));
    ck_ok(tc_store_add(s, "c", 3, &r));
    ck_assert_int_eq(r, 8);
    ck_ok(tc_store_del(s, "k"));
    ck_assert_int_eq(mem_find(&m, "k"), -1);
    void *v = NULL;
    size_t len;
    ck_status(tc_store_get(s, "k", &v, &len, 0), TCOMMS_ERR_TIMEOUT);
    ck_status(tc_store_del_prefix(s, "b"), TCOMMS_ERR_NOT_SUPPORTED);
    int64_t count;
    ck_status(tc_store_num_keys(s, &count), TCOMMS_ERR_NOT_SUPPORTED);
    tc_store_free(s);
    mem_free(&m);
}
END_TEST

START_TEST(test_user_ops_null_callbacks)
{
    mem_store_t m = {.lock = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER};
    tcomms_store_t *s = NULL;
    const char *names[] = {"set", "get", "wait"};
    for (int i = 0; i < 3; i++) {
        tcomms_store_ops_t ops = mem_ops;
        if (i == 0)
            ops.set = NULL;
        else if (i == 1)
            ops.get = NULL;
        else
            ops.wait = NULL;
        ck_status(tc_store_from_ops(&ops, &m, &s), TCOMMS_ERR_INVALID_ARG);
        ck_assert_ptr_null(s);
        char want[32];
        snprintf(want, sizeof(want), "ops->%s", names[i]);
        ck_assert_ptr_nonnull(strstr(tcomms_last_error(), want));
    }
    ck_status(tc_store_from_ops(NULL, &m, &s), TCOMMS_ERR_INVALID_ARG);
    tcomms_store_ops_t minimal = {.set = mem_set, .get = mem_get, .wait = mem_wait};
    ck_ok(tc_store_from_ops(&minimal, &m, &s));
    int64_t r;
    ck_status(tc_store_add(s, "c", 1, &r), TCOMMS_ERR_NOT_SUPPORTED);
    ck_status(tc_store_del(s, "c"), TCOMMS_ERR_NOT_SUPPORTED);
    ck_ok(tc_store_set(s, "x", "1", 1));
    expect_value(s, "x", "1", 1);
    tc_store_free(s);
    mem_free(&m);
}
END_TEST

int main(void)
{
    Suite *suite = suite_create("store");
    TCase *tcp = tcase_create("tcp");
    tcase_add_checked_fixture(tcp, setup, teardown);
    tcase_set_timeout(tcp, 20);
    tcase_add_test(tcp, test_roundtrip);
    tcase_add_test(tcp, test_many_keys);
    tcase_add_test(tcp, test_binary_and_empty);
    tcase_add_test(tcp, test_large_value);
    tcase_add_test(tcp, test_wait_timeout);
    tcase_add_test(tcp, test_wait_satisfied_by_other_client);
    tcase_add_test(tcp, test_concurrent_add);
    tcase_add_test(tcp, test_add_semantics);
    tcase_add_test(tcp, test_connect_retry);
    tcase_add_test(tcp, test_connect_no_server);
    tcase_add_test(tcp, test_dual_stack_default_bind);
    tcase_add_test(tcp, test_malformed_requests);
    tcase_add_test(tcp, test_token);
    tcase_add_test(tcp, test_server_gone);
    tcase_add_test(tcp, test_server_linger);
    tcase_add_test(tcp, test_invalid_args);
    suite_add_tcase(suite, tcp);
    TCase *user = tcase_create("user_ops");
    tcase_set_timeout(user, 20);
    tcase_add_test(user, test_user_ops);
    tcase_add_test(user, test_user_ops_null_callbacks);
    suite_add_tcase(suite, user);

    return check_run(suite);
}
