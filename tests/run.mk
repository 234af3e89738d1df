# SPDX-License-Identifier: BSD-3-Clause
# Tests of the launcher: test_run starts the built tools/run/tcomms-run ($TCOMMS_RUN) on tests/run_child
# ($RUN_CHILD), a helper whose options make a rank print its environment, fail, or trap signals; tests/run_harness.c
# runs the launcher and checks that nothing is left.
if HAVE_CHECK
check_PROGRAMS += tests/test_run tests/run_child
TESTS += tests/test_run

tests_test_run_SOURCES = tests/test_run.c tests/run_harness.c tests/run_harness.h
tests_test_run_CFLAGS = $(test_cflags)
tests_test_run_LDADD = $(CHECK_LIBS)
tests_run_child_SOURCES = tests/run_child.c
endif
