# SPDX-License-Identifier: BSD-3-Clause
# tcomms-run, the local launcher: standalone C (it does not link libtcomms), installed with the library.
bin_PROGRAMS += tools/run/tcomms-run
tools_run_tcomms_run_SOURCES = tools/run/tcomms-run.c tools/run/args.c tools/run/run.h tools/run/port.c \
	tools/run/port.h tools/run/bind.c tools/run/rank_env.c tools/run/spawn.c
dist_man1_MANS += tools/run/tcomms-run.1
