/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests lib/hints.c: spellings, validation of types and ranges, module namespaces, the TCOMMS_HINTS format, and the
 * cross-key check. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hints.h"
#include "check_run.h"

static tcomms_hints_t *h;

static void setup(void)
{
    ck_assert_int_eq(tcomms_hints_create(&h), TCOMMS_SUCCESS);
}

static void teardown(void)
{
    tcomms_hints_free(h);
}

static const char *value_of(const char *key)
{
    const char *v = NULL;
    return tcomms_hints_get(h, key, &v) == TCOMMS_SUCCESS ? v : NULL;
}

START_TEST(test_spellings)
{
    /* every spelling torchcomms accepts lands on one canonical key */
    const char *pairs[][2] = {{"is_high_priority_stream", "high_priority_stream"},
                              {"highPriorityStream", "high_priority_stream"},
                              {"cgaClusterSize", "cga_cluster_size"},
                              {"minCTAs", "min_ctas"},
                              {"maxCTAs", "max_ctas"},
                              {"splitShare", "split_share"}};
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++)
        ck_assert_str_eq(tc_hint_canonical(pairs[i][0]), pairs[i][1]);
    ck_assert_ptr_null(tc_hint_canonical("maxctas"));
    ck_assert_int_eq(tcomms_hints_set(h, "maxCTAs", "16"), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_hints_set(h, "max_ctas", "32"), TCOMMS_SUCCESS); /* replaces, not duplicates */
    size_t n;
    ck_assert_int_eq(tcomms_hints_count(h, &n), TCOMMS_SUCCESS);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(value_of("maxCTAs"), "32");
    const char *k, *v;
    ck_assert_int_eq(tcomms_hints_entry(h, 0, &k, &v), TCOMMS_SUCCESS);
    ck_assert_str_eq(k, "max_ctas");
    ck_assert_int_eq(tcomms_hints_entry(h, 1, &k, &v), TCOMMS_ERR_INVALID_ARG);
}
END_TEST

START_TEST(test_validation)
{
    const struct {
        const char *key, *value;
        tcomms_status_t want;
    } cases[] = {
        {"high_priority_stream", "yes", TCOMMS_SUCCESS}, {"high_priority_stream", "maybe", TCOMMS_ERR_INVALID_ARG},
        {"blocking", "0", TCOMMS_SUCCESS},               {"blocking", "2", TCOMMS_ERR_INVALID_ARG},
        {"cga_cluster_size", "8", TCOMMS_SUCCESS},       {"cga_cluster_size", "9", TCOMMS_ERR_INVALID_ARG},
        {"cga_cluster_size", "-1", TCOMMS_ERR_INVALID_ARG}, {"min_ctas", "abc", TCOMMS_ERR_INVALID_ARG},
        {"min_ctas", "0", TCOMMS_ERR_INVALID_ARG},       {"max_ctas", "64", TCOMMS_SUCCESS},
        {"max_ctas", "4x", TCOMMS_ERR_INVALID_ARG},      {"split_share", "off", TCOMMS_SUCCESS},
        /* "<module>.<key>" for a module in the search path (main() points it at the fakes), of any value */
        {"foo.algo", "ring", TCOMMS_SUCCESS},            {"fakeok.hostname", "h1", TCOMMS_SUCCESS},
        {"foo.a.b", "", TCOMMS_SUCCESS},                 {"mystery", "1", TCOMMS_ERR_INVALID_ARG},
        {"foo.", "1", TCOMMS_ERR_INVALID_ARG},           {"bar.bar", "1", TCOMMS_ERR_INVALID_ARG},
        {".bar", "1", TCOMMS_ERR_INVALID_ARG},           {"Foo.bar", "1", TCOMMS_ERR_INVALID_ARG},
        {"", "1", TCOMMS_ERR_INVALID_ARG},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tcomms_status_t st = tcomms_hints_set(h, cases[i].key, cases[i].value);
        ck_assert_msg(st == cases[i].want, "%s=%s gave %d", cases[i].key, cases[i].value, st);
        if (st != TCOMMS_SUCCESS && cases[i].key[0] != '\0')
            ck_assert_msg(strstr(tcomms_last_error(), cases[i].key) != NULL, "message '%s' does not name '%s'",
                          tcomms_last_error(), cases[i].key);
    }
    ck_assert_int_eq(tcomms_hints_set(h, NULL, "1"), TCOMMS_ERR_INVALID_ARG);
    ck_assert_int_eq(tcomms_hints_set(h, "blocking", NULL), TCOMMS_ERR_INVALID_ARG);
    ck_assert_int_eq(tcomms_hints_set(NULL, "blocking", "1"), TCOMMS_ERR_INVALID_ARG);
    char long_value[400];
    memset(long_value, 'x', sizeof(long_value) - 1);
    long_value[sizeof(long_value) - 1] = '\0';
    ck_assert_int_eq(tcomms_hints_set(h, "foo.x", long_value), TCOMMS_ERR_INVALID_ARG);
    /* a failed set leaves no entry behind */
    ck_assert_ptr_null(value_of("mystery"));
    ck_assert_str_eq(value_of("blocking"), "0");
}
END_TEST

