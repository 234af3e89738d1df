/* SPDX-License-Identifier: BSD-3-Clause */
/* tcomms_comm_split and tcomms_comm_split_color on 4 ranks (disjoint lists, a subset with a non-member, nested
 * splits, colors with reversed keys, NOCOLOR, invalid lists), each child checked by rank, size and collectives whose
 * results depend on its members; splits after the rank serving the store destroyed its root; then split/destroy and
 * create/destroy cycles that must not leak fds or memory; a rank missing from a split_color gives the others a
 * timeout naming whom they waited for. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tcomms/tcomms.h>
#include <time.h>
#include <unistd.h>

#include "mrank.h"
#include "split_verify.h"

#define OP_TIMEOUT_MS 15000u
#define SHORT_TIMEOUT_MS 1500u
#define SPLIT_JOB_S 90
#define LEAK_JOB_S 240
#define SPLIT_CYCLES 200
#define ROOT_CYCLES 200
#define WARMUP 10
#define RSS_SLACK (4L << 20)

/* AddressSanitizer's quarantine keeps freed memory resident, so RSS says nothing about leaks under it (its own
 * leak checker does); fds are still checked. */
#if defined(__SANITIZE_ADDRESS__)
#define CHECK_RSS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CHECK_RSS 0
#endif
#endif
#ifndef CHECK_RSS
#define CHECK_RSS 1
#endif

/* Shared by the parent and the ranks of one job. */
typedef struct shared {
    int backend;
    int counter; /* for mrank_host_barrier */
    int port;    /* the master port of the next root communicator, chosen by rank 0 */
} shared_t;

static int in_list(const int *list, int n, int v)
{
    for (int k = 0; k < n; k++)
        if (list[k] == v)
            return 1;
    return 0;
}

/* Split by list; a member gets a verified child (returned), a non-member must get NULL. */
static int split_and_verify(tcomms_comm_t *parent, int parent_rank, int root_rank, const int *list, int n,
                            const int *members_root, const char *label, tcomms_comm_t **kept)
{
    int member = in_list(list, n, parent_rank);
    tcomms_comm_t *child = (tcomms_comm_t *)&child; /* must be overwritten */
    tcomms_status_t st = tcomms_comm_split(parent, member ? list : NULL, member ? n : 0, label, NULL, &child);
    if (st != TCOMMS_SUCCESS)
        return split_report(root_rank, label, "tcomms_comm_split", st);
    int fails = 0;
    if (!member) {
        if (child != NULL)
            fails += mrank_failf("FAIL rank %d, %s: a non-member got a communicator", root_rank, label);
        child = NULL;
    } else {
        fails += split_verify_child(child, root_rank, members_root, n, label);
    }
    if (kept)
        *kept = child;
    else if (child)
        tcomms_comm_destroy(child);
    return fails;
}

/* MPI-style split: members of my color ordered by (key, parent rank). keys[] and colors[] are per parent rank. */
static int split_color_and_verify(tcomms_comm_t *parent, int rank, int size, const int *colors, const int *keys,
                                  const char *label)
{
    tcomms_comm_t *child = (tcomms_comm_t *)&child;
    tcomms_status_t st = tcomms_comm_split_color(parent, colors[rank], keys[rank], label, NULL, &child);
    if (st != TCOMMS_SUCCESS)
        return split_report(rank, label, "tcomms_comm_split_color", st);
    if (colors[rank] == TCOMMS_SPLIT_NOCOLOR) {
        if (child == NULL)
            return 0;
        mrank_logf("FAIL rank %d, %s: NOCOLOR gave a communicator", rank, label);
        return 1;
    }
    int members[8], n = split_color_members(rank, size, colors, keys, members);
    int fails = split_verify_child(child, rank, members, n, label);
    tcomms_comm_destroy(child);
    return fails;
}

/* Lists that are wrong in the same way on every rank: each rank gets its own message at once, and the ranks stay in
 * step (each refused call still takes its split number). */
