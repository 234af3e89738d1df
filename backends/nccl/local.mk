# SPDX-License-Identifier: BSD-3-Clause
# NCCL backend module (CUDA): built when configure finds CUDA and NCCL (BUILD_NCCL). A C11 module the core dlopens
# as tcomms_nccl.so; it records libnccl.so.2 and libcudart by soname (NCCL_LIBS), so it also loads where NCCL lives
# elsewhere. Everything but the tcomms_backend_module table stays hidden.
if BUILD_NCCL
pkglib_LTLIBRARIES += backends/nccl/tcomms_nccl.la
backends_nccl_tcomms_nccl_la_SOURCES = \
	backends/nccl/tcn.h backends/nccl/module.c backends/nccl/util.c backends/nccl/config.c backends/nccl/comm.c \
	backends/nccl/ops.c backends/nccl/scratch.c backends/nccl/work.c backends/nccl/group.c \
	backends/nccl/watchdog.c backends/nccl/end.c backends/nccl/mem.c backends/nccl/small_args.h \
	backends/nccl/small.c backends/nccl/window.c
backends_nccl_tcomms_nccl_la_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS)
backends_nccl_tcomms_nccl_la_CFLAGS = $(MODULE_CFLAGS)
backends_nccl_tcomms_nccl_la_LDFLAGS = $(MODULE_LDFLAGS)
backends_nccl_tcomms_nccl_la_LIBADD = $(NCCL_LIBS) -lpthread
# The small-message kernels (small.cu) as an embedded fatbin, like the FSDP runtime's; without nvcc the path is
# off (small.c agrees on that with the peers all the same).
if HAVE_NVCC
nodist_backends_nccl_tcomms_nccl_la_SOURCES = backends/nccl/small_fatbin.c
backends_nccl_tcomms_nccl_la_CPPFLAGS += -DTCN_HAVE_SMALL=1
CLEANFILES += backends/nccl/small.fatbin backends/nccl/small_fatbin.c

backends/nccl/small.fatbin: $(srcdir)/backends/nccl/small.cu $(srcdir)/backends/nccl/small_args.h
	@$(MKDIR_P) backends/nccl
	$(AM_V_GEN)$(NVCC) -fatbin $(NVCC_FLAGS) -o $@ $(srcdir)/backends/nccl/small.cu

backends/nccl/small_fatbin.c: backends/nccl/small.fatbin
	$(AM_V_GEN)$(EMBED_FATBIN) tcn_small_fatbin backends/nccl/small.fatbin >$@-t && mv $@-t $@
else
backends_nccl_tcomms_nccl_la_CPPFLAGS += -DTCN_HAVE_SMALL=0
endif
endif
EXTRA_DIST += backends/nccl/small.cu
# test_old_nccl.sh compiles the module's sources as make does, against stand-ins for older NCCL releases.
if BUILD_NCCL
NCCL_TEST_ENV = TCN_CC='$(CC)'; TCN_CFLAGS='$(DEFS) $(DEFAULT_INCLUDES) $(backends_nccl_tcomms_nccl_la_CPPFLAGS) \
	$(CPPFLAGS) $(AM_CFLAGS) $(CFLAGS)'; export TCN_CC TCN_CFLAGS;
else
NCCL_TEST_ENV =
endif
EXTRA_DIST += docs/nccl.md
TESTS += backends/nccl/test_module.sh backends/nccl/test_old_nccl.sh
EXTRA_DIST += backends/nccl/test_module.sh backends/nccl/test_old_nccl.sh