START_TEST(test_parse)
{
    ck_assert_int_eq(tcomms_hints_parse(h, " minCTAs = 4 , max_ctas=8,, foo.x=y,"), TCOMMS_SUCCESS);
    ck_assert_str_eq(value_of("min_ctas"), "4");
    ck_assert_str_eq(value_of("max_ctas"), "8");
    ck_assert_str_eq(value_of("foo.x"), "y");
    ck_assert_int_eq(tc_hints_check(h), TCOMMS_SUCCESS);
    /* a bad item anywhere leaves the set untouched */
    ck_assert_int_eq(tcomms_hints_parse(h, "blocking=1,min_ctas"), TCOMMS_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tcomms_last_error(), "min_ctas"));
    ck_assert_int_eq(tcomms_hints_parse(h, "blocking=1,bogus=2"), TCOMMS_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tcomms_last_error(), "bogus"));
    ck_assert_ptr_null(value_of("blocking"));
    ck_assert_int_eq(tcomms_hints_parse(h, ""), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_hints_parse(h, NULL), TCOMMS_ERR_INVALID_ARG);
}
END_TEST

START_TEST(test_merge_and_check)
{
    tcomms_hints_t *other;
    ck_assert_int_eq(tcomms_hints_create(&other), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_hints_parse(h, "min_ctas=2,max_ctas=4"), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_hints_parse(other, "minCTAs=8"), TCOMMS_SUCCESS);
    ck_assert_int_eq(tc_hints_merge(h, other), TCOMMS_SUCCESS);
    ck_assert_str_eq(value_of("min_ctas"), "8");
    ck_assert_int_eq(tc_hints_check(h), TCOMMS_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tcomms_last_error(), "min_ctas"));
    tcomms_hints_free(other);
    ck_assert_int_eq(tcomms_hints_get(h, "blocking", &(const char *){NULL}), TCOMMS_ERR_NOT_FOUND);
}
END_TEST

/* 20,000 entries (the size that took 715 ms when each set searched every entry) with repeated keys: every value
 * where it belongs, later values replacing earlier ones in place. */
START_TEST(test_parse_many)
{
    enum { N = 20000, REPEATED = 500 };
    size_t cap = (size_t)(N + REPEATED) * 32;
    char *spec = malloc(cap), key[32], want[32];
    ck_assert_ptr_nonnull(spec);
    size_t len = 0;
    for (int i = 0; i < N; i++)
        len += (size_t)snprintf(spec + len, cap - len, "%sfoo.k%d=v%d", i ? "," : "", i, i);
    for (int i = 0; i < REPEATED; i++) /* every 40th key again, with a new value */
        len += (size_t)snprintf(spec + len, cap - len, ",foo.k%d=w%d", i * 40, i);
    ck_assert_int_eq(tcomms_hints_parse(h, spec), TCOMMS_SUCCESS);
    size_t n = 0;
    ck_assert_int_eq(tcomms_hints_count(h, &n), TCOMMS_SUCCESS);
    ck_assert_uint_eq(n, N);
    for (int i = 0; i < N; i++) {
        const char *k = NULL, *v = NULL;
        ck_assert_int_eq(tcomms_hints_entry(h, (size_t)i, &k, &v), TCOMMS_SUCCESS);
        snprintf(key, sizeof key, "foo.k%d", i);
        if (i % 40 == 0 && i / 40 < REPEATED)
            snprintf(want, sizeof want, "w%d", i / 40);
        else
            snprintf(want, sizeof want, "v%d", i);
        ck_assert_str_eq(k, key);
        ck_assert_str_eq(v, want);
        ck_assert_str_eq(value_of(key), want);
    }
    ck_assert_ptr_null(value_of("foo.k20000"));
    /* a bad item at the end leaves every entry as it was */
    ck_assert_int_eq(tcomms_hints_parse(h, "foo.k1=changed,min_ctas=999"), TCOMMS_ERR_INVALID_ARG);
    ck_assert_str_eq(value_of("foo.k1"), "v1");
    free(spec);
}
END_TEST

int main(void)
{
    /* The fake modules (tests/local.mk), so that "foo.*" and "fakeok.*" are namespaces whatever backends are built. */
    const char *modules = getenv("TCOMMS_TEST_MODULES");
    if (modules == NULL) {
        fprintf(stderr, "TCOMMS_TEST_MODULES is not set\n");
        return EXIT_FAILURE;
    }
    setenv("TCOMMS_BACKEND_PATH", modules, 1);
    Suite *s = suite_create("hints");
    TCase *tc = tcase_create("hints");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_spellings);
    tcase_add_test(tc, test_validation);
    tcase_add_test(tc, test_parse);
    tcase_add_test(tc, test_merge_and_check);
    tcase_add_test(tc, test_parse_many);
    suite_add_tcase(s, tc);
    return check_run(s);
}
