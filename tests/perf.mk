# tcomms-perf's test: test_perf runs the built tools/perf/tcomms-perf ($TCOMMS_PERF) under the built launcher
# ($TCOMMS_RUN) on every CPU backend and parses its table and JSON output.
AM_TESTS_ENVIRONMENT += TCOMMS_PERF='$(abs_top_builddir)/tools/perf/tcomms-perf'; export TCOMMS_PERF;

if HAVE_CHECK
check_PROGRAMS += tests/test_perf
TESTS += tests/test_perf

tests_test_perf_SOURCES = tests/test_perf.c
tests_test_perf_CPPFLAGS = $(AM_CPPFLAGS)
tests_test_perf_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_test_perf_LDADD = $(CHECK_LIBS) -lm
endif
