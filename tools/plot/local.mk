# SPDX-License-Identifier: BSD-3-Clause
# tcomms-plot: a Python 3 script turning tcomms-perf and nccl-tests results into PNG/SVG charts through gnuplot, an
# optional run-time dependency (Debian: gnuplot-nox). Made from tcomms-plot.in by putting configure's version in
# (for --version); nothing else to build, and the build tree's copy runs as is.
bin_SCRIPTS = tools/plot/tcomms-plot
CLEANFILES += tools/plot/tcomms-plot
EXTRA_DIST += tools/plot/tcomms-plot.in
dist_man1_MANS += tools/plot/tcomms-plot.1
tools/plot/tcomms-plot: $(srcdir)/tools/plot/tcomms-plot.in Makefile
	$(AM_V_GEN)$(MKDIR_P) tools/plot && \
	sed -e 's|@PACKAGE_VERSION[@]|$(PACKAGE_VERSION)|g' $(srcdir)/tools/plot/tcomms-plot.in >$@.tmp && \
	chmod +x $@.tmp && mv -f $@.tmp $@
