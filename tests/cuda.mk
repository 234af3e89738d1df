# SPDX-License-Identifier: BSD-3-Clause
# The CUDA shim's test (lib/cuda): built as the shim is (TC_CUDA_SHIM_CPPFLAGS), it loads the stand-in runtime that
# tests/perf.mk builds (tests/.libs/perf_cudart.so, found through TCOMMS_PERF_TEST_LIBS).
if HAVE_CHECK
check_PROGRAMS += tests/test_cuda_shim
TESTS += tests/test_cuda_shim
tests_test_cuda_shim_SOURCES = tests/test_cuda_shim.c
tests_test_cuda_shim_CPPFLAGS = $(AM_CPPFLAGS) $(TC_CUDA_SHIM_CPPFLAGS)
tests_test_cuda_shim_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_test_cuda_shim_LDADD = lib/cuda/libtccuda.la $(CHECK_LIBS)
endif
