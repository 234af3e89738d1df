# SPDX-License-Identifier: BSD-3-Clause
# The FSDP runtime (include/tcomms/fsdp.h), built into libtcomms: rank layout and communicator collection
# (layout.c, groups.c), then the runtime itself (runtime.c and the files rt.h lists).
lib_libtccore_la_SOURCES += \
	lib/fsdp/layout.c lib/fsdp/groups.c lib/fsdp/groups.h \
	lib/fsdp/rt.h lib/fsdp/runtime.c lib/fsdp/bucket.c lib/fsdp/gather.c lib/fsdp/reduce.c lib/fsdp/install.c \
	lib/fsdp/issue.c lib/fsdp/ops.c lib/fsdp/window.c

# The CUDA path (cuda.c) needs nvcc for its kernels: kernels.cu becomes a fatbin, embedded as a byte array that
# cuda.c loads with cuModuleLoadData. It reaches the driver through the CUDA shim (lib/cuda/local.mk), taken in here;
# nothing links a CUDA library. Without nvcc, cuda_none.c makes a CUDA runtime's finalize report NOT_SUPPORTED.
EXTRA_DIST += lib/fsdp/kernels.cu
if HAVE_NVCC
noinst_LTLIBRARIES += lib/fsdp/libtcfsdpcuda.la
lib_fsdp_libtcfsdpcuda_la_SOURCES = lib/fsdp/cuda.c
nodist_lib_fsdp_libtcfsdpcuda_la_SOURCES = lib/fsdp/kernels_fatbin.c
lib_fsdp_libtcfsdpcuda_la_CPPFLAGS = $(AM_CPPFLAGS) $(TC_CUDA_SHIM_CPPFLAGS)
lib_fsdp_libtcfsdpcuda_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
lib_libtccore_la_LIBADD += lib/fsdp/libtcfsdpcuda.la lib/cuda/libtccuda.la
CLEANFILES += lib/fsdp/kernels.fatbin lib/fsdp/kernels_fatbin.c

lib/fsdp/kernels.fatbin: $(srcdir)/lib/fsdp/kernels.cu
	@$(MKDIR_P) lib/fsdp
	$(AM_V_GEN)$(NVCC) -fatbin -std=c++17 -O2 $(NVCC_ARCH) -Xcompiler -Wall,-Wextra,-Werror \
	  -o $@ $(srcdir)/lib/fsdp/kernels.cu

lib/fsdp/kernels_fatbin.c: lib/fsdp/kernels.fatbin
	$(AM_V_GEN)$(EMBED_FATBIN) tc_fsdp_fatbin lib/fsdp/kernels.fatbin >$@-t && mv $@-t $@
else
lib_libtccore_la_SOURCES += lib/fsdp/cuda_none.c
endif
