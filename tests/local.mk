# SPDX-License-Identifier: BSD-3-Clause
# Check tests: unit tests of lib/ link the core convenience library; multi-rank suites (tests/mrank.mk) run every
# collective on every CPU backend that is built; tests/run.mk tests the launcher.

# The flags every Check program is built with, defined once for all the tests/*.mk fragments. A program names its
# own _CPPFLAGS only to add to AM_CPPFLAGS, which automake uses where it names none. -pthread: libmrank's aborting
# thread (tests/mrank_world.c), and Check where its check.pc leaves it out.
test_cflags = $(AM_CFLAGS) $(CHECK_CFLAGS) -pthread
# Unit tests link the core's convenience library (hidden tc_* symbols included); multi-rank suites the harness
# (tests/mrank.mk) and the shared library, or the harness and the core where they reach hidden symbols too.
unit_ldadd = lib/libtccore.la $(CHECK_LIBS) -lm
mrank_ldadd = tests/libmrank.la lib/libtcomms.la $(CHECK_LIBS) -lm
mrank_core_ldadd = tests/libmrank.la $(unit_ldadd)

# Built CPU backends, for the table-driven multi-rank tests.
TEST_BACKENDS =
if BUILD_GLOO
TEST_BACKENDS += gloo
endif
if BUILD_UCX
TEST_BACKENDS += ucx
endif

AM_TESTS_ENVIRONMENT = \
	TCOMMS_BACKEND_PATH='$(abs_top_builddir)/backends/gloo/.libs:$(abs_top_builddir)/backends/ucx/.libs'; \
	export TCOMMS_BACKEND_PATH; \
	TCOMMS_TEST_BACKENDS='$(TEST_BACKENDS)'; export TCOMMS_TEST_BACKENDS; \
	TCOMMS_TEST_MODULES='$(abs_top_builddir)/tests/.libs'; export TCOMMS_TEST_MODULES; \
	TCOMMS_TEST_PKGLIBDIR='$(pkglibdir)'; TCOMMS_TEST_BUILDDIR='$(abs_top_builddir)'; \
	export TCOMMS_TEST_PKGLIBDIR TCOMMS_TEST_BUILDDIR; \
	TCOMMS_RUN='$(abs_top_builddir)/tools/run/tcomms-run'; export TCOMMS_RUN; \
	RUN_CHILD='$(abs_top_builddir)/tests/run_child'; export RUN_CHILD; \
	unset TCOMMS_BACKEND TCOMMS_HINTS TCOMMS_RANK TCOMMS_SIZE RANK WORLD_SIZE OMPI_COMM_WORLD_RANK SLURM_PROCID; \
	$(NCCL_TEST_ENV)

if HAVE_CHECK
unit_tests = tests/test_dtype tests/test_hints tests/test_env tests/test_error tests/test_store tests/test_store_coll \
	tests/test_store_guard tests/test_loader tests/test_log tests/test_settings tests/test_hash
check_PROGRAMS += $(unit_tests)
TESTS += $(unit_tests)

tests_test_dtype_SOURCES = tests/test_dtype.c
tests_test_dtype_CFLAGS = $(test_cflags)
tests_test_dtype_LDADD = $(unit_ldadd)
tests_test_settings_SOURCES = tests/test_settings.c tests/check_run.h
tests_test_settings_CFLAGS = $(test_cflags)
tests_test_settings_LDADD = $(unit_ldadd)
tests_test_hints_SOURCES = tests/test_hints.c
tests_test_hints_CFLAGS = $(test_cflags)
tests_test_hints_LDADD = $(unit_ldadd)
tests_test_env_SOURCES = tests/test_env.c
tests_test_env_CFLAGS = $(test_cflags)
tests_test_env_LDADD = $(unit_ldadd)
tests_test_hash_SOURCES = tests/test_hash.c
tests_test_hash_CFLAGS = $(test_cflags)
tests_test_hash_LDADD = $(unit_ldadd)
tests_test_log_SOURCES = tests/test_log.c
tests_test_log_CFLAGS = $(test_cflags)
tests_test_log_LDADD = $(unit_ldadd)
tests_test_error_SOURCES = tests/test_error.c
tests_test_error_CFLAGS = $(test_cflags)
tests_test_error_LDADD = $(unit_ldadd)
tests_test_store_SOURCES = tests/test_store.c
tests_test_store_CFLAGS = $(test_cflags)
tests_test_store_LDADD = $(unit_ldadd)
tests_test_store_coll_SOURCES = tests/test_store_coll.c
tests_test_store_coll_CFLAGS = $(test_cflags)
tests_test_store_coll_LDADD = $(unit_ldadd)
tests_test_store_guard_SOURCES = tests/test_store_guard.c
tests_test_store_guard_CFLAGS = $(test_cflags)
tests_test_store_guard_LDADD = $(mrank_core_ldadd)
tests_test_loader_SOURCES = tests/test_loader.c
tests_test_loader_CFLAGS = $(test_cflags)
tests_test_loader_LDADD = $(unit_ldadd)