static int invalid_lists(tcomms_comm_t *root, int rank, int size)
{
    int unsorted[2] = {size - 1, rank == size - 1 ? 0 : rank};
    int dup[2] = {rank, rank};
    int high[2] = {rank, size};
    int negative[2] = {-1, rank};
    int missing[1] = {(rank + 1) % size};
    struct { const char *what; const int *list; int n; } cases[] = {
        {"unsorted list", unsorted, 2},      {"duplicate ranks", dup, 2},    {"rank >= size", high, 2},
        {"negative rank", negative, 2},      {"caller not in list", missing, 1}, {"nranks < 0", dup, -1},
        {"ranks NULL with nranks 2", NULL, 2},
    };
    int fails = 0;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tcomms_comm_t *child = NULL;
        tcomms_status_t st = tcomms_comm_split(root, cases[k].list, cases[k].n, "bad", NULL, &child);
        const char *msg = tcomms_last_error();
        if (st != TCOMMS_ERR_INVALID_ARG || !msg || !*msg)
            fails += mrank_failf("FAIL rank %d, split with %s: status %d (expected %d), message \"%s\"", rank,
                                cases[k].what, st, TCOMMS_ERR_INVALID_ARG, msg ? msg : "(null)");
        if (st == TCOMMS_SUCCESS && child)
            tcomms_comm_destroy(child);
    }
    return fails;
}

static tcomms_comm_t *create_root(const char *backend, int rank, int size, int port, uint32_t timeout_ms)
{
    tcomms_comm_params_t p = {0};
    p.field_mask = TCOMMS_COMM_PARAM_BACKEND | TCOMMS_COMM_PARAM_TIMEOUT;
    p.backend = backend;
    p.timeout_ms = timeout_ms;
    if (port > 0) {
        p.field_mask |= TCOMMS_COMM_PARAM_RANK | TCOMMS_COMM_PARAM_MASTER;
        p.rank = rank;
        p.size = size;
        p.local_rank = rank;
        p.master_addr = "127.0.0.1";
        p.master_port = port;
    }
    tcomms_comm_t *comm = NULL;
    tcomms_status_t st = tcomms_comm_create(&p, &comm);
    if (st != TCOMMS_SUCCESS) {
        split_report(rank, backend, "tcomms_comm_create", st);
        return NULL;
    }
    return comm;
}

static int split_rank(int rank, int size, void *arg)
{
    shared_t *sh = arg;
    tcomms_comm_t *root = create_root(mrank_backend(sh->backend), rank, size, 0, OP_TIMEOUT_MS);
    if (!root)
        return 1;
    static const int pair_a[] = {0, 1}, pair_b[] = {2, 3}, sub[] = {1, 2, 3}, nested[] = {0, 2}, nested_root[] = {1, 3};
    const int *pair = rank < 2 ? pair_a : pair_b;
    int fails = split_and_verify(root, rank, rank, pair, 2, pair, "pairs [0,1] [2,3]", NULL);
    tcomms_comm_t *subc = NULL;
    fails += split_and_verify(root, rank, rank, sub, 3, sub, "subset [1,2,3]", &subc);
    if (subc) /* nested: sub ranks [0,2] are root ranks [1,3]; sub rank 1 (root 2) is not a member */
        fails += split_and_verify(subc, rank - 1, rank, nested, 2, nested_root, "nested [0,2] of [1,2,3]", NULL);
    int colors[8] = {0}, keys[8] = {0};
    for (int r = 0; r < size; r++) {
        colors[r] = r % 2;
        keys[r] = size - r;
    }
    fails += split_color_and_verify(root, rank, size, colors, keys, "color rank%2, keys reversed");
    for (int r = 0; r < size; r++) {
        colors[r] = r == 3 ? TCOMMS_SPLIT_NOCOLOR : 7;
        keys[r] = r == 1 ? -5 : 0;
    }
    fails += split_color_and_verify(root, rank, size, colors, keys, "NOCOLOR on rank 3, rank 1 first");
    fails += invalid_lists(root, rank, size);
    /* the invalid calls must have left the ranks in step */
    static const int all[] = {0, 1, 2, 3};
    fails += split_verify_child(root, rank, all, 4, "root after invalid splits");
    /* parent and child are independent: destroy the parent first, then use the child */
    tcomms_comm_t *copy = NULL;
    fails += split_and_verify(root, rank, rank, all, 4, all, "copy of root", &copy);
    tcomms_status_t st = tcomms_comm_destroy(root);
    if (st != TCOMMS_SUCCESS)
        fails += split_report(rank, "destroy root before its children", "tcomms_comm_destroy", st);
    if (copy)
        fails += split_verify_child(copy, rank, all, 4, "child after its parent was destroyed");
    if (subc)
        fails += split_verify_child(subc, rank, sub, 3, "subset after its parent was destroyed");
    tcomms_comm_destroy(copy);
    tcomms_comm_destroy(subc);
    return fails;
}

