# The core: a convenience library holding every lib/ object (unit tests link it to reach internals), wrapped into
# libtcomms.so, which exports only the public API (everything else is hidden).
noinst_LTLIBRARIES = lib/libtccore.la lib/libtcreduce.la
lib_libtccore_la_SOURCES = \
	lib/avg.c lib/avg.h lib/call_check.c lib/call_check.h lib/coll.c lib/comm.c lib/comm.h lib/core.c lib/dtype.c \
	lib/dtype.h lib/env.c lib/env.h lib/error.c lib/error.h lib/group.c lib/group.h lib/handle.c lib/handle.h \
	lib/hints.c lib/hints.h lib/loader.c \
	lib/loader.h lib/log.c lib/log.h lib/mem.c lib/split.c lib/store.c lib/store.h lib/store_client.c \
	lib/store_coll.c lib/store_impl.h lib/store_proto.h lib/store_request.c lib/store_server.c \
	lib/store_server_impl.h lib/store_table.c lib/store_table.h lib/store_user.c lib/work.c lib/work.h
lib_libtccore_la_SOURCES += lib/split_agree.c lib/split_agree.h lib/topo.c lib/topo.h
lib_libtccore_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
lib_libtccore_la_LIBADD = lib/libtcreduce.la

# The reduction kernels, with the vectoriser on: GCC's -O2 cost model leaves loops of unknown length scalar.
lib_libtcreduce_la_SOURCES = lib/reduce.c lib/dtype.h
lib_libtcreduce_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden -ftree-vectorize -fvect-cost-model=cheap

lib_LTLIBRARIES += lib/libtcomms.la
lib_libtcomms_la_SOURCES =
lib_libtcomms_la_LIBADD = lib/libtccore.la
lib_libtcomms_la_LDFLAGS = $(AM_LDFLAGS) -version-info $(TCOMMS_LT_VERSION) -export-symbols-regex '^tcomms_'
