/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests lib/env.c: launcher conventions in precedence order, the store's limits, typed variables as the core and
 * modules (through tcomms_core_t) read them, and errors that name the malformed variable. Check runs each test in
 * its own process, so environment changes do not leak between tests. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "env.h"
#include "loader.h"
#include "store/store.h"
#include "check_run.h"

static const char *const all_vars[] = {
    "TCOMMS_RANK", "TCOMMS_SIZE", "TCOMMS_LOCAL_RANK", "RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
    "TCOMMS_MASTER_ADDR", "TCOMMS_MASTER_PORT", "MASTER_ADDR", "MASTER_PORT", "TCOMMS_STORE_HANDSHAKE_MS",
    "TCOMMS_STORE_MAX_PENDING", "TCOMMS_STORE_MAX_CONNS", "TCOMMS_STORE_MAX_BYTES", NULL};

static void clean_env(void)
{
    for (int i = 0; all_vars[i]; i++)
        unsetenv(all_vars[i]);
}

START_TEST(test_default_single)
{
    tc_bootstrap_t bs;
    ck_assert_int_eq(tc_env_bootstrap(&bs), TCOMMS_SUCCESS);
    ck_assert_int_eq(bs.rank, 0);
    ck_assert_int_eq(bs.size, 1);
    ck_assert_int_eq(bs.local_rank, -1);
    ck_assert_str_eq(bs.master_addr, "");
}
END_TEST

