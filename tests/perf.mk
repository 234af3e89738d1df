# SPDX-License-Identifier: BSD-3-Clause
# tcomms-perf's test: test_perf runs the built tools/perf/tcomms-perf ($TCOMMS_PERF) under the built launcher
# ($TCOMMS_RUN) on every CPU backend and parses its table and JSON output. For --device cuda without a GPU it loads a
# stand-in CUDA runtime (tools/perf/test_cudart.c, built here as tests/perf_cudart.la) and the single-rank
# "fakecuda" test backend (tests/local.mk) from tests/.libs.
AM_TESTS_ENVIRONMENT += TCOMMS_PERF='$(abs_top_builddir)/tools/perf/tcomms-perf'; export TCOMMS_PERF; \
	TCOMMS_PERF_TEST_LIBS='$(abs_top_builddir)/tests/.libs'; export TCOMMS_PERF_TEST_LIBS;

if HAVE_CHECK
check_PROGRAMS += tests/test_perf
TESTS += tests/test_perf

tests_test_perf_SOURCES = tests/test_perf.c
tests_test_perf_CFLAGS = $(test_cflags)
tests_test_perf_LDADD = tests/libmrank.la $(CHECK_LIBS) -lm

# -rpath makes libtool build a real shared object (in tests/.libs), which tcomms-perf dlopens by path.
check_LTLIBRARIES += tests/perf_cudart.la
tests_perf_cudart_la_SOURCES = tools/perf/test_cudart.c
tests_perf_cudart_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere
endif
# tcomms-perf against nccl-tests' command line, text and JSON (a shell test: needs python3, else skipped).
TESTS += tests/test_perf_nccl.sh
EXTRA_DIST += tests/test_perf_nccl.sh
