#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Test of bench/compare.sh, the half of compare-nccl and compare-openmpi that decides what their figures are: the
# order of sides in each round (every side takes every place), --budget, and the medians and wrong-element flag
# read from the runs' nccl-tests tables. The runs are a stand-in cmp_run writing tables with known times; the
# expected medians are worked out here by sorting, not by compare.sh's awk.
# shellcheck disable=SC2015,SC2034,SC2154,SC1091 # 'test && ok || fail' (ok only echoes); compare.sh's variables
set -u
cmp_prog=test_compare
build='' keep=''
. "${srcdir:-.}/bench/compare.sh"
. "${srcdir:-.}/tests/sh_lib.sh"

# Time of SIDE's run in ROUND: fixed per (side, round), out of sorted order, so a median is not the first or last.
time_of() { # SIDE ROUND
    case $1 in
    a) set -- "$2" "30 10 20 50" ;;
    b) set -- "$2" "7 9 8 6" ;;
    *) set -- "$2" "100 300 200 400" ;;
    esac
    echo "$2" | awk -v k="$1" '{ print $k }'
}

# A run: the side is logged (its count there is the round), and one nccl-tests table row for 1 KiB with the side's
# time for this round (wrong elements on side c in round 2 when $poison is set).
cmp_run() { # SIDE COLL
    echo "$1" >>"$work/order"
    round=$(grep -c "^$1\$" "$work/order")
    [ -n "${slow:-}" ] && sleep "$slow"
    t=$(time_of "$1" "$round")
    w=0
    [ -n "${poison:-}" ] && [ "$1" = c ] && [ "$round" = 2 ] && w=3
    echo "# Collective test starting: ${2}_perf"
    echo "#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong"
    echo "  1024   256 float sum -1 $t.0 0.1 0.1 $w $t.0 0.1 0.1 0"
}

# 1. Rotation: with three sides and three rounds, each side runs once in each place.
sides='a b c' colls=x runs=3 cmp_budget=''
cmp_rounds 2>/dev/null
places=$(awk '{ place[$1] = place[$1] " " ((NR - 1) % 3 + 1) } END { for (s in place) print s ":" place[s] }' \
    "$work/order" | sort | tr '\n' ' ')
[ "$places" = "a: 1 3 2 b: 2 1 3 c: 3 2 1 " ] && ok "rotation: $places" ||
    fail "each side should take each place once in 3 rounds; places by round were $places"

# 2. Medians: of 3 rounds the middle value; of 4 the mean of the middle two.
for n in 3 4; do
    rm -f "$work"/*.txt "$work"/*.err "$work/order"
    runs=$n
    cmp_rounds 2>/dev/null
    cmp_medians
    for s in a b c; do
        want=$(k=1; while [ "$k" -le "$n" ]; do time_of "$s" "$k"; k=$((k + 1)); done | sort -n |
            awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }')
        got=$(awk -v s="$s" '$1 == s && $2 == "x" && $3 == 1024 { print $4 }' "$work/medians")
        awk -v a="$got" -v b="$want" 'BEGIN { exit !(a != "" && a + 0 == b + 0) }' &&
            ok "median of $n rounds, side $s: $got" ||
            fail "median of $n rounds, side $s: compare.sh gives '$got', sorting gives $want"
    done
done
[ "$cmp_wrong" = 0 ] && ok "no wrong elements reported" || fail "cmp_wrong=$cmp_wrong with no wrong elements"

# 3. A run that counted wrong elements sets cmp_wrong.
rm -f "$work"/*.txt "$work"/*.err "$work/order"
runs=3 poison=1
cmp_rounds 2>/dev/null
cmp_medians
[ "$cmp_wrong" = 1 ] && ok "wrong elements reported" || fail "cmp_wrong=$cmp_wrong after a run counted 3 wrong"
poison=''

# 4. --budget: rounds of about 1 s each and a budget of 1 s leave one round.
rm -f "$work"/*.txt "$work"/*.err "$work/order"
runs=3 cmp_budget=1 slow=0.4
cmp_rounds 2>"$work/budget.err"
msg=$(tail -n 1 "$work/budget.err")
[ "$runs" = 1 ] && ok "budget: $msg" || fail "a 1 s budget with 1.2 s rounds ran $runs rounds ($msg)"

[ "$failures" -eq 0 ] || exit 1
