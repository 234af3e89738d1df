/* SPDX-License-Identifier: BSD-3-Clause */
/* Node-local ranks from the rendezvous (lib/topo.c) on 4 ranks of every CPU backend: with the launcher's local
 * variables unset, wrong, or from another launcher family, tcomms_comm_local_rank/size must be those of ranks that
 * all share this machine (mrank forks them here); with TCOMMS_HOST_ID faking two hosts (even and odd ranks), those
 * of two hosts; on the root and on its splits. The expected figures come from where the test put each rank, not
 * from a host id computed as lib/topo.c computes it. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <tcomms/tcomms.h>

#include "mrank.h"

#define NRANKS 4
#define JOB_S 60

typedef enum env_case { ENV_UNSET, ENV_WRONG, ENV_OMPI, ENV_TWO_HOSTS, ENV_CASES } env_case_t;
static const char *const case_names[ENV_CASES] = {"local variables unset", "local variables wrong",
                                                  "Open MPI's variables", "TCOMMS_HOST_ID: two hosts"};

typedef struct shared {
    int backend;
    env_case_t env;
} shared_t;

/* Which host the test put `rank` on: one machine, or two faked by TCOMMS_HOST_ID (set_env). */
static int host_of(env_case_t env, int rank)
{
    return env == ENV_TWO_HOSTS ? rank % 2 : 0;
}

static void set_int(const char *name, int v)
{
    char buf[16];
    snprintf(buf, sizeof(buf), "%d", v);
    setenv(name, buf, 1);
}

/* The launcher's variables for this case (mrank sets TCOMMS_RANK/SIZE/LOCAL_RANK). */
static void set_env(env_case_t env, int rank, int size)
{
    unsetenv("TCOMMS_LOCAL_RANK");
    unsetenv("TCOMMS_LOCAL_SIZE");
    if (env == ENV_WRONG) {
        set_int("TCOMMS_LOCAL_RANK", size - 1 - rank);
        set_int("TCOMMS_LOCAL_SIZE", 1);
        setenv("TCOMMS_LOG_LEVEL", "error", 1); /* the warning is expected: keep the log readable */
    } else if (env == ENV_OMPI) {
        unsetenv("TCOMMS_RANK");
        unsetenv("TCOMMS_SIZE");
        set_int("OMPI_COMM_WORLD_RANK", rank);
        set_int("OMPI_COMM_WORLD_SIZE", size);
        set_int("OMPI_COMM_WORLD_LOCAL_RANK", 0); /* as if every rank were alone on its node */
        set_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1);
        setenv("TCOMMS_LOG_LEVEL", "error", 1);
    } else if (env == ENV_TWO_HOSTS) {
        setenv("TCOMMS_HOST_ID", rank % 2 ? "host-b" : "host-a", 1);
    }
}

/* Local rank and size of `self` among `members` (world ranks): the members before it on its host, and all there. */
static void expected(const shared_t *sh, const int *members, int n, int self, int *lrank, int *lsize)
{
    *lrank = *lsize = 0;
    for (int i = 0; i < n; i++)
        if (host_of(sh->env, members[i]) == host_of(sh->env, members[self])) {
            *lrank += i < self;
            (*lsize)++;
        }
}

static int check_comm(tcomms_comm_t *c, const shared_t *sh, const int *members, int n, const char *what)
{
    int rank = -1, lrank = -1, lsize = -1, want_rank, want_size, fails = 0;
    tcomms_comm_rank(c, &rank);
    if (tcomms_comm_local_rank(c, &lrank) != TCOMMS_SUCCESS || tcomms_comm_local_size(c, &lsize) != TCOMMS_SUCCESS)
        return mrank_failf("FAIL %s: local rank/size query: %s", what, tcomms_last_error());
    expected(sh, members, n, rank, &want_rank, &want_size);
    if (lrank != want_rank || lsize != want_size)
        fails += mrank_failf("FAIL %s (%s, %s), rank %d: local rank %d of %d, expected %d of %d", what,
                             mrank_backend(sh->backend), case_names[sh->env], rank, lrank, lsize, want_rank, want_size);
    /* the communicator works too: the all_reduce's sum depends on every member */
    double v = rank + 1;
    tcomms_status_t st = tcomms_all_reduce(c, &v, &v, 1, TCOMMS_FLOAT64, TCOMMS_SUM, NULL, NULL);
    if (st != TCOMMS_SUCCESS || v != n * (n + 1) / 2.0)
        fails += mrank_failf("FAIL %s: all_reduce gave %g (%s)", what, v, tcomms_last_error());
    return fails;
}

static int topo_rank(int rank, int size, void *arg)
{
    shared_t *sh = arg;
    set_env(sh->env, rank, size);
    tcomms_comm_params_t p = {.field_mask = TCOMMS_COMM_PARAM_BACKEND, .backend = mrank_backend(sh->backend)};
    tcomms_comm_t *world = NULL;
    if (tcomms_comm_create(&p, &world) != TCOMMS_SUCCESS)
        return mrank_failf("FAIL rank %d: tcomms_comm_create: %s", rank, tcomms_last_error());
    int all[NRANKS] = {0, 1, 2, 3};
    int fails = check_comm(world, sh, all, size, "world");
    /* a split restricts the parent's host table: {0, 1, 2} (rank 3 is a non-member), then by color rank % 2 */
    int three[] = {0, 1, 2};
    tcomms_comm_t *sub = NULL;
    if (tcomms_comm_split(world, three, rank < 3 ? 3 : 0, "three", NULL, &sub) != TCOMMS_SUCCESS)
        fails += mrank_failf("FAIL rank %d: split: %s", rank, tcomms_last_error());
    else if (sub != NULL)
        fails += check_comm(sub, sh, three, 3, "split {0,1,2}");
    tcomms_comm_t *parity = NULL;
    int odd[] = {1, 3}, even[] = {0, 2};
    if (tcomms_comm_split_color(world, rank % 2, 0, "parity", NULL, &parity) != TCOMMS_SUCCESS)
        fails += mrank_failf("FAIL rank %d: split_color: %s", rank, tcomms_last_error());
    else
        fails += check_comm(parity, sh, rank % 2 ? odd : even, 2, "split by rank % 2");
    tcomms_comm_destroy(parity);
    tcomms_comm_destroy(sub);
    tcomms_comm_destroy(world);
    return fails;
}

START_TEST(test_topo_cases)
{
    for (env_case_t env = 0; env < ENV_CASES; env++) {
        shared_t *sh = mrank_shared_alloc(sizeof *sh);
        ck_assert_ptr_nonnull(sh);
        sh->backend = _i;
        sh->env = env;
        int failing = mrank_run(NRANKS, topo_rank, sh, JOB_S);
        mrank_shared_free(sh, sizeof *sh);
        ck_assert_msg(failing == 0, "%s, %s: %d rank(s) failed (see stderr)", mrank_backend(_i), case_names[env],
                      failing);
    }
}
END_TEST

static void add_tests(Suite *s, int nbackends)
{
    tcase_add_loop_test(mrank_tcase(s, "topo", ENV_CASES * (JOB_S + 10)), test_topo_cases, 0, nbackends);
}

int main(void)
{
    return mrank_main("topo", MRANK_BACKEND, add_tests);
}
