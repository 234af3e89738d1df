# SPDX-License-Identifier: BSD-3-Clause
# sh_lib.sh: sourced by the shell tests (test_compare.sh, test_nccl_report.sh, test_plot.sh): a scratch
# directory $work, removed at exit, and ok/fail, which print a line each and count the failures in $failures.
# shellcheck shell=sh
work=$(mktemp -d "${TMPDIR:-/tmp}/${0##*/}.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }
