/* SPDX-License-Identifier: BSD-3-Clause */
/* A rank's first connection to the built-in store is reset: rank 0's previous server, stopping after its last client
 * left, closes its listening socket with this rank's new connection still in the backlog. Here rank 0 stands in for
 * that server with a plain listener that reads the hello and resets the connection (SO_LINGER 0), then creates the
 * communicator, serving the real store on the same port: rank 1's creation must retry and succeed. */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <tcomms/tcomms.h>
#include <unistd.h>

#include "mrank.h"

#define WAIT_MS 10000

static int listen_loopback(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 4) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Accept one client, wait for its first bytes, reset it and stop listening. 0 when a reset was sent. */
static int reset_one(int lfd)
{
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    if (poll(&p, 1, WAIT_MS) != 1)
        return -1;
    int c = accept(lfd, NULL, NULL);
    if (c < 0)
        return -1;
    char buf[64];
    p = (struct pollfd){.fd = c, .events = POLLIN};
    int got = poll(&p, 1, WAIT_MS) == 1 && read(c, buf, sizeof buf) > 0;
    struct linger hard = {1, 0};
    setsockopt(c, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
    close(c);
    return got ? 0 : -1;
}

static int reset_rank(int rank, int size, void *arg)
{
    volatile int *barrier = arg;
    const char *port_env = getenv("TCOMMS_MASTER_PORT");
    int lfd = -1;
    if (rank == 0 && (port_env == NULL || (lfd = listen_loopback(atoi(port_env))) < 0))
        return mrank_failf("FAIL rank 0: cannot listen on TCOMMS_MASTER_PORT %s", port_env ? port_env : "(unset)");
    if (mrank_host_barrier(barrier, size, 1, 30) != 0)
        return mrank_failf("FAIL rank %d: host barrier", rank);
    if (rank == 0) {
        int reset = reset_one(lfd);
        close(lfd);
        if (reset != 0)
            return mrank_failf("FAIL rank 0: rank 1 never sent a hello to the stand-in server");
    }
    tcomms_comm_params_t p = {0};
    p.field_mask = TCOMMS_COMM_PARAM_TIMEOUT;
    p.timeout_ms = 20000;
    tcomms_comm_t *comm = NULL;
    tcomms_status_t st = tcomms_comm_create(&p, &comm);
    if (st != TCOMMS_SUCCESS)
        return mrank_failf("FAIL rank %d: tcomms_comm_create after a reset store connection: %s (%s)", rank,
                           tcomms_strerror(st), tcomms_last_error());
    int v = rank + 1, fails = 0;
    st = tcomms_all_reduce(comm, &v, &v, 1, TCOMMS_INT32, TCOMMS_SUM, NULL, NULL);
    if (st != TCOMMS_SUCCESS || v != size * (size + 1) / 2)
        fails += mrank_failf("FAIL rank %d: all_reduce gave %d (%s), expected %d", rank, v, tcomms_strerror(st),
                             size * (size + 1) / 2);
    if ((st = tcomms_comm_destroy(comm)) != TCOMMS_SUCCESS)
        fails += mrank_failf("FAIL rank %d: destroy: %s", rank, tcomms_strerror(st));
    return fails;
}

START_TEST(creation_retries_after_a_reset)
{
    void *shared = mrank_shared_alloc(4096);
    ck_assert_ptr_nonnull(shared);
    int failing = mrank_run(2, reset_rank, shared, 60);
    mrank_shared_free(shared, 4096);
    ck_assert_msg(failing == 0, "%d rank(s) failed (see stderr)", failing);
}
END_TEST

static void add_tests(Suite *s, int nbackends)
{
    (void)nbackends; /* the library's default backend */
    tcase_add_test(mrank_tcase(s, "reset", 90), creation_retries_after_a_reset);
}

int main(void)
{
    return mrank_main("store_reset", MRANK_ANY, add_tests);
}
