/* SPDX-License-Identifier: BSD-3-Clause */
/* A job whose store port is flooded by strangers (issue 24, point 4), on 2 ranks of every CPU backend, with a token
 * and without: rank 0 runs with a descriptor limit of 512, rank 1 opens 600 idle connections to rank 0's store and
 * keeps them open. Rank 0 must keep descriptors to spare, the job's next split and its collectives must work, and
 * rank 0's last destroy must not wait for the strangers. The store's own limits are tested in test_store_guard. */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <tcomms/tcomms.h>
#include <unistd.h>

#include "mrank.h"

#define NOFILE 512
#define STRANGERS 600
#define TIMEOUT_MS 8000u
#define JOB_S 60

typedef struct shared {
    int backend;
    int counter;       /* mrank_host_barrier */
    int rank0_done;    /* rank 0 returned from its last destroy: the strangers may go */
    double destroy_s;  /* how long that destroy took */
} shared_t;

static int fail_st(int rank, const char *call, tcomms_status_t st)
{
    return mrank_failf("FAIL rank %d: %s returned %s (%s)", rank, call, tcomms_strerror(st), tcomms_last_error());
}

/* Idle connections to the store; returns how many connected (the fds go into `fds`). */
static int flood(int port, int *fds, int n)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = 0;
    for (int i = 0; i < n; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fds[i] >= 0 && connect(fds[i], (struct sockaddr *)&a, sizeof(a)) == 0)
            ok++;
    }
    return ok;
}

/* Split the whole job, all_reduce on the child and check the sum against the closed form. */
static int split_and_reduce(tcomms_comm_t *root, int rank, int size)
{
    int ranks[2] = {0, 1}, fails = 0;
    tcomms_comm_t *child = NULL;
    tcomms_status_t st = tcomms_comm_split(root, ranks, size, "after-flood", NULL, &child);
    if (st != TCOMMS_SUCCESS)
        return fail_st(rank, "tcomms_comm_split after the flood", st);
    int v[64];
    for (int i = 0; i < 64; i++)
        v[i] = (rank + 1) * (i + 1);
    st = tcomms_all_reduce(child, v, v, 64, TCOMMS_INT32, TCOMMS_SUM, NULL, NULL);
    if (st != TCOMMS_SUCCESS)
        fails += fail_st(rank, "tcomms_all_reduce on the child", st);
    for (int i = 0; st == TCOMMS_SUCCESS && i < 64 && !fails; i++)
        if (v[i] != size * (size + 1) / 2 * (i + 1))
            fails += mrank_failf("FAIL rank %d: all_reduce element %d is %d, expected %d", rank, i, v[i],
                                 size * (size + 1) / 2 * (i + 1));
    if ((st = tcomms_comm_destroy(child)) != TCOMMS_SUCCESS)
        fails += fail_st(rank, "tcomms_comm_destroy(child)", st);
    return fails;
}

static int flood_rank(int rank, int size, void *arg)
{
    shared_t *sh = arg;
    int fails = 0, port = atoi(getenv("TCOMMS_MASTER_PORT"));
    struct rlimit rl;
    if (rank == 0 && (getrlimit(RLIMIT_NOFILE, &rl) != 0 || (rl.rlim_cur = NOFILE, setrlimit(RLIMIT_NOFILE, &rl)) != 0))
        return mrank_failf("FAIL rank 0: cannot lower RLIMIT_NOFILE to %d", NOFILE);
    tcomms_comm_params_t p = {0};
    p.field_mask = TCOMMS_COMM_PARAM_BACKEND | TCOMMS_COMM_PARAM_TIMEOUT;
    p.backend = mrank_backend(sh->backend);
    p.timeout_ms = TIMEOUT_MS;
    tcomms_comm_t *root = NULL;
    tcomms_status_t st = tcomms_comm_create(&p, &root);
    if (st != TCOMMS_SUCCESS)
        return fail_st(rank, "tcomms_comm_create", st);
    static int strangers[STRANGERS];
    if (rank == 1) {
        int n = flood(port, strangers, STRANGERS);
        if (n != STRANGERS)
            fails += mrank_failf("FAIL rank 1: only %d of %d stranger connections connected", n, STRANGERS);
        mrank_sleep_ms(500); /* let rank 0 see them all */
    }
    if (mrank_host_barrier(&sh->counter, size, 1, 30) != 0)
        return fails + mrank_failf("FAIL rank %d: host barrier after the flood", rank);
    if (rank == 0) { /* the store holds at most half the limit: the rest of rank 0 still has room */
        int open_fds = mrank_count_fds(); /* -1: not even /proc/self/fd could be opened */
        if (open_fds < 0 || open_fds > NOFILE * 3 / 4)
            fails += mrank_failf("FAIL rank 0: %d of its %d descriptors in use after %d strangers connected",
                                 open_fds < 0 ? NOFILE : open_fds, NOFILE, STRANGERS);
    }
    fails += split_and_reduce(root, rank, size);
    double t0 = mrank_now();
    if ((st = tcomms_comm_destroy(root)) != TCOMMS_SUCCESS)
        fails += fail_st(rank, "tcomms_comm_destroy(root)", st);
    if (rank == 0) {
        sh->destroy_s = mrank_now() - t0;
        __atomic_store_n(&sh->rank0_done, 1, __ATOMIC_SEQ_CST);
        if (sh->destroy_s > TIMEOUT_MS / 2000.0)
            fails += mrank_failf("FAIL rank 0: its last destroy took %.1f s with only strangers left connected "
                                 "(timeout %.0f s)", sh->destroy_s, TIMEOUT_MS / 1000.0);
    } else {
        for (double end = mrank_now() + 20; !__atomic_load_n(&sh->rank0_done, __ATOMIC_SEQ_CST) && mrank_now() < end;)
            mrank_sleep_ms(10);
        for (int i = 0; i < STRANGERS; i++)
            if (strangers[i] >= 0)
                close(strangers[i]);
    }
    return fails;
}

static void run(int backend, const char *token)
{
    if (token != NULL)
        setenv("TCOMMS_STORE_TOKEN", token, 1);
    else
        unsetenv("TCOMMS_STORE_TOKEN");
    shared_t *sh = mrank_shared_alloc(sizeof(*sh));
    ck_assert_ptr_nonnull(sh);
    sh->backend = backend;
    int failing = mrank_run(2, flood_rank, sh, JOB_S);
    mrank_shared_free(sh, sizeof(*sh));
    ck_assert_msg(failing == 0, "%s, %s: %d rank(s) failed (see stderr)", mrank_backend(backend),
                  token ? "token" : "no token", failing);
}

START_TEST(test_flood_with_token)
{
    run(_i, "flood-test-token");
}
END_TEST

START_TEST(test_flood_without_token)
{
    run(_i, NULL);
}
END_TEST

static void add_tests(Suite *s, int nbackends)
{
    TCase *tc = mrank_tcase(s, "flood", JOB_S + 30);
    tcase_add_loop_test(tc, test_flood_with_token, 0, nbackends);
    tcase_add_loop_test(tc, test_flood_without_token, 0, nbackends);
}

int main(void)
{
    return mrank_main("store_flood", MRANK_BACKEND, add_tests);
}
