# SPDX-License-Identifier: BSD-3-Clause
# The UCX backend: a C11 module the core dlopens as tcomms_ucx.so, with its own collective algorithms over UCP
# tagged messages. Built only when configure found UCX; everything but the tcomms_backend_module table stays hidden.
if BUILD_UCX
pkglib_LTLIBRARIES += backends/ucx/tcomms_ucx.la
backends_ucx_tcomms_ucx_la_SOURCES = \
	backends/ucx/ucx.h backends/ucx/engine.h backends/ucx/module.c backends/ucx/context.c backends/ucx/comm.c \
	backends/ucx/progress.c backends/ucx/engine.c backends/ucx/message.c backends/ucx/pair.c backends/ucx/shape.c backends/ucx/select.c \
	backends/ucx/basic.c backends/ucx/allreduce.c backends/ucx/allgather.c backends/ucx/reduce_scatter.c \
	backends/ucx/tree.h backends/ucx/bcast.c backends/ucx/bcast_scatter.c backends/ucx/alltoall.c \
	backends/ucx/gather_scatter.c backends/ucx/barrier.c
backends_ucx_tcomms_ucx_la_CFLAGS = $(MODULE_CFLAGS) $(UCX_CFLAGS)
backends_ucx_tcomms_ucx_la_LDFLAGS = $(MODULE_LDFLAGS)
backends_ucx_tcomms_ucx_la_LIBADD = $(UCX_LIBS) -lpthread
endif