/* ---- leaks ---------------------------------------------------------------------------------------------------- */

static long rss_bytes(void)
{
    long pages = -1, resident = -1;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return -1;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = -1;
    fclose(f);
    return resident < 0 ? -1 : resident * sysconf(_SC_PAGESIZE);
}

static int split_cycle(tcomms_comm_t *root, int rank, int verify)
{
    static const int both[] = {0, 1};
    tcomms_comm_t *child = NULL;
    tcomms_status_t st = tcomms_comm_split(root, both, 2, "cycle", NULL, &child);
    if (st != TCOMMS_SUCCESS)
        return split_report(rank, "split cycle", "tcomms_comm_split", st);
    int fails = verify ? split_verify_child(child, rank, both, 2, "split cycle") : 0;
    st = tcomms_comm_destroy(child);
    if (st != TCOMMS_SUCCESS)
        fails += split_report(rank, "split cycle", "tcomms_comm_destroy", st);
    return fails;
}

/* A fresh root on a port rank 0 picked, a split, and both destroyed. */
static int root_cycle(shared_t *sh, int rank, int size, int round)
{
    if (rank == 0)
        __atomic_store_n(&sh->port, mrank_free_port(), __ATOMIC_SEQ_CST);
    if (mrank_host_barrier(&sh->counter, size, round, 30) != 0) {
        mrank_logf("FAIL rank %d: the other rank did not reach root cycle %d", rank, round);
        return 1;
    }
    tcomms_comm_t *root = create_root(mrank_backend(sh->backend), rank, size,
                                      __atomic_load_n(&sh->port, __ATOMIC_SEQ_CST), OP_TIMEOUT_MS);
    if (!root)
        return 1;
    int fails = split_cycle(root, rank, round % 10 == 0);
    tcomms_status_t st = tcomms_comm_destroy(root);
    if (st != TCOMMS_SUCCESS)
        fails += split_report(rank, "root cycle", "tcomms_comm_destroy", st);
    return fails;
}

/* Sockets a destroy closes on other threads (the store server's linger until its peers disconnect, the flight
 * listener) may still be open for a moment when the cycles end, longer on a loaded machine: a leak stays, so the
 * count gets FD_SETTLE_S to come back down before it counts as one. */
#define FD_SETTLE_S 5.0

