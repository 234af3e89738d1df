# SPDX-License-Identifier: BSD-3-Clause
# Device tests (tests/gpu): test_coll_cuda (tests/test_coll.c again, on NCCL with device buffers), test_nccl and
# test_fsdp_cuda, built when configure finds CUDA and NCCL (BUILD_NCCL) and run on a GPU machine by tests/gpu/run.sh.
# make check runs run.sh too: without a GPU (or without the NCCL build) every program exits 77, so it counts as
# skipped. -no-install links real binaries instead of libtool wrappers, so a build tree carried to a GPU machine
# without libtool runs them (run.sh sets LD_LIBRARY_PATH).
TESTS += tests/gpu/run.sh
EXTRA_DIST += tests/gpu/run.sh tests/gpu/env.sh tests/gpu/torch.sh tests/gpu/torch_cuda.py tests/gpu/torch_routed.py
AM_TESTS_ENVIRONMENT += TCOMMS_GPU_BUILD='$(abs_top_builddir)'; export TCOMMS_GPU_BUILD; \
	TCOMMS_GPU_CUDA_LDFLAGS='$(CUDA_LDFLAGS)'; export TCOMMS_GPU_CUDA_LDFLAGS;

if BUILD_NCCL
if HAVE_CHECK
gpu_cppflags = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
gpu_ldadd = $(mrank_ldadd) $(CUDA_LDFLAGS) -lcudart
gpu_util_sources = tests/gpu/gpu_util.c tests/gpu/gpu_util.h

check_PROGRAMS += tests/gpu/test_coll_cuda tests/gpu/test_nccl

tests_gpu_test_coll_cuda_SOURCES = tests/test_coll.c tests/gpu/mirror.c tests/gpu/mirror.h $(gpu_util_sources)
tests_gpu_test_coll_cuda_CPPFLAGS = $(gpu_cppflags) -DTC_TEST_CUDA
tests_gpu_test_coll_cuda_CFLAGS = $(test_cflags)
tests_gpu_test_coll_cuda_LDFLAGS = -no-install
tests_gpu_test_coll_cuda_LDADD = $(gpu_ldadd)

# -export-dynamic: nccl_death.c's ncclCommSplit, nccl_shrink.c's ncclCommShrink and nccl_fault.c's ncclAllReduce
# must be the ones the NCCL module's calls bind to.
tests_gpu_test_nccl_SOURCES = tests/gpu/test_nccl.c tests/gpu/nccl_cases.c tests/gpu/nccl_streams.c \
	tests/gpu/nccl_death.c tests/gpu/nccl_fault.c tests/gpu/nccl_ce.c tests/gpu/nccl_window.c tests/gpu/nccl_small.c \
	tests/gpu/nccl_abort.c tests/gpu/nccl_flight.c tests/gpu/nccl_shrink.c tests/gpu/nccl_cases.h tests/coll_ref.c tests/coll_ref.h $(gpu_util_sources)
tests_gpu_test_nccl_CPPFLAGS = $(gpu_cppflags)
tests_gpu_test_nccl_CFLAGS = $(test_cflags)
tests_gpu_test_nccl_LDFLAGS = -no-install -export-dynamic
tests_gpu_test_nccl_LDADD = $(gpu_ldadd)

# The FSDP runtime's CUDA path (lib/fsdp/cuda.c), which exists only in a build with nvcc.
if HAVE_NVCC
check_PROGRAMS += tests/gpu/test_fsdp_cuda
tests_gpu_test_fsdp_cuda_SOURCES = tests/gpu/test_fsdp_cuda.c tests/fsdp_values.h $(gpu_util_sources)
tests_gpu_test_fsdp_cuda_CPPFLAGS = $(gpu_cppflags)
tests_gpu_test_fsdp_cuda_CFLAGS = $(test_cflags)
tests_gpu_test_fsdp_cuda_LDFLAGS = -no-install
tests_gpu_test_fsdp_cuda_LDADD = $(gpu_ldadd)
endif
endif
endif
