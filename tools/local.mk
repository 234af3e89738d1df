# SPDX-License-Identifier: BSD-3-Clause
# Command-line tools. Their man pages (roff, tools/*/NAME.1) are added to dist_man1_MANS by each tool's local.mk.
include tools/run/local.mk

bin_PROGRAMS += tools/info/tcomms-info
tools_info_tcomms_info_SOURCES = tools/info/tcomms-info.c tools/info/trace.c tools/info/trace.h
tools_info_tcomms_info_LDADD = lib/libtccore.la
dist_man1_MANS += tools/info/tcomms-info.1
include tools/perf/local.mk
include tools/plot/local.mk