static int check_growth(int rank, const char *what, int fd0, long rss0, double t0)
{
    int fd1 = mrank_count_fds();
    for (double until = mrank_now() + FD_SETTLE_S; fd1 > fd0 && mrank_now() < until; fd1 = mrank_count_fds()) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    long rss1 = rss_bytes();
    int fails = 0;
    if (rank == 0)
        mrank_logf("test_split: %s: fds %d -> %d, RSS %+ld KiB, %.1f s", what, fd0, fd1, (rss1 - rss0) / 1024,
                   mrank_now() - t0);
    if (fd0 < 0 || fd1 < 0 || rss0 < 0 || rss1 < 0)
        fails += mrank_failf("FAIL rank %d: cannot read /proc/self", rank);
    if (fd1 > fd0)
        fails += mrank_failf("FAIL rank %d, %s: open fds grew from %d to %d", rank, what, fd0, fd1);
    if (CHECK_RSS && rss1 - rss0 > RSS_SLACK)
        fails += mrank_failf("FAIL rank %d, %s: RSS grew by %ld KiB", rank, what, (rss1 - rss0) >> 10);
    return fails;
}

/* The rank serving the store (rank 0) leaves first: right after a split that excludes it, it destroys its root,
 * while ranks 1 and 2 go on splitting their child through its store. Its destroy must keep the store serving
 * them until they disconnect (without that, their split finds the store gone). */
static int early_host_rank(int rank, int size, void *arg)
{
    shared_t *sh = arg;
    const char *label = "split after the store host destroyed its root";
    tcomms_comm_t *root = create_root(mrank_backend(sh->backend), rank, size, 0, OP_TIMEOUT_MS);
    tcomms_comm_t *child = NULL, *grandchild = NULL;
    if (!root)
        return 1;
    int fails = 0;
    tcomms_status_t st = tcomms_comm_split_color(root, rank == 0 ? TCOMMS_SPLIT_NOCOLOR : 1, rank, "late", NULL,
                                                 &child);
    if (st != TCOMMS_SUCCESS)
        fails += split_report(rank, label, "tcomms_comm_split_color", st);
    if (rank == 0) {
        if ((st = tcomms_comm_destroy(root)) != TCOMMS_SUCCESS)
            fails += split_report(rank, label, "tcomms_comm_destroy", st);
        return fails;
    }
    usleep(300 * 1000); /* rank 0 is in its destroy by now */
    if (!fails && (st = tcomms_comm_split_color(child, 0, rank, "later", NULL, &grandchild)) != TCOMMS_SUCCESS)
        fails += split_report(rank, label, "tcomms_comm_split_color of the child", st);
    static const int members[] = {1, 2};
    if (!fails)
        fails += split_verify_child(grandchild, rank, members, 2, label);
    tcomms_comm_t *all[] = {grandchild, child, root};
    for (int i = 0; i < 3; i++)
        if (all[i] != NULL && (st = tcomms_comm_destroy(all[i])) != TCOMMS_SUCCESS)
            fails += split_report(rank, label, "tcomms_comm_destroy", st);
    return fails;
}

/* A rank that never calls split_color: the others get TCOMMS_ERR_TIMEOUT within the timeout, not a hang, and
 * the message says whom they waited for (parent rank 0 collects the calls, so it names the missing rank; the
 * others name rank 0, or the missing rank when rank 0's verdict reached them before their own timeout). */
static int missing_rank(int rank, int size, void *arg)
{
    shared_t *sh = arg;
    const char *label = "split_color with a rank missing";
    tcomms_comm_t *root = create_root(mrank_backend(sh->backend), rank, size, 0, SHORT_TIMEOUT_MS), *child = NULL;
    if (!root)
        return 1;
    int fails = 0;
    if (rank != size - 1) {
        double t0 = mrank_now();
        tcomms_status_t st = tcomms_comm_split_color(root, 0, rank, "incomplete", NULL, &child);
        double took = mrank_now() - t0;
        const char *msg = tcomms_last_error();
        char want[64], alt[64];
        snprintf(want, sizeof(want), "parent rank %d", size - 1);
        snprintf(alt, sizeof(alt), "parent rank %d", rank == 0 ? size - 1 : 0);
        if (st != TCOMMS_ERR_TIMEOUT || child != NULL || msg == NULL ||
            (strstr(msg, want) == NULL && strstr(msg, alt) == NULL))
            fails += mrank_failf("FAIL rank %d, %s: status %d (expected %d), message \"%s\" (expected \"%s\" or "
                                 "\"%s\")", rank, label, st, TCOMMS_ERR_TIMEOUT, msg ? msg : "(null)", want, alt);
        if (took > SHORT_TIMEOUT_MS / 1000.0 + 2.0)
            fails += mrank_failf("FAIL rank %d, %s: took %.1f s (timeout %.1f s)", rank, label, took,
                                 SHORT_TIMEOUT_MS / 1000.0);
    }
    tcomms_status_t st = tcomms_comm_destroy(root);
    if (st != TCOMMS_SUCCESS)
        fails += split_report(rank, label, "tcomms_comm_destroy", st);
    return fails;
}

