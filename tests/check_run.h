/* SPDX-License-Identifier: BSD-3-Clause */
/* What every Check test program shares: the end of its main() (run the suite, report, and turn the failures into
 * the exit status, 0 when every test passed), and the assertion on the library's last message. */
#ifndef TESTS_CHECK_RUN_H
#define TESTS_CHECK_RUN_H

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <tcomms/tcomms.h>

static inline int check_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* This thread's last tcomms message contains `needle`. */
static inline void assert_message_has(const char *needle)
{
    const char *msg = tcomms_last_error();
    ck_assert_msg(msg != NULL && strstr(msg, needle) != NULL, "'%s' lacks '%s'", msg ? msg : "(null)", needle);
}

#endif
