# SPDX-License-Identifier: BSD-3-Clause
# FSDP training against the unsharded reference (examples/fsdp_mlp): a subset of the matrix in make check, the
# whole matrix in make check-full (TCOMMS_FSDP_FULL=1; tens of minutes on 2 cores).
if HAVE_CHECK
check_PROGRAMS += tests/test_fsdp_train
TESTS += tests/test_fsdp_train
tests_test_fsdp_train_SOURCES = tests/test_fsdp_train.c
tests_test_fsdp_train_CFLAGS = $(test_cflags)
tests_test_fsdp_train_LDADD = examples/fsdp_mlp/libfsdpmlp.la $(mrank_ldadd)

# The example's default run learns, and its sharded run prints what --reference prints (tests/test_fsdp_example.sh).
TESTS += tests/test_fsdp_example.sh
EXTRA_DIST += tests/test_fsdp_example.sh
AM_TESTS_ENVIRONMENT += FSDP_MLP='$(abs_top_builddir)/examples/fsdp_mlp/fsdp_mlp'; export FSDP_MLP;

check-full: all tests/test_fsdp_train
	@$(AM_TESTS_ENVIRONMENT) TCOMMS_FSDP_FULL=1 $(abs_top_builddir)/tests/test_fsdp_train
.PHONY: check-full
endif