# The same fake module built eight ways for the loader tests; -rpath makes libtool build real shared objects.
# fakeabi has the major after ours, fakeprev an older minor's table (7.0), fakenewer the minor after ours, fakenopost
# no post entry; foo is a module of its own hint namespace that outranks every module of the tree by priority.
fake_ldflags = -module -avoid-version -shared -rpath /nowhere
check_LTLIBRARIES += tests/tcomms_fakeok.la tests/tcomms_fakeabi.la tests/tcomms_fakedecline.la \
	tests/tcomms_fakenosym.la tests/tcomms_fakeprev.la tests/tcomms_fakenewer.la tests/tcomms_fakenopost.la \
	tests/tcomms_foo.la
tests_tcomms_fakeok_la_SOURCES = tests/fake_backend.c
tests_tcomms_fakeok_la_LDFLAGS = $(fake_ldflags)
tests_tcomms_fakeabi_la_SOURCES = tests/fake_backend.c
tests_tcomms_fakeabi_la_CPPFLAGS = $(AM_CPPFLAGS) '-DFAKE_ABI_MAJOR=(TCOMMS_BACKEND_ABI_MAJOR + 1)'
tests_tcomms_fakeabi_la_LDFLAGS = $(fake_ldflags)
tests_tcomms_fakeprev_la_SOURCES = tests/fake_backend.c
tests_tcomms_fakeprev_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_PREV_MINOR
tests_tcomms_fakeprev_la_LDFLAGS = $(fake_ldflags)
tests_tcomms_fakenewer_la_SOURCES = tests/fake_backend.c
tests_tcomms_fakenewer_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NEWER_MINOR
tests_tcomms_fakenewer_la_LDFLAGS = $(fake_ldflags)
tests_tcomms_fakenopost_la_SOURCES = tests/fake_backend.c
tests_tcomms_fakenopost_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NO_POST
tests_tcomms_fakenopost_la_LDFLAGS = $(fake_ldflags)
tests_tcomms_foo_la_SOURCES = tests/fake_backend.c
tests_tcomms_foo_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_FOO
tests_tcomms_foo_la_LDFLAGS = $(fake_ldflags)
tests_tcomms_fakedecline_la_SOURCES = tests/fake_backend.c
tests_tcomms_fakedecline_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_DECLINE
tests_tcomms_fakedecline_la_LDFLAGS = $(fake_ldflags)
tests_tcomms_fakenosym_la_SOURCES = tests/fake_backend.c
tests_tcomms_fakenosym_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NO_SYMBOL
tests_tcomms_fakenosym_la_LDFLAGS = $(fake_ldflags)
# A stand-in for NCCL's environment variables over its config, for test_settings.
check_LTLIBRARIES += tests/tcomms_fakenccl.la
tests_tcomms_fakenccl_la_SOURCES = tests/fake_settings.c
tests_tcomms_fakenccl_la_LDFLAGS = $(fake_ldflags)

# Single-rank CUDA-serving fakes (no CUDA needed): "fakecuda" has every optional ABI entry and counts the core's
# calls (tests/fake_calls.h), "fakecudabare" has none. test_bind and test_mem drive the core through them.
check_LTLIBRARIES += tests/tcomms_fakecuda.la tests/tcomms_fakecudabare.la
tests_tcomms_fakecuda_la_SOURCES = tests/fake_backend.c tests/fake_calls.h
tests_tcomms_fakecuda_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_CUDA
tests_tcomms_fakecuda_la_LDFLAGS = $(fake_ldflags)
tests_tcomms_fakecudabare_la_SOURCES = tests/fake_backend.c tests/fake_calls.h
tests_tcomms_fakecudabare_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_CUDA -DFAKE_BARE
tests_tcomms_fakecudabare_la_LDFLAGS = $(fake_ldflags)

# Binding, routing, split non-members, groups and memory over the fakes; groups, synchronize and memory on the
# real CPU backends (3 and 2 ranks, tests/libmrank.la).
core_tests = tests/test_bind tests/test_mem tests/test_group
check_PROGRAMS += $(core_tests)
TESTS += $(core_tests)
tests_test_bind_SOURCES = tests/test_bind.c tests/fake_calls.h
tests_test_bind_CFLAGS = $(test_cflags)
tests_test_bind_LDADD = lib/libtcomms.la $(CHECK_LIBS)
tests_test_mem_SOURCES = tests/test_mem.c tests/fake_calls.h
tests_test_mem_CFLAGS = $(test_cflags)
tests_test_mem_LDADD = $(mrank_ldadd)
tests_test_group_SOURCES = tests/test_group.c
tests_test_group_CFLAGS = $(test_cflags)
tests_test_group_LDADD = $(mrank_ldadd)
endif

EXTRA_DIST += tests/check_run.h tests/sh_lib.sh

include tests/run.mk
include tests/mrank.mk
include tests/perf.mk
include tests/cuda.mk
include tests/plot.mk
include tests/mpirun.mk
include tests/tools.mk
include tests/compare.mk
include tests/concurrent.mk
include tests/fsdp.mk
include tests/fsdp_train.mk
include tests/gpu/local.mk
include tests/python.mk
