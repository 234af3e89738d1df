# SPDX-License-Identifier: BSD-3-Clause
# Multi-rank suites: every collective on every CPU backend named by TCOMMS_TEST_BACKENDS (test_coll), splits and
# leak cycles (test_split), splits whose ranks disagree (test_split_agree), bad input (test_badinput), a dying peer
# (test_peer_death, with peer_death_prog under $TCOMMS_RUN), a reset store connection at creation
# (test_store_reset), strangers flooding the store's port (test_store_flood), UCX's settings under restricted
# transports (test_ucx_config), ranks disagreeing about a call (test_mismatch), the TCOMMS_CHECK_CALLS check
# (test_call_check), sends that must complete while their receiver is away from tcomms (test_away), released
# handles used again (test_handles), exact integer AVG (test_avg), node-local ranks from the rendezvous
# (test_topo), every UCX algorithm forced by TCOMMS_UCX_<COLL>_ALGO (test_ucx_algo), tcomms_comm_abort and the
# failure state the core keeps for every backend (test_abort), a handle outliving its communicator and a backend's
# failure reported through the core (test_lifetime), timeouts that name the ranks that never posted the operation
# and the TCOMMS_TRACE_DUMP files (test_flight), survivors shrinking a communicator after a rank died
# (test_shrink), in-place collectives whose messages land in the UCX engine's scratch, at every offset of the buffer
# within a cache line (test_ucx_scratch). They share the fork harness and reference in
# tests/libmrank.la, and use only the public API except where noted.
# make check runs test_coll on 1-4 ranks and test_ucx_algo on 2-4; `make check-long` runs test_coll on 1-8 and
# test_ucx_algo on 5-8 (5-8 oversubscribe a small machine).
# Each program's flags are the common sets of tests/local.mk.
if HAVE_CHECK
check_LTLIBRARIES += tests/libmrank.la
tests_libmrank_la_SOURCES = tests/mrank.c tests/mrank.h tests/mrank_world.c tests/mrank_world.h tests/coll_ref.c \
	tests/coll_ref.h tools/run/port.c
tests_libmrank_la_CFLAGS = $(test_cflags)

mrank_tests = tests/test_coll tests/test_split tests/test_badinput tests/test_peer_death tests/test_store_reset \
	tests/test_store_flood tests/test_ucx_config tests/test_mismatch tests/test_call_check tests/test_away \
	tests/test_handles tests/test_avg tests/test_split_agree tests/test_topo tests/test_ucx_algo tests/test_ucx_pair \
	tests/test_abort tests/test_lifetime tests/test_flight tests/test_shrink tests/test_ucx_scratch
check_PROGRAMS += $(mrank_tests) tests/peer_death_prog
TESTS += $(mrank_tests)

tests_test_coll_SOURCES = tests/test_coll.c
tests_test_coll_CFLAGS = $(test_cflags)
tests_test_coll_LDADD = $(mrank_ldadd)

tests_test_split_SOURCES = tests/test_split.c tests/split_verify.c tests/split_verify.h
tests_test_split_CFLAGS = $(test_cflags)
tests_test_split_LDADD = $(mrank_ldadd)

# links the core statically: it counts the store's keys
tests_test_split_agree_SOURCES = tests/test_split_agree.c tests/split_verify.c tests/split_verify.h
tests_test_split_agree_CFLAGS = $(test_cflags)
tests_test_split_agree_LDADD = $(mrank_core_ldadd)

tests_test_topo_SOURCES = tests/test_topo.c
tests_test_topo_CFLAGS = $(test_cflags)
tests_test_topo_LDADD = $(mrank_ldadd)

tests_test_badinput_SOURCES = tests/test_badinput.c
tests_test_badinput_CFLAGS = $(test_cflags)
tests_test_badinput_LDADD = $(mrank_ldadd)

# peer_death_prog is started by tcomms-run from the test; its path is compiled in (TCOMMS_TEST_PEER_DEATH_PROG
# overrides it).
tests_test_peer_death_SOURCES = tests/test_peer_death.c
tests_test_peer_death_CPPFLAGS = $(AM_CPPFLAGS) -DPEER_DEATH_PROG='"$(abs_top_builddir)/tests/peer_death_prog"'
tests_test_peer_death_CFLAGS = $(test_cflags)
tests_test_peer_death_LDADD = $(mrank_ldadd)