static int leak_rank(int rank, int size, void *arg)
{
    shared_t *sh = arg;
    tcomms_comm_t *root = create_root(mrank_backend(sh->backend), rank, size, 0, OP_TIMEOUT_MS);
    if (!root)
        return 1;
    int fails = 0;
    for (int c = 0; c < WARMUP && !fails; c++)
        fails += split_cycle(root, rank, 1);
    int fd0 = mrank_count_fds();
    long rss0 = rss_bytes();
    double t0 = mrank_now();
    for (int c = 0; c < SPLIT_CYCLES && !fails; c++)
        fails += split_cycle(root, rank, c % 20 == 0);
    if (!fails)
        fails += check_growth(rank, "split/destroy cycles on a kept root", fd0, rss0, t0);
    tcomms_status_t st = tcomms_comm_destroy(root);
    if (st != TCOMMS_SUCCESS)
        fails += split_report(rank, "leak test", "tcomms_comm_destroy", st);
    int round = 0;
    for (int c = 0; c < WARMUP / 2 && !fails; c++)
        fails += root_cycle(sh, rank, size, ++round);
    fd0 = mrank_count_fds();
    rss0 = rss_bytes();
    t0 = mrank_now();
    for (int c = 0; c < ROOT_CYCLES && !fails; c++)
        fails += root_cycle(sh, rank, size, ++round);
    if (!fails)
        fails += check_growth(rank, "create/split/destroy cycles", fd0, rss0, t0);
    return fails;
}

static void run_job(int nranks, mrank_fn_t fn, int backend, int timeout_s)
{
    shared_t *sh = mrank_shared_alloc(sizeof *sh);
    ck_assert_ptr_nonnull(sh);
    sh->backend = backend;
    int failing = mrank_run(nranks, fn, sh, timeout_s);
    mrank_shared_free(sh, sizeof *sh);
    ck_assert_msg(failing == 0, "%s: %d rank(s) failed (see stderr)", mrank_backend(backend), failing);
}

START_TEST(test_split_cases)
{
    run_job(4, split_rank, _i, SPLIT_JOB_S);
}
END_TEST

START_TEST(test_split_store_host_first)
{
    run_job(3, early_host_rank, _i, SPLIT_JOB_S);
}
END_TEST

START_TEST(test_split_missing_rank)
{
    run_job(3, missing_rank, _i, SPLIT_JOB_S);
}
END_TEST

START_TEST(test_split_no_leaks)
{
    run_job(2, leak_rank, _i, LEAK_JOB_S);
}
END_TEST

static void add_tests(Suite *s, int nbackends)
{
    TCase *tc = mrank_tcase(s, "split", SPLIT_JOB_S + 30);
    tcase_add_loop_test(tc, test_split_cases, 0, nbackends);
    tcase_add_loop_test(tc, test_split_store_host_first, 0, nbackends);
    tcase_add_loop_test(tc, test_split_missing_rank, 0, nbackends);
    tcase_add_loop_test(mrank_tcase(s, "leaks", LEAK_JOB_S + 30), test_split_no_leaks, 0, nbackends);
}

int main(void)
{
    return mrank_main("split", MRANK_BACKEND, add_tests);
}
