# Test of tcomms-plot (tests/test_plot.sh, a shell script: it needs no Check); it exits 77 (skip) without gnuplot.
TESTS += tests/test_plot.sh
EXTRA_DIST += tests/test_plot.sh
AM_TESTS_ENVIRONMENT += TCOMMS_PLOT='$(abs_top_srcdir)/tools/plot/tcomms-plot'; export TCOMMS_PLOT;
