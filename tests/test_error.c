/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests lib/error.c: every status has its own string naming the code, and the detailed message is per thread. */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "check_run.h"

START_TEST(test_strings)
{
    const char *seen[32] = {0};
    int n = 0;
    for (int st = TCOMMS_ERR_INTERNAL; st <= TCOMMS_IN_PROGRESS; st++) {
        const char *s = tcomms_strerror((tcomms_status_t)st);
        ck_assert_ptr_nonnull(s);
        ck_assert_msg(strncmp(s, "TCOMMS_", 7) == 0, "%d: %s", st, s);
        for (int i = 0; i < n; i++)
            ck_assert_msg(strcmp(seen[i], s) != 0, "two statuses share '%s'", s);
        seen[n++] = s;
    }
    ck_assert_str_eq(tcomms_strerror(TCOMMS_ERR_TIMEOUT), "TCOMMS_ERR_TIMEOUT: operation timed out");
    ck_assert_ptr_nonnull(strstr(tcomms_strerror((tcomms_status_t)-99), "UNKNOWN"));
}
END_TEST

static void *other_thread(void *arg)
{
    (void)arg;
    return (void *)(strcmp(tcomms_last_error(), "") == 0 ? "clean" : "leaked");
}

START_TEST(test_thread_local)
{
    ck_assert_int_eq(tc_error(TCOMMS_ERR_INVALID_ARG, "root %d out of range", 9), TCOMMS_ERR_INVALID_ARG);
    ck_assert_str_eq(tcomms_last_error(), "root 9 out of range");
    pthread_t t;
    void *result;
    ck_assert_int_eq(pthread_create(&t, NULL, other_thread, NULL), 0);
    pthread_join(t, &result);
    ck_assert_str_eq((const char *)result, "clean");
    tc_error_prefix(TCOMMS_ERR_INVALID_ARG, "split: ");
    ck_assert_str_eq(tcomms_last_error(), "split: root 9 out of range");
    char big[3000];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    tc_error(TCOMMS_ERR_INTERNAL, "%s", big);
    tc_error_prefix(TCOMMS_ERR_INTERNAL, "p: ");
    ck_assert(strncmp(tcomms_last_error(), "p: aaa", 6) == 0); /* truncated, never overflowing */
    tc_error_clear();
    ck_assert_str_eq(tcomms_last_error(), "");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("error");
    TCase *tc = tcase_create("error");
    tcase_add_test(tc, test_strings);
    tcase_add_test(tc, test_thread_local);
    suite_add_tcase(s, tc);
    return check_run(s);
}
