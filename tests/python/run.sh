#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# run.sh FILE.py: run one multi-rank Python test (tests/python/harness.py) under tcomms-run, once per backend and
# rank count its header names, and count its cases like a Check program: "N%: Checks: N, Failures: F, Errors: E"
# (.ci/run's count_checks reads that line), N = cases x configurations. A case fails in a configuration when a rank
# printed "RESULT <case> FAIL", and is an error when some rank never reported it (the job died or timed out). A job
# that fails after every case passed (a crash at exit) counts as one error. Exit status 0 when nothing failed.
# Header comments of FILE.py:
#   # ranks: 1 2 3 4        rank counts (default 1 2)
#   # backends: ucx gloo    CPU backends, those built (TCOMMS_TEST_BACKENDS) only (default ucx gloo)
#   # needs: numpy torch    modules $TCOMMS_TEST_PYTHON must import, else exit 77 (skip)
#   # timeout: 120          seconds a job may run (tcomms-run --timeout)
# make check sets TCOMMS_TEST_PYTHON, TCOMMS_TOP_SRCDIR, TCOMMS_TOP_BUILDDIR and TCOMMS_BACKEND_PATH
# (tests/python.mk, tests/local.mk); TCOMMS_TEST_CASES=a,b runs only those cases.
set -u

file=${1:?usage: run.sh FILE.py}
name=${file##*/}
here=$(cd "$(dirname "$0")" && pwd)
src=${TCOMMS_TOP_SRCDIR:-$(cd "$here/../.." && pwd)}
build=${TCOMMS_TOP_BUILDDIR:-$PWD}
py=${TCOMMS_TEST_PYTHON:-}
run=${TCOMMS_RUN:-$build/tools/run/tcomms-run}
case $file in /*) ;; *) file=$PWD/$file ;; esac

header() { sed -n "s/^# *$1: *//p" "$file" | head -n 1; }
ranks=$(header ranks)
want_backends=$(header backends)
needs=$(header needs)
timeout=$(header timeout)

if [ -n "${TCOMMS_TEST_PYTHON_SKIP:-}" ]; then
    echo "SKIP: $name: $TCOMMS_TEST_PYTHON_SKIP"
    exit 77
fi
if [ -z "$py" ]; then
    echo "SKIP: $name: configure found no Python that can import numpy (TCOMMS_TEST_PYTHON)"
    exit 77
fi
for m in $needs; do
    if ! "$py" -c "import $m" >/dev/null 2>&1; then
        echo "SKIP: $name needs the Python module $m, which $py cannot import"
        exit 77
    fi
done
[ -x "$run" ] || { echo "ERROR: $name: tcomms-run not found at $run"; exit 99; }

backends=
for b in ${want_backends:-ucx gloo}; do
    case " ${TCOMMS_TEST_BACKENDS-$b} " in
        *" $b "*) backends="$backends $b" ;;
        *) echo "$name: backend $b is not built: not run" ;;
    esac
done
[ -n "$backends" ] || { echo "SKIP: $name: none of its backends (${want_backends:-ucx gloo}) is built"; exit 77; }

# The cases, in file order: every function decorated with @case (or @harness.case).
cases=$(awk '/^@(harness\.)?case[ \t]*$/ { want = 1; next }
             want && /^def / { sub(/^def[ \t]+/, ""); sub(/[ \t]*\(.*/, ""); print; want = 0 }' "$file")
if [ -n "${TCOMMS_TEST_CASES:-}" ]; then
    only=
    for c in $cases; do
        case ",$TCOMMS_TEST_CASES," in *",$c,"*) only="$only $c" ;; esac
    done
    cases=$only
fi
ncases=$(echo "$cases" | wc -w)
[ "$ncases" -gt 0 ] || { echo "ERROR: $name: no @case functions to run"; exit 99; }

work=$(mktemp -d "${TMPDIR:-/tmp}/tcomms-py.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

PYTHONPATH=$src/python:$src/tests/python
TCOMMS_LIBRARY=$build/lib/.libs/libtcomms.so.0
TCOMMS_BACKEND_PATH=${TCOMMS_BACKEND_PATH:-$build/backends/gloo/.libs:$build/backends/ucx/.libs}
PYTHONDONTWRITEBYTECODE=1 # no __pycache__ in the source tree
export PYTHONPATH TCOMMS_LIBRARY TCOMMS_BACKEND_PATH PYTHONDONTWRITEBYTECODE

checks=0 failures=0 errors=0
for b in $backends; do
    for n in ${ranks:-1 2}; do
        label="$b, $n rank(s)"
        out=$work/out
        t0=$(date +%s)
        "$run" --timeout "${timeout:-120}" -n "$n" --backend "$b" "$py" "$file" >"$out" 2>&1
        rc=$?
        secs=$(($(date +%s) - t0))
        # One line per failing case, then "TOTAL failures errors".
        awk -v n="$n" -v cases="$cases" -v rc="$rc" -v label="$label" '
            BEGIN { nc = split(cases, list, " ") }
            /^\[[0-9]+\] RESULT / {
                r = substr($0, 2, index($0, "]") - 2)
                rest = substr($0, index($0, "] RESULT ") + 9)
                c = rest; sub(/ .*/, "", c)
                v = substr(rest, length(c) + 2)
                seen[c, r] = 1
                if (v == "ok") { if (!((c, r) in okr)) { okr[c, r] = 1; ok[c]++ } }
                else if (!(c in why)) why[c] = "rank " r ": " (v ~ /^FAIL / ? substr(v, 6) : v)
            }
            END {
                f = e = 0
                for (i = 1; i <= nc; i++) {
                    c = list[i]
                    if (ok[c] == n) continue
                    if (c in why) { f++; print "FAIL: " label ": " c ": " why[c]; continue }
                    e++; missing = ""
                    for (r = 0; r < n; r++) if (!((c, r) in seen)) missing = missing " " r
                    print "ERROR: " label ": " c ": rank(s)" missing " did not report (job exit status " rc \
                        (rc == 124 ? ", timed out" : "") ")"
                }
                print "TOTAL " f " " e
            }' "$out" >"$work/verdict"
        sed -n 's/^TOTAL //p' "$work/verdict" >"$work/total"
        read -r nfail nerr <"$work/total"
        grep -v '^TOTAL ' "$work/verdict"
        # Every case passed, yet the job failed (a crash at exit): counted as one error, so that .ci/run sees it.
        if [ $((nfail + nerr)) -eq 0 ] && [ "$rc" -ne 0 ]; then
            echo "ERROR: $label: every case passed, but the job exited with status $rc (counted as 1 error)"
            nerr=1
        fi
        echo "$name: $label: $((ncases - nfail - nerr)) of $ncases cases passed, $nfail failed, $nerr errors" \
            "(exit status $rc, $secs s)"
        if [ $((nfail + nerr)) -gt 0 ] || [ "$rc" -gt 1 ]; then
            echo "--- output of $label (last 100 lines):"
            tail -n 100 "$out" | sed 's/^/  | /'
        fi
        checks=$((checks + ncases)) failures=$((failures + nfail)) errors=$((errors + nerr))
    done
done

echo "$(((checks - failures - errors) * 100 / checks))%: Checks: $checks, Failures: $failures, Errors: $errors"
[ $((failures + errors)) -eq 0 ]
