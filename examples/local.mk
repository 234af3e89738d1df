# SPDX-License-Identifier: BSD-3-Clause
# Example programs (built by 'make', not installed).
noinst_PROGRAMS += examples/allreduce
examples_allreduce_SOURCES = examples/allreduce.c
examples_allreduce_LDADD = lib/libtcomms.la
include examples/fsdp_mlp/local.mk
