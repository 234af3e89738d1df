/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests lib/log.c: the line format (UTC timestamp, pid, rank, communicator), TCOMMS_LOG_FILE and its %-expansions,
 * and BAD_ENV for a malformed level or a file that cannot be opened, directly and through tcomms_comm_create.
 * Check runs each test in its own process, so the environment and the log's once-per-process file do not leak. */
#include <check.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tcomms/tcomms.h>

#include "log.h"
#include "check_run.h"

static char dir[64];

static void setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/tcomms_test_log.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    unsetenv("TCOMMS_LOG_FILE");
    unsetenv("TCOMMS_LOG_LEVEL");
    unsetenv("TCOMMS_CORE_LOG_LEVEL");
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* The whole of file `path`, NUL-terminated (static). */
static const char *slurp(const char *path)
{
    static char buf[65536];
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Whether `text` has a line matching the extended regular expression `re`. */
static int has_line(const char *text, const char *re)
{
    regex_t rx;
    ck_assert_int_eq(regcomp(&rx, re, REG_EXTENDED | REG_NEWLINE | REG_NOSUB), 0);
    int found = regexec(&rx, text, 0, NULL, 0) == 0;
    regfree(&rx);
    return found;
}

#define STAMP "[0-9]{4}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9]\\.[0-9]{3}Z"

/* %r takes the launcher's rank before any communicator; %p the pid; %% a percent sign; lines match the format. */
START_TEST(test_file_and_format)
{
    char pattern[128], path[160], re[256];
    snprintf(pattern, sizeof(pattern), "%s/log.%%r.%%p.100%%%%", dir);
    setenv("TCOMMS_LOG_FILE", pattern, 1);
    setenv("TCOMMS_LOG_LEVEL", "debug", 1);
    setenv("TCOMMS_RANK", "3", 1);
    time_t before = time(NULL);
    tc_log(TCOMMS_LOG_INFO, "core", "hello %d", 42);
    tc_log_set_comm("world");
    tc_log(TCOMMS_LOG_DEBUG, "nccl", "with a communicator");
    tc_log_set_comm(NULL);
    tc_log(TCOMMS_LOG_TRACE, "core", "filtered out");
    ck_assert_int_eq(tc_log_env_check(), TCOMMS_SUCCESS);
    snprintf(path, sizeof(path), "%s/log.3.%ld.100%%", dir, (long)getpid());
    const char *text = slurp(path);
    snprintf(re, sizeof(re), "^" STAMP " tcomms\\[%ld\\] rank 3 info core: hello 42$", (long)getpid());
    ck_assert_msg(has_line(text, re), "no line matches %s in:\n%s", re, text);
    snprintf(re, sizeof(re), "^" STAMP " tcomms\\[%ld\\] rank 3 'world' debug nccl: with a communicator$",
             (long)getpid());
    ck_assert_msg(has_line(text, re), "no line matches %s in:\n%s", re, text);
    ck_assert_ptr_null(strstr(text, "filtered out"));
    /* The stamp is now, in UTC. */
    struct tm tm = {0};
    ck_assert_ptr_nonnull(strptime(text, "%Y-%m-%dT%H:%M:%S", &tm));
    time_t stamp = timegm(&tm);
    ck_assert_msg(stamp >= before - 1 && stamp <= time(NULL) + 1, "stamp %ld, now %ld", (long)stamp,
                  (long)time(NULL));
}
END_TEST

/* The rank a communicator gave wins over the environment's, and the file is opened once: later lines append. */
START_TEST(test_rank_set_and_append)
{
    char pattern[128], path[128];
    snprintf(pattern, sizeof(pattern), "%s/r%%r.log", dir);
    setenv("TCOMMS_LOG_FILE", pattern, 1);
    setenv("RANK", "9", 1);
    tc_log_set_rank(5);
    tc_log(TCOMMS_LOG_WARN, "ucx", "first");
    tc_log_set_rank(6); /* the file keeps the name it was opened under */
    tc_log(TCOMMS_LOG_ERROR, "ucx", "second");
    snprintf(path, sizeof(path), "%s/r5.log", dir);
    const char *text = slurp(path);
    ck_assert_msg(has_line(text, "^" STAMP " tcomms\\[[0-9]+\\] rank 5 warn ucx: first$"), "%s", text);
    ck_assert_msg(has_line(text, "^" STAMP " tcomms\\[[0-9]+\\] rank 6 error ucx: second$"), "%s", text);
}
END_TEST

static void expect_bad_env(const char *name)
{
    ck_assert_int_eq(tc_log_env_check(), TCOMMS_ERR_BAD_ENV);
    ck_assert_msg(strstr(tcomms_last_error(), name) != NULL, "'%s' does not name %s", tcomms_last_error(), name);
}

START_TEST(test_bad_levels)
{
    static const char *const good[] = {"error", "WARN", "warning", "info", "debug", "trace", "none", "0", "5", ""};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        setenv("TCOMMS_LOG_LEVEL", good[i], 1);
        ck_assert_msg(tc_log_env_check() == TCOMMS_SUCCESS, "'%s': %s", good[i], tcomms_last_error());
    }
    static const char *const bad[] = {"verbose", "9", "6", "-1", "debug2"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        setenv("TCOMMS_LOG_LEVEL", bad[i], 1);
        expect_bad_env("TCOMMS_LOG_LEVEL");
        ck_assert_ptr_nonnull(strstr(tcomms_last_error(), bad[i]));
    }
    setenv("TCOMMS_LOG_LEVEL", "info", 1);
    setenv("TCOMMS_GLOO_LOG_LEVEL", "loud", 1);
    expect_bad_env("TCOMMS_GLOO_LOG_LEVEL");
    unsetenv("TCOMMS_GLOO_LOG_LEVEL");
    setenv("TCOMMS_FOOLOG_LEVEL", "loud", 1); /* not one of ours */
    ck_assert_int_eq(tc_log_env_check(), TCOMMS_SUCCESS);
    /* A malformed level does not stop logging: it keeps the default (warn). */
    setenv("TCOMMS_LOG_LEVEL", "verbose", 1);
    expect_bad_env("TCOMMS_LOG_LEVEL");
    ck_assert(tc_log_enabled(TCOMMS_LOG_WARN, "core"));
    ck_assert(!tc_log_enabled(TCOMMS_LOG_INFO, "core"));
}
END_TEST

