# NCCL backend module (CUDA): built when configure finds CUDA and NCCL (BUILD_NCCL). A C11 module the core dlopens
# as tcomms_nccl.so; it records libnccl.so.2 and libcudart by soname (NCCL_LIBS), so it also loads where NCCL lives
# elsewhere. Everything but the tcomms_backend_module table stays hidden.
if BUILD_NCCL
pkglib_LTLIBRARIES += backends/nccl/tcomms_nccl.la
backends_nccl_tcomms_nccl_la_SOURCES = \
	backends/nccl/tcn.h \
	backends/nccl/module.c \
	backends/nccl/util.c \
	backends/nccl/config.c \
	backends/nccl/comm.c \
	backends/nccl/ops.c \
	backends/nccl/scratch.c \
	backends/nccl/work.c \
	backends/nccl/group.c \
	backends/nccl/watchdog.c \
	backends/nccl/mem.c
backends_nccl_tcomms_nccl_la_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS)
backends_nccl_tcomms_nccl_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
backends_nccl_tcomms_nccl_la_LDFLAGS = $(AM_LDFLAGS) -module -avoid-version -shared \
	-export-symbols-regex '^tcomms_backend_module$$'
backends_nccl_tcomms_nccl_la_LIBADD = $(NCCL_LIBS) -lpthread
endif
EXTRA_DIST += docs/nccl.md
TESTS += backends/nccl/test_module.sh
EXTRA_DIST += backends/nccl/test_module.sh
