# SPDX-License-Identifier: BSD-3-Clause
# Concurrency tests on the CPU backends: several communicators at once, many large collectives in flight.
if HAVE_CHECK
check_PROGRAMS += tests/test_concurrent
TESTS += tests/test_concurrent
tests_test_concurrent_SOURCES = tests/test_concurrent.c
tests_test_concurrent_CFLAGS = $(test_cflags)
tests_test_concurrent_LDADD = $(mrank_ldadd)
endif
