/* SPDX-License-Identifier: BSD-3-Clause */
/* The store server against strangers (lib/store/server.c, lib/store/request.c): connections that never say HELLO,
 * floods of them, a client storing without bound, wrong tokens by the hundred, and a last destroy that must not wait
 * for any of them. Limits come from the TCOMMS_STORE_* variables, set before each server starts; every check is
 * made from outside (what the sockets see, the process's descriptors, stderr). tests/test_store.c has the protocol. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check_run.h"
#include "mrank.h"
#include "store/store.h"

#define ck_ok(expr)                                                                                                   \
    do {                                                                                                              \
        tcomms_status_t st_ = (expr);                                                                                 \
        ck_assert_msg(st_ == TCOMMS_SUCCESS, "%s -> %d: %s", #expr, (int)st_, tcomms_last_error());                   \
    } while (0)

#define TOKEN "guard-token"
#define MIB (1u << 20)

static tc_store_server_t *server;
static int port;

static void teardown(void)
{
    tc_store_server_stop(server);
    server = NULL;
}

static uint64_t ms_now(void)
{
    return (uint64_t)(mrank_now() * 1000.0);
}

/* Start the server after setting the limits under test (NULL: the variable is left unset). */
static void start(const char *token, const char *handshake_ms, const char *max_pending, const char *max_conns,
                  const char *max_bytes)
{
    const char *names[] = {"TCOMMS_STORE_HANDSHAKE_MS", "TCOMMS_STORE_MAX_PENDING", "TCOMMS_STORE_MAX_CONNS",
                           "TCOMMS_STORE_MAX_BYTES"};
    const char *values[] = {handshake_ms, max_pending, max_conns, max_bytes};
    for (int i = 0; i < 4; i++) {
        if (values[i] != NULL)
            setenv(names[i], values[i], 1);
        else
            unsetenv(names[i]);
    }
    ck_ok(tc_store_server_start("127.0.0.1", 0, token, &server));
    port = tc_store_server_port(server);
}

static tcomms_store_t *client(const char *token)
{
    tcomms_store_t *s = NULL;
    ck_ok(tc_store_connect("127.0.0.1", port, token, 5000, &s));
    return s;
}

/* A connected socket that sends nothing. */
static int idle_socket(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_ge(fd, 0);
    ck_assert_msg(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0, "connect: %s", strerror(errno));
    return fd;
}