/* The levels are read at the first line and at each check (each communicator's creation), not per line; a
 * component's own level overrides the global one for that component only, whatever its case. */
START_TEST(test_levels_read_at_check)
{
    setenv("TCOMMS_LOG_LEVEL", "error", 1);
    ck_assert(!tc_log_enabled(TCOMMS_LOG_WARN, "core")); /* the first read */
    setenv("TCOMMS_LOG_LEVEL", "trace", 1);
    ck_assert_msg(!tc_log_enabled(TCOMMS_LOG_WARN, "core"), "the level was read again without a check");
    ck_assert_int_eq(tc_log_env_check(), TCOMMS_SUCCESS);
    ck_assert(tc_log_enabled(TCOMMS_LOG_TRACE, "core"));
    setenv("TCOMMS_LOG_LEVEL", "warn", 1);
    setenv("TCOMMS_STORE_LOG_LEVEL", "debug", 1);
    ck_assert_int_eq(tc_log_env_check(), TCOMMS_SUCCESS);
    ck_assert(tc_log_enabled(TCOMMS_LOG_DEBUG, "store"));
    ck_assert(tc_log_enabled(TCOMMS_LOG_DEBUG, "STORE"));
    ck_assert(!tc_log_enabled(TCOMMS_LOG_TRACE, "store"));
    ck_assert(!tc_log_enabled(TCOMMS_LOG_DEBUG, "core"));
    ck_assert(!tc_log_enabled(TCOMMS_LOG_DEBUG, "stor"));
    ck_assert(tc_log_enabled(TCOMMS_LOG_WARN, "ucx"));
    setenv("TCOMMS_STORE_LOG_LEVEL", "none", 1); /* a component may also be quieter than the rest */
    ck_assert_int_eq(tc_log_env_check(), TCOMMS_SUCCESS);
    ck_assert(!tc_log_enabled(TCOMMS_LOG_ERROR, "store"));
    ck_assert(tc_log_enabled(TCOMMS_LOG_ERROR, "core"));
    unsetenv("TCOMMS_STORE_LOG_LEVEL");
}
END_TEST

/* TCOMMS_CORE_LOG_LEVEL=trace: one line per operation, numbered from 1 per communicator, naming what was asked
 * (op for reductions only, root for rooted operations only); at the default level, none. */
