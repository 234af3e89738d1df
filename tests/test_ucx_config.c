/* SPDX-License-Identifier: BSD-3-Clause */
/* The UCX settings tcomms tunes (backends/ucx/context.c) under restricted transports (issue 24, point 6): on 2 ranks
 * of the UCX backend, for several UCX_TLS values, no rank's stderr may carry UCX's "invalid configuration" warning,
 * which UCX prints for a setting that no transport in use reads. UCX itself is the judge: where tcomms says (in its
 * debug log) that it set the shared-memory FIFO size, the missing warning shows that a transport took it. Also the
 * module's own variables, which it reads through the core's parser (tcomms_core_t.env_int, env_bool): they behave
 * as docs/env.md says of every variable, an empty value included. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tcomms/tcomms.h>
#include <unistd.h>

#include "mrank.h"

#define JOB_S 60

static const struct {
    const char *tls;  /* NULL: unset */
    int fifo_tuned;   /* tcomms should set UCX_MM_FIFO_ELEM_SIZE: a shared-memory FIFO transport can be in use */
} cases[] = {
    {"tcp,self", 0}, {"tcp", 0}, {"^sm", 0}, {"^posix,sysv", 0}, {"sm,self", 1}, {"^posix", 1}, {NULL, 1},
};

#define DIR_TEMPLATE "/tmp/tcomms-ucx-config.XXXXXX"

static int ucx_rank(int rank, int size, void *arg)
{
    const char *dir = arg;
    char path[sizeof(DIR_TEMPLATE) + 32];
    snprintf(path, sizeof(path), "%s/err.%d", dir, rank);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || dup2(fd, 2) < 0)
        return mrank_failf("FAIL rank %d: cannot send stderr to %s", rank, path);
    close(fd);
    tcomms_comm_params_t p = {0};
    p.field_mask = TCOMMS_COMM_PARAM_BACKEND | TCOMMS_COMM_PARAM_TIMEOUT;
    p.backend = "ucx";
    p.timeout_ms = 20000;
    tcomms_comm_t *comm = NULL;
    tcomms_status_t st = tcomms_comm_create(&p, &comm);
    int v = rank + 1, fails = 0;
    if (st == TCOMMS_SUCCESS)
        st = tcomms_all_reduce(comm, &v, &v, 1, TCOMMS_INT32, TCOMMS_SUM, NULL, NULL);
    if (st != TCOMMS_SUCCESS || v != size * (size + 1) / 2)
        fails++;
    tcomms_comm_destroy(comm);
    return fails; /* the parent reads the reasons in the file */
}

/* The whole of a rank's stderr file, malloc'ed. */
static char *slurp(const char *dir, int rank)
{
    char path[sizeof(DIR_TEMPLATE) + 32];
    snprintf(path, sizeof(path), "%s/err.%d", dir, rank);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "no stderr file for rank %d", rank);
    char *text = calloc(1, 1 << 20);
    ck_assert_ptr_nonnull(text);
    size_t n = fread(text, 1, (1 << 20) - 1, f);
    text[n] = '\0';
    fclose(f);
    unlink(path);
    return text;
}

START_TEST(test_no_invalid_configuration)
{
    if (cases[_i].tls != NULL)
        setenv("UCX_TLS", cases[_i].tls, 1);
    else
        unsetenv("UCX_TLS");
    const char *clear[] = {"UCX_MM_FIFO_ELEM_SIZE", "UCX_SYSV_FIFO_ELEM_SIZE", "UCX_POSIX_FIFO_ELEM_SIZE",
                           "UCX_LOG_LEVEL", "TCOMMS_LOG_LEVEL"};
    for (size_t i = 0; i < sizeof(clear) / sizeof(clear[0]); i++)
        unsetenv(clear[i]);
    setenv("TCOMMS_UCX_LOG_LEVEL", "debug", 1);
    char dir[] = DIR_TEMPLATE;
    ck_assert_ptr_nonnull(mkdtemp(dir));
    int failing = mrank_run(2, ucx_rank, dir, JOB_S);
    const char *tls = cases[_i].tls ? cases[_i].tls : "(unset)";
    for (int r = 0; r < 2; r++) {
        char *err = slurp(dir, r);
        const char *bad = strstr(err, "invalid configuration");
        int tuned = strstr(err, "UCX_MM_FIFO_ELEM_SIZE=4096") != NULL;
        if (failing != 0 || bad != NULL || tuned != cases[_i].fifo_tuned) {
            rmdir(dir);
            ck_abort_msg("UCX_TLS=%s, rank %d: %s%s (FIFO size %s, expected %s); its stderr:\n%s", tls, r,
                         failing ? "the job failed" : "", bad ? "UCX warned" : "", tuned ? "set" : "not set",
                         cases[_i].fifo_tuned ? "set" : "not set", err);
        }
        free(err);
    }
    rmdir(dir);
}
END_TEST

/* One rank's creation on the UCX backend with `name`=`value`: its status, and the message on failure. */
static const struct {
    const char *name, *value;
    tcomms_status_t want;
} env_cases[] = {
    {"TCOMMS_UCX_SPIN_US", "", TCOMMS_ERR_BAD_ENV},        /* empty is malformed, not the default */
    {"TCOMMS_UCX_SPIN_US", "10ms", TCOMMS_ERR_BAD_ENV},
    {"TCOMMS_UCX_SPIN_US", "10000001", TCOMMS_ERR_BAD_ENV}, /* above its range */
    {"TCOMMS_UCX_WARMUP", "", TCOMMS_ERR_BAD_ENV},
    {"TCOMMS_UCX_WARMUP", "0", TCOMMS_SUCCESS},
    {"TCOMMS_UCX_PROGRESS_THREAD", "", TCOMMS_ERR_BAD_ENV},
    {"TCOMMS_UCX_PROGRESS_THREAD", "maybe", TCOMMS_ERR_BAD_ENV},
    {"TCOMMS_UCX_PROGRESS_THREAD", "off", TCOMMS_SUCCESS},  /* a boolean as the core spells one */
};

START_TEST(test_module_env)
{
    setenv(env_cases[_i].name, env_cases[_i].value, 1);
    tcomms_comm_params_t p = {0};
    p.field_mask = TCOMMS_COMM_PARAM_BACKEND;
    p.backend = "ucx";
    tcomms_comm_t *comm = NULL;
    tcomms_status_t st = tcomms_comm_create(&p, &comm);
    char named[64];
    snprintf(named, sizeof(named), "%s='%s'", env_cases[_i].name, env_cases[_i].value);
    ck_assert_msg(st == env_cases[_i].want, "%s: status %s (%s), expected %s", named, tcomms_strerror(st),
                  tcomms_last_error(), tcomms_strerror(env_cases[_i].want));
    if (st != TCOMMS_SUCCESS)
        ck_assert_msg(strstr(tcomms_last_error(), named) != NULL, "message '%s' does not name %s",
                      tcomms_last_error(), named);
    tcomms_comm_destroy(comm);
}
END_TEST

static void add_tests(Suite *s, int nbackends)
{
    (void)nbackends; /* ucx only */
    tcase_add_loop_test(mrank_tcase(s, "tls", JOB_S + 30), test_no_invalid_configuration, 0,
                        (int)(sizeof(cases) / sizeof(cases[0])));
    tcase_add_loop_test(mrank_tcase(s, "env", 30), test_module_env, 0, (int)(sizeof(env_cases) / sizeof(env_cases[0])));
}

int main(void)
{
    return mrank_main("ucx_config", MRANK_UCX, add_tests);
}
