#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# tcomms-run and tcomms-info: --version prints "<tool> (tcomms) VERSION", VERSION taken from configure itself (not
# from config.h, which the tools compile in); tcomms-info prints priorities and the default order; and their man
# pages render without a groff warning.
. "${srcdir:-.}/tests/sh_lib.sh"

version=$("$srcdir/configure" --version | sed -n '1s/^tcomms configure //p')
[ -n "$version" ] || { echo "FAIL: no version from $srcdir/configure --version"; exit 1; }
for tool in "$TCOMMS_RUN" "$TCOMMS_INFO"; do
    name=${tool##*/}
    out=$("$tool" --version); rc=$?
    if [ "$rc" -eq 0 ] && [ "$out" = "$name (tcomms) $version" ]; then ok "$name --version: $out"
    else fail "$name --version: exit $rc, printed '$out', expected '$name (tcomms) $version'"; fi
done

# Priorities and the default order they give, over the fake modules (tests/fake_backend.c): foo declares 100, above
# every module of the tree, fakedecline 200 but declines, so foo is the cpu default.
out=$(TCOMMS_BACKEND_PATH="$TCOMMS_TEST_MODULES" "$TCOMMS_INFO" 2>&1)
foo_priority=$(printf '%s\n' "$out" | awk '/^  [a-z]/ { mod = $1 } mod == "foo" && $1 == "priority:" { print $2 }')
if [ "$foo_priority" = 100 ]; then ok "tcomms-info: foo has priority 100"
else fail "tcomms-info: foo's priority is '$foo_priority', expected 100:
$out"; fi
if printf '%s\n' "$out" | grep -q '^default selection (by priority; override with TCOMMS_BACKEND): cpu -> foo, '; then
    ok "tcomms-info: foo is the cpu default"
else fail "tcomms-info: foo is not first for cpu:
$out"; fi

if ! command -v groff >/dev/null 2>&1; then
    echo "SKIP: the man pages: groff is not installed"
else
    for page in "$srcdir/tools/run/tcomms-run.1" "$srcdir/tools/info/tcomms-info.1"; do
        warnings=$(groff -man -Tutf8 -ww -z "$page" 2>&1)
        text=$(groff -man -Tutf8 -P-cbou "$page" 2>/dev/null) # -P-cbou: plain text, no overstrike
        if [ -n "$warnings" ]; then fail "${page##*/}: groff warns: $warnings"
        else
            missing=""
            for section in NAME SYNOPSIS DESCRIPTION OPTIONS ENVIRONMENT "EXIT STATUS" EXAMPLES "SEE ALSO"; do
                printf '%s\n' "$text" | grep -q "^$section\$" || missing="$missing $section"
            done
            if [ -z "$missing" ]; then ok "${page##*/} renders, every section present"
            else fail "${page##*/}: sections missing:$missing"; fi
        fi
    done
fi
[ "$failures" -eq 0 ]