START_TEST(test_trace_lines)
{
    char pattern[128], path[128];
    snprintf(pattern, sizeof(pattern), "%s/trace.%%r", dir);
    setenv("TCOMMS_LOG_FILE", pattern, 1);
    setenv("TCOMMS_CORE_LOG_LEVEL", "trace", 1);
    tcomms_comm_params_t p = {.field_mask = TCOMMS_COMM_PARAM_NAME, .name = "traced"};
    tcomms_comm_t *comm = NULL;
    ck_assert_msg(tcomms_comm_create(&p, &comm) == TCOMMS_SUCCESS, "%s", tcomms_last_error());
    int32_t a[5] = {1, 2, 3, 4, 5}, b[5];
    double d[3] = {0};
    tcomms_work_t *w = NULL;
    ck_assert_int_eq(tcomms_all_reduce(comm, a, b, 5, TCOMMS_INT32, TCOMMS_MAX, NULL, NULL), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_broadcast(comm, d, 3, TCOMMS_FLOAT64, 0, NULL, &w), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_work_wait(w, 0), TCOMMS_SUCCESS);
    tcomms_work_free(w);
    ck_assert_int_eq(tcomms_all_reduce(comm, NULL, NULL, 0, TCOMMS_DTYPE_COUNT, TCOMMS_SUM, NULL, NULL),
                     TCOMMS_ERR_INVALID_ARG); /* refused: no line, no number */
    ck_assert_int_eq(tcomms_all_gather(comm, a, a, 5, TCOMMS_INT32, NULL, NULL), TCOMMS_SUCCESS);
    setenv("TCOMMS_CORE_LOG_LEVEL", "warn", 1);
    tcomms_comm_t *quiet = NULL; /* a creation reads the levels again: from now on no trace */
    tcomms_comm_params_t q = {.field_mask = TCOMMS_COMM_PARAM_NAME, .name = "quiet"};
    ck_assert_msg(tcomms_comm_create(&q, &quiet) == TCOMMS_SUCCESS, "%s", tcomms_last_error());
    ck_assert_int_eq(tcomms_all_reduce(comm, a, b, 5, TCOMMS_INT32, TCOMMS_MAX, NULL, NULL), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_comm_destroy(quiet), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_comm_destroy(comm), TCOMMS_SUCCESS);
    snprintf(path, sizeof(path), "%s/trace.0", dir);
    const char *text = slurp(path);
    /* The backend, and the algorithm where it names one: UCX's for a communicator of one rank is "alone". */
    const char *be = NULL;
    ck_assert_int_eq(tcomms_backend_default(TCOMMS_DEVICE_CPU, &be), TCOMMS_SUCCESS);
    char by[64], line[256];
    snprintf(by, sizeof(by), "by %s%s", be, strcmp(be, "ucx") == 0 ? " algorithm alone" : "");
    snprintf(line, sizeof(line), " trace core: 'traced' rank 0 #1 all_reduce count 5 int32 op max on cpu %s blocking, "
             "timeout [0-9]+ ms$", by);
    ck_assert_msg(has_line(text, line), "%s\nwanted %s", text, line);
    snprintf(line, sizeof(line), " trace core: 'traced' rank 0 #2 broadcast count 3 float64 root 0 in place on cpu %s, "
             "timeout [0-9]+ ms$", by);
    ck_assert_msg(has_line(text, line), "%s\nwanted %s", text, line);
    snprintf(line, sizeof(line), " trace core: 'traced' rank 0 #3 all_gather count 5 int32 in place on cpu %s "
             "blocking, timeout [0-9]+ ms$", by);
    ck_assert_msg(has_line(text, line), "%s\nwanted %s", text, line);
    ck_assert_msg(!has_line(text, "#4 "), "a line after the level went back to warn:\n%s", text);
}
END_TEST

START_TEST(test_unopenable_file)
{
    char pattern[128];
    snprintf(pattern, sizeof(pattern), "%s/missing/log.%%r", dir);
    setenv("TCOMMS_LOG_FILE", pattern, 1);
    tc_log(TCOMMS_LOG_ERROR, "core", "goes to stderr instead"); /* must not crash */
    expect_bad_env("TCOMMS_LOG_FILE");
    ck_assert_ptr_nonnull(strstr(tcomms_last_error(), "No such file or directory"));
}
END_TEST

/* Through the API: creation reports the malformed variable, and a single-rank communicator on the default CPU
 * backend logs its rank and name to the file. */
START_TEST(test_comm_create)
{
    tcomms_comm_t *comm = NULL;
    setenv("TCOMMS_LOG_LEVEL", "verbose", 1);
    ck_assert_int_eq(tcomms_comm_create(NULL, &comm), TCOMMS_ERR_BAD_ENV);
    ck_assert_ptr_nonnull(strstr(tcomms_last_error(), "TCOMMS_LOG_LEVEL"));
    ck_assert_ptr_null(comm);
    setenv("TCOMMS_LOG_LEVEL", "debug", 1);
    char pattern[128], path[128];
    snprintf(pattern, sizeof(pattern), "%s/world.%%r", dir);
    setenv("TCOMMS_LOG_FILE", pattern, 1);
    tcomms_comm_params_t p = {.field_mask = TCOMMS_COMM_PARAM_NAME, .name = "mine"};
    ck_assert_msg(tcomms_comm_create(&p, &comm) == TCOMMS_SUCCESS, "%s", tcomms_last_error());
    ck_assert_int_eq(tcomms_comm_destroy(comm), TCOMMS_SUCCESS);
    snprintf(path, sizeof(path), "%s/world.0", dir);
    const char *text = slurp(path);
    ck_assert_msg(has_line(text, "^" STAMP " tcomms\\[[0-9]+\\] rank 0 info core: communicator 'mine' ready: rank 0 "
                           "of 1$"), "%s", text);
    ck_assert_msg(has_line(text, "^" STAMP " tcomms\\[[0-9]+\\] rank 0 'mine' debug [a-z]+: "), "%s", text);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("log");
    TCase *tc = tcase_create("log");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_file_and_format);
    tcase_add_test(tc, test_rank_set_and_append);
    tcase_add_test(tc, test_bad_levels);
    tcase_add_test(tc, test_levels_read_at_check);
    tcase_add_test(tc, test_trace_lines);
    tcase_add_test(tc, test_unopenable_file);
    tcase_add_test(tc, test_comm_create);
    suite_add_tcase(s, tc);
    return check_run(s);
}
