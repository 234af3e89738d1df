# SPDX-License-Identifier: BSD-3-Clause
# The CUDA shim (lib/cuda/shim.h), a convenience library: libtcomms takes it in, hidden, where the FSDP runtime has a
# CUDA path (lib/fsdp/local.mk), and tcomms-perf links its own copy. It links no CUDA library; where configure found the
# toolkit its headers give the prototypes, through TC_CUDA_SHIM_CPPFLAGS, which every includer of shim.h takes.
if HAVE_CUDA
TC_CUDA_SHIM_CPPFLAGS = -DTC_CUDA_HEADERS $(CUDA_CPPFLAGS)
else
TC_CUDA_SHIM_CPPFLAGS =
endif
noinst_LTLIBRARIES += lib/cuda/libtccuda.la
lib_cuda_libtccuda_la_SOURCES = lib/cuda/shim.c lib/cuda/shim.h
lib_cuda_libtccuda_la_CPPFLAGS = $(AM_CPPFLAGS) $(TC_CUDA_SHIM_CPPFLAGS)
lib_cuda_libtccuda_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
