#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# examples/fsdp_mlp's default run (--mode learn) must teach: its last step's loss below 10% of its first (a network
# that has not learned the classes predicts 1/5 for each and cannot go below 0.4, about 72% of the first step's
# 0.557), a held-out accuracy of at least 90%, and the run sharded over 2 ranks on each CPU backend prints exactly
# what --reference prints unsharded.
. "${srcdir:-.}/tests/sh_lib.sh"

"$FSDP_MLP" --reference >"$work/ref" 2>"$work/ref.err" || { cat "$work/ref.err"; echo "FAIL: --reference"; exit 1; }
cat "$work/ref"
pct=$(sed -n "s/^last step's loss [0-9.]*: \([0-9.]*\)% of the first step's\$/\1/p" "$work/ref")
acc=$(sed -n 's/^held-out: accuracy \([0-9.]*\)%.*/\1/p' "$work/ref")
if [ -n "$pct" ] && awk "BEGIN { exit !($pct < 10) }"; then ok "the last step's loss is $pct% of the first's"
else fail "the last step's loss is '$pct'% of the first's, not below 10%"; fi
if [ -n "$acc" ] && awk "BEGIN { exit !($acc >= 90) }"; then ok "held-out accuracy $acc%"
else fail "held-out accuracy '$acc'%, not at least 90%"; fi

for backend in $TCOMMS_TEST_BACKENDS; do
    if "$TCOMMS_RUN" -n 2 --backend "$backend" --timeout 300 --no-tag-output "$FSDP_MLP" --strategy 3 \
        >"$work/$backend" 2>"$work/$backend.err" && cmp -s "$work/ref" "$work/$backend"; then
        ok "$backend, 2 ranks, strategy 3: the same lines as --reference"
    else
        fail "$backend, 2 ranks, strategy 3: differs from --reference:"
        diff "$work/ref" "$work/$backend"
        cat "$work/$backend.err"
    fi
done
[ "$failures" -eq 0 ]
