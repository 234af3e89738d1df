# SPDX-License-Identifier: BSD-3-Clause
# Test of tcomms-plot (tests/test_plot.sh, a shell script: it needs no Check); it exits 77 (skip) without gnuplot.
# It runs the build tree's tcomms-plot (made from tools/plot/tcomms-plot.in, with the version put in).
TESTS += tests/test_plot.sh
EXTRA_DIST += tests/test_plot.sh
AM_TESTS_ENVIRONMENT += TCOMMS_PLOT='$(abs_top_builddir)/tools/plot/tcomms-plot'; export TCOMMS_PLOT;
