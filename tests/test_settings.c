/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests lib/setting.c through the public calls: tcomms_comm_setting says what runs and where it came from (hint,
 * environment, default), a hint an environment variable overrides is a warning, or TCOMMS_ERR_BAD_ENV under
 * strict_hints, and a module without comm_setting still reports a given hint as such. The modules are
 * tests/fake_settings.c ("fakenccl", a stand-in for NCCL's variables over its config) and tests/fake_backend.c. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tcomms/tcomms.h>

#include "check_run.h"

static void setup(void)
{
    const char *dir = getenv("TCOMMS_TEST_MODULES");
    ck_assert_msg(dir != NULL, "TCOMMS_TEST_MODULES is not set");
    setenv("TCOMMS_BACKEND_PATH", dir, 1);
    unsetenv("TCOMMS_BACKEND");
    unsetenv("FAKENCCL_MIN_CTAS");
    unsetenv("FAKENCCL_MAX_CTAS");
}

/* A one-rank communicator on `backend` with hints "k=v,..." (NULL: none); NULL where creation fails. */
static tcomms_comm_t *create(const char *backend, const char *spec, tcomms_status_t *st)
{
    tcomms_hints_t *h = NULL;
    ck_assert_int_eq(tcomms_hints_create(&h), TCOMMS_SUCCESS);
    if (spec != NULL)
        ck_assert_msg(tcomms_hints_parse(h, spec) == TCOMMS_SUCCESS, "%s", tcomms_last_error());
    tcomms_comm_params_t p = {.field_mask = TCOMMS_COMM_PARAM_RANK | TCOMMS_COMM_PARAM_BACKEND |
                                            TCOMMS_COMM_PARAM_HINTS,
                              .rank = 0, .size = 1, .local_rank = 0, .backend = backend, .hints = h};
    tcomms_comm_t *comm = NULL;
    *st = tcomms_comm_create(&p, &comm);
    tcomms_hints_free(h);
    return comm;
}

static void expect(tcomms_comm_t *comm, const char *key, const char *value, tcomms_setting_source_t source,
                   const char *origin, const char *overridden)
{
    tcomms_setting_t s;
    ck_assert_msg(tcomms_comm_setting(comm, TCOMMS_DEVICE_CPU, key, &s) == TCOMMS_SUCCESS, "%s", tcomms_last_error());
    ck_assert_msg(strcmp(s.value, value) == 0 && s.source == source && strcmp(s.origin, origin) == 0 &&
                      strcmp(s.overridden, overridden) == 0,
                  "%s: got %s from %s (%s, over '%s'), expected %s from %s (%s, over '%s')", key, s.value,
                  tcomms_setting_source_name(s.source), s.origin, s.overridden, value,
                  tcomms_setting_source_name(source), origin, overridden);
    char buf[64];
    ck_assert_int_eq(tcomms_comm_hint(comm, TCOMMS_DEVICE_CPU, key, buf, sizeof(buf)), TCOMMS_SUCCESS);
    ck_assert_str_eq(buf, value); /* the older call agrees */
}

START_TEST(test_sources)
{
    setenv("FAKENCCL_MAX_CTAS", "12", 1);
    tcomms_status_t st;
    tcomms_comm_t *comm = create("fakenccl", "minCTAs=3,cga_cluster_size=2", &st);
    ck_assert_msg(st == TCOMMS_SUCCESS, "%s", tcomms_last_error());
    expect(comm, "min_ctas", "3", TCOMMS_SETTING_HINT, "min_ctas", "");
    expect(comm, "maxCTAs", "12", TCOMMS_SETTING_ENV, "FAKENCCL_MAX_CTAS", ""); /* no hint to override */
    expect(comm, "cga_cluster_size", "2", TCOMMS_SETTING_HINT, "cga_cluster_size", "");
    expect(comm, "blocking", "not applicable", TCOMMS_SETTING_DEFAULT, "", "");
    setenv("FAKENCCL_MIN_CTAS", "9", 1); /* after creation: what runs was fixed then */
    expect(comm, "min_ctas", "3", TCOMMS_SETTING_HINT, "min_ctas", "");
    ck_assert_int_eq(tcomms_comm_destroy(comm), TCOMMS_SUCCESS);

    unsetenv("FAKENCCL_MIN_CTAS");
    unsetenv("FAKENCCL_MAX_CTAS");
    comm = create("fakenccl", NULL, &st);
    ck_assert_msg(st == TCOMMS_SUCCESS, "%s", tcomms_last_error());
    expect(comm, "min_ctas", "1", TCOMMS_SETTING_DEFAULT, "", "");
    expect(comm, "cga_cluster_size", "4", TCOMMS_SETTING_DEFAULT, "", "");
    ck_assert_int_eq(tcomms_comm_destroy(comm), TCOMMS_SUCCESS);
}
END_TEST

/* The environment wins, as the library under the backend decides; the user is told, or refused under strict. */
START_TEST(test_overridden)
{
    char log[] = "/tmp/test_settings.XXXXXX";
    int fd = mkstemp(log);
    ck_assert_int_ge(fd, 0);
    setenv("TCOMMS_LOG_FILE", log, 1);
    setenv("FAKENCCL_MIN_CTAS", "2", 1);
    tcomms_status_t st;
    tcomms_comm_t *comm = create("fakenccl", "min_ctas=4", &st);
    ck_assert_msg(st == TCOMMS_SUCCESS, "%s", tcomms_last_error());
    expect(comm, "min_ctas", "2", TCOMMS_SETTING_ENV, "FAKENCCL_MIN_CTAS", "4");
    ck_assert_int_eq(tcomms_comm_destroy(comm), TCOMMS_SUCCESS);
    unsetenv("TCOMMS_LOG_FILE");
    char text[4096] = "";
    FILE *f = fopen(log, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    text[n] = '\0';
    fclose(f);
    close(fd);
    unlink(log);
    ck_assert_msg(strstr(text, " warn fakenccl: hint 'min_ctas=4' is overridden by FAKENCCL_MIN_CTAS=2") != NULL,
                  "no warning at the default level:\n%s", text);

    comm = create("fakenccl", "min_ctas=4,strictHints=yes", &st);
    ck_assert_ptr_null(comm);
    ck_assert_int_eq(st, TCOMMS_ERR_BAD_ENV);
    assert_message_has("hint 'min_ctas=4' is overridden by FAKENCCL_MIN_CTAS=2");
    assert_message_has("strict_hints");

    comm = create("fakenccl", "min_ctas=2,strict_hints=1", &st); /* the same value: nothing overridden */
    ck_assert_msg(st == TCOMMS_SUCCESS, "%s", tcomms_last_error());
    expect(comm, "min_ctas", "2", TCOMMS_SETTING_ENV, "FAKENCCL_MIN_CTAS", "");
    ck_assert_int_eq(tcomms_comm_destroy(comm), TCOMMS_SUCCESS);
}
END_TEST

/* tests/fake_backend.c has comm_hint only (max_ctas reads "7" whatever was asked). */
START_TEST(test_module_without_settings)
{
    tcomms_status_t st;
    tcomms_comm_t *comm = create("fakeok", "max_ctas=7", &st);
    ck_assert_msg(st == TCOMMS_SUCCESS, "%s", tcomms_last_error());
    expect(comm, "max_ctas", "7", TCOMMS_SETTING_HINT, "max_ctas", "");
    ck_assert_int_eq(tcomms_comm_destroy(comm), TCOMMS_SUCCESS);
    comm = create("fakeok", NULL, &st);
    ck_assert_msg(st == TCOMMS_SUCCESS, "%s", tcomms_last_error());
    expect(comm, "max_ctas", "7", TCOMMS_SETTING_DEFAULT, "", "");
    tcomms_setting_t s;
    ck_assert_int_eq(tcomms_comm_setting(comm, TCOMMS_DEVICE_CPU, "no_such_key", &s), TCOMMS_ERR_INVALID_ARG);
    ck_assert_int_eq(tcomms_comm_setting(comm, TCOMMS_DEVICE_CPU, "max_ctas", NULL), TCOMMS_ERR_INVALID_ARG);
    ck_assert_int_eq(tcomms_comm_destroy(comm), TCOMMS_SUCCESS);
    ck_assert_str_eq(tcomms_setting_source_name(TCOMMS_SETTING_ENV), "environment");
    ck_assert_str_eq(tcomms_setting_source_name((tcomms_setting_source_t)99), "unknown");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("settings");
    TCase *tc = tcase_create("settings");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_sources);
    tcase_add_test(tc, test_overridden);
    tcase_add_test(tc, test_module_without_settings);
    suite_add_tcase(s, tc);
    return check_run(s);
}
