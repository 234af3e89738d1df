# SPDX-License-Identifier: BSD-3-Clause
# FSDP runtime tests on the CPU backends: layouts against brute-force enumeration and the communicators
# tcomms_fsdp_groups_create makes (test_fsdp_layout), the runtime's buckets and strategies against loop-computed
# results (test_fsdp_runtime), its call order, reference counts, configuration errors and failures
# (test_fsdp_calls), and on a GPU's schedule of lanes with recording ops (test_fsdp_lanes); the last three share
# tests/fsdp_case.c. Training against an unsharded reference is in tests/fsdp_train.mk.
if HAVE_CHECK
check_PROGRAMS += tests/test_fsdp_layout tests/test_fsdp_runtime tests/test_fsdp_calls tests/test_fsdp_lanes
TESTS += tests/test_fsdp_layout tests/test_fsdp_runtime tests/test_fsdp_calls tests/test_fsdp_lanes
tests_test_fsdp_layout_SOURCES = tests/test_fsdp_layout.c
tests_test_fsdp_layout_CFLAGS = $(test_cflags)
# links the core statically: it also checks hidden tc_fsdp_* helpers
tests_test_fsdp_layout_LDADD = $(mrank_core_ldadd)
tests_test_fsdp_runtime_SOURCES = tests/test_fsdp_runtime.c tests/fsdp_case.c tests/fsdp_case.h tests/fsdp_values.h
tests_test_fsdp_runtime_CFLAGS = $(test_cflags)
tests_test_fsdp_runtime_LDADD = $(mrank_ldadd)
tests_test_fsdp_calls_SOURCES = tests/test_fsdp_calls.c tests/fsdp_case.c tests/fsdp_case.h tests/fsdp_values.h
tests_test_fsdp_calls_CFLAGS = $(test_cflags)
tests_test_fsdp_calls_LDADD = $(mrank_ldadd)
# links the core statically: it swaps the runtime's ops for recording ones (lib/fsdp/rt.h)
tests_test_fsdp_lanes_SOURCES = tests/test_fsdp_lanes.c tests/fsdp_case.c tests/fsdp_case.h tests/fsdp_values.h
tests_test_fsdp_lanes_CFLAGS = $(test_cflags)
tests_test_fsdp_lanes_LDADD = $(mrank_core_ldadd)
endif
