# tcomms-plot: a Python 3 script turning tcomms-perf JSON results into PNG/SVG charts through gnuplot, an optional
# run-time dependency (Debian: gnuplot-nox); installed as is, nothing to build.
dist_bin_SCRIPTS = tools/plot/tcomms-plot