/* The server closed this socket (EOF or reset). Never blocks. */
static int closed_by_server(int fd)
{
    char b;
    ssize_t n = recv(fd, &b, 1, MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* Wait up to `ms` for the server to close fd; 1 when it did. */
static int closed_within(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    return poll(&p, 1, ms) == 1 && closed_by_server(fd);
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    if (d != NULL)
        closedir(d);
    return n - 1; /* the directory's own descriptor */
}

static void roundtrip(tcomms_store_t *s, const char *key)
{
    void *v = NULL;
    size_t len = 0;
    ck_ok(tc_store_set(s, key, key, strlen(key)));
    ck_ok(tc_store_get(s, key, &v, &len, 1000));
    ck_assert_uint_eq(len, strlen(key));
    ck_assert(memcmp(v, key, len) == 0);
    free(v);
}

/* A connection that never authenticates is closed after the handshake deadline, with a token or without; one that
 * did stays however long it idles. */
START_TEST(test_handshake_deadline)
{
    start(_i ? TOKEN : NULL, "300", NULL, NULL, NULL);
    tcomms_store_t *s = client(_i ? TOKEN : NULL);
    int idle = idle_socket();
    uint64_t t0 = ms_now();
    ck_assert_msg(closed_within(idle, 3000), "an idle connection was still open after 3000 ms (deadline 300 ms)");
    ck_assert_uint_ge(ms_now() - t0, 200);
    close(idle);
    mrank_sleep_ms(400);
    roundtrip(s, "still-here"); /* admitted long before, idle past the deadline */
    tc_store_free(s);
}
END_TEST

/* A few hundred idle connections: the server keeps at most TCOMMS_STORE_MAX_PENDING of them, closing the oldest,
 * and a client of the job still gets in. Counted from outside: sockets the server closed, and this process's
 * descriptors (the server's side of each connection it holds is one of them). */
START_TEST(test_pending_cap)
{
    enum { N = 300, CAP = 16 };
    start(TOKEN, "60000", "16", NULL, NULL);
    int before = count_fds();
    int fds[N], closed = 0;
    for (int i = 0; i < N; i++)
        fds[i] = idle_socket();
    for (uint64_t end = ms_now() + 5000; ms_now() < end && closed < N - CAP; mrank_sleep_ms(20)) {
        closed = 0;
        for (int i = 0; i < N; i++)
            closed += closed_by_server(fds[i]);
    }
    int held = count_fds() - before - N;
    ck_assert_msg(closed >= N - CAP, "the server closed %d of %d idle connections; at most %d may stay", closed, N,
                  CAP);
    ck_assert_msg(held <= CAP, "the server holds %d descriptors for idle connections, over the cap of %d", held, CAP);
    tcomms_store_t *s = client(TOKEN); /* the strangers are still connected: the newcomer takes an old one's place */
    roundtrip(s, "got-in");
    tc_store_free(s);
    for (int i = 0; i < N; i++)
        close(fds[i]);
}
END_TEST

/* Without a token every well-formed request admits its client, so TCOMMS_STORE_MAX_CONNS refuses newcomers once
 * that many are in; a place freed is taken again. */
START_TEST(test_conn_cap)
{
    enum { CAP = 8 };
    start(NULL, NULL, NULL, "8", NULL);
    tcomms_store_t *in[CAP];
    for (int i = 0; i < CAP; i++)
        in[i] = client(NULL);
    tcomms_store_t *extra = NULL;
    tcomms_status_t st = tc_store_connect("127.0.0.1", port, NULL, 1000, &extra);
    ck_assert_msg(st != TCOMMS_SUCCESS, "a client beyond TCOMMS_STORE_MAX_CONNS=%d got in", CAP);
    ck_assert_ptr_null(extra);
    for (int i = 0; i < CAP; i++) {
        char key[16];
        snprintf(key, sizeof(key), "c%d", i);
        roundtrip(in[i], key);
    }
    tc_store_free(in[0]);
    mrank_sleep_ms(100);
    in[0] = client(NULL);
    roundtrip(in[0], "again");
    for (int i = 0; i < CAP; i++)
        tc_store_free(in[i]);
}
END_TEST

/* SET stops at TCOMMS_STORE_MAX_BYTES with TCOMMS_ERR_NO_MEMORY naming the variable; the connection stays usable,
 * small requests still work on a full store, and deleting makes room again. 4 MiB holds three values of 1 MiB with
 * their keys and entries, not four. */
START_TEST(test_byte_budget)
{
    start(NULL, NULL, NULL, NULL, "4194304");
    tcomms_store_t *s = client(NULL);
    unsigned char *big = malloc(MIB);
    ck_assert_ptr_nonnull(big);
    int stored = 0;
    tcomms_status_t st = TCOMMS_SUCCESS;
    for (int i = 0; i < 10 && st == TCOMMS_SUCCESS; i++) {
        char key[8];
        snprintf(key, sizeof(key), "v%d", i);
        memset(big, 'a' + i, MIB);
        st = tc_store_set(s, key, big, MIB);
        stored += st == TCOMMS_SUCCESS;
    }
    ck_assert_msg(stored == 3, "%d values of 1 MiB stored under a 4 MiB budget, expected 3", stored);
    ck_assert_int_eq(st, TCOMMS_ERR_NO_MEMORY);
    ck_assert_msg(strstr(tcomms_last_error(), "TCOMMS_STORE_MAX_BYTES") != NULL, "message: %s", tcomms_last_error());
    int64_t keys = -1;
    ck_ok(tc_store_num_keys(s, &keys));
    ck_assert_int_eq(keys, 3);
    void *v = NULL;
    size_t len = 0;
    ck_ok(tc_store_get(s, "v1", &v, &len, 1000));
    ck_assert_uint_eq(len, MIB);
    ck_assert_int_eq(((unsigned char *)v)[MIB - 1], 'b');
    free(v);
    ck_ok(tc_store_del(s, "v0"));
    ck_ok(tc_store_set(s, "v3", big, MIB));
    free(big);
    tc_store_free(s);
}
END_TEST

/* The last destroy's linger waits for the clients that authenticated, not for a stranger that never did. */
START_TEST(test_linger_ignores_strangers)
{
    start(TOKEN, "60000", NULL, NULL, NULL);
    int idle = idle_socket();
    tcomms_store_t *s = client(TOKEN);
    roundtrip(s, "k");
    tc_store_free(s);
    uint64_t t0 = ms_now();
    tc_store_server_linger(server, 8000);
    server = NULL;
    uint64_t took = ms_now() - t0;
    ck_assert_msg(took < 2000, "the linger took %llu ms with only a stranger connected", (unsigned long long)took);
    close(idle);
}
END_TEST

/* Two hundred wrong tokens: stderr gets the first few refusals and one line counting the rest, not 200 lines. */
START_TEST(test_refusal_log_rate)
{
    enum { N = 200 };
    char path[] = "/tmp/tcomms-store-guard.XXXXXX";
    int log_fd = mkstemp(path);
    ck_assert_int_ge(log_fd, 0);
    unlink(path);
    int saved = dup(2);
    setenv("TCOMMS_LOG_LEVEL", "warn", 1);
    unsetenv("TCOMMS_STORE_LOG_LEVEL");
    start(TOKEN, NULL, NULL, NULL, NULL);
    dup2(log_fd, 2);
    for (int i = 0; i < N; i++) {
        tcomms_store_t *bad = NULL;
        tcomms_status_t st = tc_store_connect("127.0.0.1", port, "wrong", 2000, &bad);
        if (st != TCOMMS_ERR_PROTOCOL) {
            dup2(saved, 2);
            ck_abort_msg("a wrong token gave %d: %s", (int)st, tcomms_last_error());
        }
    }
    tc_store_server_stop(server); /* reports what it has not logged yet */
    server = NULL;
    dup2(saved, 2);
    close(saved);
    char text[65536];
    ssize_t n = pread(log_fd, text, sizeof(text) - 1, 0);
    close(log_fd);
    text[n > 0 ? n : 0] = '\0';
    int lines = 0, refusals = 0;
    unsigned long long counted = 0;
    for (char *line = text, *nl; (nl = strchr(line, '\n')) != NULL; line = nl + 1) {
        *nl = '\0';
        lines++;
        refusals += strstr(line, "wrong token") != NULL && strstr(line, "more client") == NULL;
        const char *more = strstr(line, " more client");
        if (more != NULL) {
            while (more > line && more[-1] >= '0' && more[-1] <= '9')
                more--;
            counted += strtoull(more, NULL, 10);
        }
    }
    ck_assert_msg(lines <= 5, "%d lines on stderr for %d refused clients", lines, N);
    ck_assert_msg(refusals + counted == N, "%d refusals logged and %llu counted, expected %d in all", refusals,
                  counted, N);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("store_guard");
    TCase *tc = tcase_create("guard");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_handshake_deadline, 0, 2);
    tcase_add_test(tc, test_pending_cap);
    tcase_add_test(tc, test_conn_cap);
    tcase_add_test(tc, test_byte_budget);
    tcase_add_test(tc, test_linger_ignores_strangers);
    tcase_add_test(tc, test_refusal_log_rate);
    suite_add_tcase(s, tc);
    return check_run(s);
}
