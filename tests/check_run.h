/* SPDX-License-Identifier: BSD-3-Clause */
/* The end of every Check test program's main(): run the suite, report, and turn the failures into the exit status
 * (0 when every test passed). */
#ifndef TESTS_CHECK_RUN_H
#define TESTS_CHECK_RUN_H

#include <check.h>
#include <stdlib.h>

static inline int check_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
