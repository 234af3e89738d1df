# SPDX-License-Identifier: BSD-3-Clause
# tcomms-perf, the nccl-tests compatible benchmark: an ordinary tcomms program using only the public API.
bin_PROGRAMS += tools/perf/tcomms-perf
tools_perf_tcomms_perf_SOURCES = \
	tools/perf/main.c tools/perf/args.c tools/perf/args.h tools/perf/bench.c tools/perf/bench.h \
	tools/perf/colls.c tools/perf/colls.h tools/perf/cuda.c tools/perf/cuda.h tools/perf/mem.c tools/perf/mem.h \
	tools/perf/report.c tools/perf/report.h tools/perf/ncjson.c tools/perf/values.c tools/perf/values.h
# Only the public headers and lib/util's header-only helpers (no -I lib/): the tool must not reach the library's
# internals. The one exception is the CUDA shim (lib/cuda/local.mk), linked in as the tool's own copy (libtcomms
# keeps its copy hidden): cuda.c loads the runtime through it when --device cuda asks, so no CUDA library is linked
# (dlopen's library is in LIBS).
tools_perf_tcomms_perf_CPPFLAGS = -D_GNU_SOURCE -I$(top_srcdir)/include -I$(top_srcdir)/lib/util $(TC_CUDA_SHIM_CPPFLAGS)
tools_perf_tcomms_perf_LDADD = lib/cuda/libtccuda.la lib/libtcomms.la -lm
dist_man1_MANS += tools/perf/tcomms-perf.1
