# SPDX-License-Identifier: BSD-3-Clause
# --version and the man pages of tcomms-run and tcomms-info (tests/test_tools.sh, a shell script).
TESTS += tests/test_tools.sh
EXTRA_DIST += tests/test_tools.sh
AM_TESTS_ENVIRONMENT += TCOMMS_INFO='$(abs_top_builddir)/tools/info/tcomms-info'; export TCOMMS_INFO;