/* Each family alone gives its values; with several set, the earlier family wins. */
START_TEST(test_families)
{
    const char *fam[4][4] = {{"TCOMMS", "TCOMMS_RANK", "TCOMMS_SIZE", "TCOMMS_LOCAL_RANK"},
                             {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
                             {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
                             {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"}};
    for (int f = 3; f >= 0; f--) {
        char rank[8], size[8], local[8];
        snprintf(rank, sizeof(rank), "%d", f + 1);
        snprintf(size, sizeof(size), "%d", 10 + f);
        snprintf(local, sizeof(local), "%d", f);
        setenv(fam[f][1], rank, 1);
        setenv(fam[f][2], size, 1);
        setenv(fam[f][3], local, 1);
        tc_bootstrap_t bs;
        ck_assert_int_eq(tc_env_bootstrap(&bs), TCOMMS_SUCCESS);
        ck_assert_str_eq(bs.source, fam[f][0]);
        ck_assert_int_eq(bs.rank, f + 1);
        ck_assert_int_eq(bs.size, 10 + f);
        ck_assert_int_eq(bs.local_rank, f);
    }
}
END_TEST

START_TEST(test_master)
{
    setenv("MASTER_ADDR", "node7", 1);
    setenv("MASTER_PORT", "29500", 1);
    tc_bootstrap_t bs;
    ck_assert_int_eq(tc_env_bootstrap(&bs), TCOMMS_SUCCESS);
    ck_assert_str_eq(bs.master_addr, "node7");
    ck_assert_int_eq(bs.master_port, 29500);
    setenv("TCOMMS_MASTER_ADDR", "10.1.2.3", 1);
    setenv("TCOMMS_MASTER_PORT", "1234", 1);
    ck_assert_int_eq(tc_env_bootstrap(&bs), TCOMMS_SUCCESS);
    ck_assert_str_eq(bs.master_addr, "10.1.2.3");
    ck_assert_int_eq(bs.master_port, 1234);
}
END_TEST

static void expect_bad(const char *var)
{
    tc_bootstrap_t bs;
    ck_assert_int_eq(tc_env_bootstrap(&bs), TCOMMS_ERR_BAD_ENV);
    ck_assert_msg(strstr(tcomms_last_error(), var) != NULL, "'%s' does not name %s", tcomms_last_error(), var);
}

START_TEST(test_malformed)
{
    const struct {
        const char *set[3][2];
        const char *named;
    } cases[] = {
        {{{"TCOMMS_RANK", "abc"}, {"TCOMMS_SIZE", "2"}}, "TCOMMS_RANK"},
        {{{"TCOMMS_RANK", "0"}, {"TCOMMS_SIZE", "0"}}, "TCOMMS_SIZE"},
        {{{"TCOMMS_RANK", "2"}, {"TCOMMS_SIZE", "2"}}, "TCOMMS_RANK"},
        {{{"TCOMMS_RANK", "0"}}, "TCOMMS_SIZE"},
        {{{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "x"}}, "LOCAL_RANK"},
        {{{"OMPI_COMM_WORLD_RANK", "-1"}, {"OMPI_COMM_WORLD_SIZE", "4"}}, "OMPI_COMM_WORLD_RANK"},
        {{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4 tasks"}}, "SLURM_NTASKS"},
        {{{"MASTER_PORT", "70000"}}, "MASTER_PORT"},
        {{{"TCOMMS_MASTER_PORT", ""}}, "TCOMMS_MASTER_PORT"},
        {{{"MASTER_ADDR", ""}}, "MASTER_ADDR"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        clean_env();
        for (int j = 0; j < 3 && cases[i].set[j][0]; j++)
            setenv(cases[i].set[j][0], cases[i].set[j][1], 1);
        expect_bad(cases[i].named);
    }
}
END_TEST

START_TEST(test_parsers)
{
    long v;
    int b;
    ck_assert_int_eq(tc_parse_int("42", 0, 100, "x", &v), TCOMMS_SUCCESS);
    ck_assert_int_eq(v, 42);
    ck_assert_int_eq(tc_parse_int("101", 0, 100, "x", &v), TCOMMS_ERR_INVALID_ARG);
    ck_assert_int_eq(tc_parse_int("99999999999999999999", 0, 100, "x", &v), TCOMMS_ERR_INVALID_ARG);
    ck_assert_int_eq(tc_parse_bool("On", "x", &b), TCOMMS_SUCCESS);
    ck_assert_int_eq(b, 1);
    ck_assert_int_eq(tc_parse_bool("nope", "flag", &b), TCOMMS_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tcomms_last_error(), "flag"));
    setenv("TCOMMS_TIMEOUT_MS", "5s", 1);
    ck_assert_int_eq(tc_env_int("TCOMMS_TIMEOUT_MS", 1, 1000000, 7, &v), TCOMMS_ERR_BAD_ENV);
    ck_assert_ptr_nonnull(strstr(tcomms_last_error(), "TCOMMS_TIMEOUT_MS"));
    unsetenv("TCOMMS_TIMEOUT_MS");
    ck_assert_int_eq(tc_env_int("TCOMMS_TIMEOUT_MS", 1, 1000000, 7, &v), TCOMMS_SUCCESS);
    ck_assert_int_eq(v, 7);
}
END_TEST

/* One behaviour for typed variables, whoever reads them: unset gives the default; a value, an empty one included,
 * must parse and be in range, or it is BAD_ENV naming the variable and the value, leaving *out alone. Each case
 * runs through the core's own function and through the entry lent to modules. */
static const struct typed_case {
    const char *value; /* NULL: unset */
    tcomms_status_t want;
    long got;          /* the value read on success */
} int_cases[] = {      /* an integer in [1, 1000], default 7 */
    {NULL, TCOMMS_SUCCESS, 7}, {"", TCOMMS_ERR_BAD_ENV, 0}, {" ", TCOMMS_ERR_BAD_ENV, 0},
    {"42", TCOMMS_SUCCESS, 42}, {"42 ", TCOMMS_SUCCESS, 42}, {"1", TCOMMS_SUCCESS, 1}, {"1000", TCOMMS_SUCCESS, 1000},
    {"0", TCOMMS_ERR_BAD_ENV, 0}, {"1001", TCOMMS_ERR_BAD_ENV, 0}, {"-3", TCOMMS_ERR_BAD_ENV, 0},
    {"99999999999999999999", TCOMMS_ERR_BAD_ENV, 0}, {"42ms", TCOMMS_ERR_BAD_ENV, 0}, {"4 2", TCOMMS_ERR_BAD_ENV, 0},
    {"0x10", TCOMMS_ERR_BAD_ENV, 0}, {"1e3", TCOMMS_ERR_BAD_ENV, 0},
}, bool_cases[] = {    /* a boolean, default 1 */
    {NULL, TCOMMS_SUCCESS, 1}, {"", TCOMMS_ERR_BAD_ENV, 0}, {"0", TCOMMS_SUCCESS, 0}, {"1", TCOMMS_SUCCESS, 1},
    {"off", TCOMMS_SUCCESS, 0}, {"No", TCOMMS_SUCCESS, 0}, {"TRUE", TCOMMS_SUCCESS, 1}, {"y", TCOMMS_SUCCESS, 1},
    {"2", TCOMMS_ERR_BAD_ENV, 0}, {"yes please", TCOMMS_ERR_BAD_ENV, 0}, {"-1", TCOMMS_ERR_BAD_ENV, 0},
};

#define TYPED_VAR "TCOMMS_TEST_TYPED"

static void check_typed(const struct typed_case *c, int is_bool, int lent)
{
    if (c->value)
        setenv(TYPED_VAR, c->value, 1);
    else
        unsetenv(TYPED_VAR);
    long v = -99;
    int b = -99;
    tcomms_status_t st = is_bool ? (lent ? tc_core.env_bool : tc_env_bool)(TYPED_VAR, 1, &b)
                                 : (lent ? tc_core.env_int : tc_env_int)(TYPED_VAR, 1, 1000, 7, &v);
    long got = is_bool ? b : v;
    const char *what = c->value ? c->value : "(unset)";
    ck_assert_msg(st == c->want, "%s %s='%s' (%s): status %d, expected %d", is_bool ? "bool" : "int", TYPED_VAR,
                  what, lent ? "core table" : "tc_env_*", (int)st, (int)c->want);
    if (st == TCOMMS_SUCCESS) {
        ck_assert_msg(got == c->got, "'%s' read as %ld, expected %ld", what, got, c->got);
        return;
    }
    ck_assert_msg(got == -99, "'%s' failed but wrote %ld", what, got);
    char named[64];
    snprintf(named, sizeof(named), "%s='%s'", TYPED_VAR, c->value);
    ck_assert_msg(strstr(tcomms_last_error(), named) != NULL, "'%s': message '%s' does not name %s", what,
                  tcomms_last_error(), named);
}

START_TEST(test_typed)
{
    ck_assert_uint_ge(tc_core.abi.minor, 2);
    for (int lent = 0; lent < 2; lent++) {
        for (size_t i = 0; i < sizeof(int_cases) / sizeof(int_cases[0]); i++)
            check_typed(&int_cases[i], 0, lent);
        for (size_t i = 0; i < sizeof(bool_cases) / sizeof(bool_cases[0]); i++)
            check_typed(&bool_cases[i], 1, lent);
    }
}
END_TEST

/* The store's limits: defaults that follow the descriptor limit, values from the environment, a malformed one named. */
START_TEST(test_store_limits)
{
    struct rlimit rl;
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    rl.rlim_cur = 300;
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
    tc_store_limits_t l;
    ck_assert_int_eq(tc_env_store_limits(&l), TCOMMS_SUCCESS);
    ck_assert_uint_eq(l.handshake_ms, 3000);
    ck_assert_uint_eq(l.max_conns, 150);  /* half of the 300 descriptors */
    ck_assert_uint_eq(l.max_pending, 150); /* 256, but no more than max_conns */
    ck_assert_uint_eq(l.max_bytes, 128u << 20);
    setenv("TCOMMS_STORE_HANDSHAKE_MS", "250", 1);
    setenv("TCOMMS_STORE_MAX_PENDING", "7", 1);
    setenv("TCOMMS_STORE_MAX_CONNS", "9", 1);
    setenv("TCOMMS_STORE_MAX_BYTES", "5000000000", 1);
    ck_assert_int_eq(tc_env_store_limits(&l), TCOMMS_SUCCESS);
    ck_assert_uint_eq(l.handshake_ms, 250);
    ck_assert_uint_eq(l.max_pending, 7);
    ck_assert_uint_eq(l.max_conns, 9);
    ck_assert_uint_eq(l.max_bytes, 5000000000u);
    const char *bad[][2] = {{"TCOMMS_STORE_HANDSHAKE_MS", "3s"}, {"TCOMMS_STORE_MAX_PENDING", "0"},
                            {"TCOMMS_STORE_MAX_CONNS", "-1"}, {"TCOMMS_STORE_MAX_BYTES", "1G"}};
    for (int i = 0; i < 4; i++) {
        char old[64];
        snprintf(old, sizeof(old), "%s", getenv(bad[i][0]));
        setenv(bad[i][0], bad[i][1], 1);
        ck_assert_int_eq(tc_env_store_limits(&l), TCOMMS_ERR_BAD_ENV);
        ck_assert_ptr_nonnull(strstr(tcomms_last_error(), bad[i][0]));
        setenv(bad[i][0], old, 1);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("env");
    TCase *tc = tcase_create("env");
    tcase_add_checked_fixture(tc, clean_env, NULL);
    tcase_add_test(tc, test_default_single);
    tcase_add_test(tc, test_families);
    tcase_add_test(tc, test_master);
    tcase_add_test(tc, test_malformed);
    tcase_add_test(tc, test_parsers);
    tcase_add_test(tc, test_typed);
    tcase_add_test(tc, test_store_limits);
    suite_add_tcase(s, tc);
    return check_run(s);
}