tests_test_store_reset_SOURCES = tests/test_store_reset.c
tests_test_store_reset_CFLAGS = $(test_cflags)
tests_test_store_reset_LDADD = $(mrank_ldadd)

tests_test_store_flood_SOURCES = tests/test_store_flood.c
tests_test_store_flood_CFLAGS = $(test_cflags)
tests_test_store_flood_LDADD = $(mrank_ldadd)

tests_test_ucx_config_SOURCES = tests/test_ucx_config.c
tests_test_ucx_config_CFLAGS = $(test_cflags)
tests_test_ucx_config_LDADD = $(mrank_ldadd)

tests_test_ucx_pair_SOURCES = tests/test_ucx_pair.c
tests_test_ucx_pair_CFLAGS = $(test_cflags)
tests_test_ucx_pair_LDADD = $(mrank_ldadd)
tests_test_ucx_algo_SOURCES = tests/test_ucx_algo.c
tests_test_ucx_algo_CFLAGS = $(test_cflags)
tests_test_ucx_algo_LDADD = $(mrank_ldadd)

tests_test_flight_SOURCES = tests/test_flight.c
tests_test_flight_CFLAGS = $(test_cflags)
tests_test_flight_LDADD = $(mrank_ldadd)

tests_test_mismatch_SOURCES = tests/test_mismatch.c
tests_test_mismatch_CFLAGS = $(test_cflags)
tests_test_mismatch_LDADD = $(mrank_ldadd)

tests_test_away_SOURCES = tests/test_away.c
tests_test_away_CFLAGS = $(test_cflags)
tests_test_away_LDADD = $(mrank_ldadd)

# links the core statically: it counts the store's keys
tests_test_call_check_SOURCES = tests/test_call_check.c
tests_test_call_check_CFLAGS = $(test_cflags)
tests_test_call_check_LDADD = $(mrank_core_ldadd)

tests_peer_death_prog_SOURCES = tests/peer_death_prog.c
tests_peer_death_prog_CFLAGS = $(test_cflags)
tests_peer_death_prog_LDADD = lib/libtcomms.la $(CHECK_LIBS)

tests_test_shrink_SOURCES = tests/test_shrink.c
tests_test_shrink_CFLAGS = $(test_cflags)
tests_test_shrink_LDADD = $(mrank_ldadd)

tests_test_abort_SOURCES = tests/test_abort.c
tests_test_abort_CFLAGS = $(test_cflags)
tests_test_abort_LDADD = $(mrank_ldadd)

tests_test_lifetime_SOURCES = tests/test_lifetime.c
tests_test_lifetime_CFLAGS = $(test_cflags)
tests_test_lifetime_LDADD = $(mrank_ldadd)

tests_test_handles_SOURCES = tests/test_handles.c
tests_test_handles_CFLAGS = $(test_cflags)
tests_test_handles_LDADD = $(mrank_ldadd)

# links the core statically: it tests tc_mean_from_words too
tests_test_ucx_scratch_SOURCES = tests/test_ucx_scratch.c
tests_test_ucx_scratch_CFLAGS = $(test_cflags)
tests_test_ucx_scratch_LDADD = $(mrank_ldadd)

tests_test_avg_SOURCES = tests/test_avg.c
tests_test_avg_CFLAGS = $(test_cflags)
tests_test_avg_LDADD = $(mrank_core_ldadd)

# The same table on 1 to 8 ranks, every CPU backend, and the UCX algorithms forced on 5 to 8 ranks; not part of
# make check (minutes on 2 cores).
check-long: all tests/test_coll tests/test_ucx_algo
	@$(AM_TESTS_ENVIRONMENT) TCOMMS_TEST_MAX_RANKS=8 $(abs_top_builddir)/tests/test_coll
	@$(AM_TESTS_ENVIRONMENT) TCOMMS_TEST_RANKS='5 6 7 8' $(abs_top_builddir)/tests/test_ucx_algo
.PHONY: check-long
endif
