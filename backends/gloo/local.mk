# SPDX-License-Identifier: BSD-3-Clause
# The Gloo backend: a C++17 module the core dlopens as tcomms_gloo.so. Built only when configure found libgloo;
# everything but the tcomms_backend_module table (table.c, C for its designated initialisers) stays hidden.
if BUILD_GLOO
pkglib_LTLIBRARIES += backends/gloo/tcomms_gloo.la
backends_gloo_tcomms_gloo_la_SOURCES = \
	backends/gloo/gloo.h backends/gloo/entries.h backends/gloo/table.c backends/gloo/module.cc \
	backends/gloo/comm.cc backends/gloo/coll.cc backends/gloo/worker.cc \
	backends/gloo/compat/gloo/common/memory.h
# compat/ fills in headers a packaged Gloo lacks (compat/gloo/common/memory.h says which), after the system's own.
backends_gloo_tcomms_gloo_la_CPPFLAGS = $(AM_CPPFLAGS) $(GLOO_CPPFLAGS) -idirafter $(srcdir)/backends/gloo/compat
backends_gloo_tcomms_gloo_la_CFLAGS = $(MODULE_CFLAGS)
backends_gloo_tcomms_gloo_la_CXXFLAGS = $(MODULE_CXXFLAGS)
backends_gloo_tcomms_gloo_la_LDFLAGS = $(MODULE_LDFLAGS) $(GLOO_LDFLAGS)
backends_gloo_tcomms_gloo_la_LIBADD = -lgloo -lpthread
endif
