# SPDX-License-Identifier: BSD-3-Clause
# compare.sh: the shared half of bench/compare-openmpi and bench/compare-nccl, sourced by both (POSIX sh + awk):
# finding tools, interleaved rounds, medians of the runs' nccl-tests tables, Markdown tables of ratios against a
# reference side, and a chart of the medians through tcomms-plot. The caller sets the variables named below.
# shellcheck shell=sh disable=SC2154,SC2034 # cmp_prog, runs, sides, colls, build, keep, plot: the caller's

cmp_die() { echo "$cmp_prog: $*" >&2; exit 1; }
cmp_bad() { echo "$cmp_prog: $*" >&2; echo "Try '$cmp_prog --help' for more information." >&2; exit 2; }
cmp_need() { [ $# -ge 2 ] || cmp_bad "option $1 needs a value"; }
cmp_number() { case $2 in '' | *[!0-9]*) cmp_bad "$1 needs a number, not '$2'" ;; esac; }
# A size with an optional K, M or G suffix (powers of 1024, either case) in bytes; nothing when it is not one.
cmp_bytes() {
    echo "$1" | awk '/^[0-9]+[kKmMgG]?$/ { n = $0 + 0; u = tolower(substr($0, length($0)))
        printf "%.0f\n", n * (u == "k" ? 1024 : u == "m" ? 1048576 : u == "g" ? 1073741824 : 1) }'
}

# The tool from its environment variable's value, else the build tree ($build), else PATH, else SOURCEPATH.
cmp_find_tool() { # ENVVALUE BUILDPATH NAME [SOURCEPATH]
    if [ -n "$1" ]; then echo "$1"
    elif [ -n "$build" ] && [ -x "$build/$2" ]; then echo "$build/$2"
    elif command -v "$3" >/dev/null 2>&1; then command -v "$3"
    elif [ -n "${4:-}" ] && [ -f "$4" ]; then echo "$4"
    fi
}

# Backend modules of the build tree ($build) go in front of TCOMMS_BACKEND_PATH.
cmp_backend_path() {
    [ -n "$build" ] || return 0
    for d in "$build"/backends/*/.libs; do
        [ -d "$d" ] && TCOMMS_BACKEND_PATH="$d${TCOMMS_BACKEND_PATH:+:$TCOMMS_BACKEND_PATH}"
    done
    export TCOMMS_BACKEND_PATH
}

# $work: --keep DIR ($keep), else a temporary directory removed at exit. An earlier run's files in DIR are removed
# first: the medians read every SIDE.COLL.ROUND file there, so a second run into one folder mixed in the first's.
cmp_workdir() {
    if [ -n "$keep" ]; then
        mkdir -p "$keep" && work=$(cd "$keep" && pwd)
        rm -rf "$work"/*.*.[0-9]*.txt "$work"/*.*.[0-9]*.err "$work"/median-*.json "$work"/medians
    else
        work=$(mktemp -d "${TMPDIR:-/tmp}/$cmp_prog.XXXXXX")
        trap 'rm -rf "$work"' EXIT
        trap 'exit 130' INT TERM
    fi
}

# $runs rounds; each runs every collective of $colls on every side of $sides, the order rotated by one side a
# round, by calling the caller's `cmp_run SIDE COLL` with stdout and stderr going to $work/SIDE.COLL.ROUND.{txt,err}.
# A caller whose programs take several collectives in one run sets $cmp_batches (e.g. "all_reduce,alltoall"): each
# word is then one run. With $cmp_budget (seconds), no round starts that would likely end past the budget, counted
# from the first round; $runs becomes the number of rounds run.
cmp_rounds() {
    k=1 t0=$(date +%s) last=0
    while [ "$k" -le "$runs" ]; do
        now=$(date +%s)
        if [ -n "${cmp_budget:-}" ] && [ "$k" -gt 1 ] && [ $((now - t0 + last)) -gt "$cmp_budget" ]; then
            echo "$cmp_prog: $((k - 1)) round(s) in $((now - t0)) s: the next would pass --budget $cmp_budget s" >&2
            runs=$((k - 1))
            break
        fi
        # Round k starts at side k (cyclically), so every side takes every place in turn: reversing every other
        # round kept a middle side in the middle, and whatever a place does to a run (the GPUs' clocks after the
        # side before) could not average out.
        order= rest= i=0 first=$(((k - 1) % $(echo $sides | wc -w)))
        for s in $sides; do
            if [ "$i" -lt "$first" ]; then rest="$rest $s"; else order="$order $s"; fi
            i=$((i + 1))
        done
        order="$order$rest"
        for coll in ${cmp_batches:-$colls}; do
            for side in $order; do
                echo "$cmp_prog: round $k/$runs: $coll on $side" >&2
                log="$work/$side.$coll.$k"
                cmp_run "$side" "$coll" >"$log.txt" 2>"$log.err" && continue
                # A run that counted wrong elements exits 1 too: its figures stand, and cmp_medians reports it.
                grep -q '^# Out of bounds values : [1-9]' "$log.txt" && continue
                tail -n 20 "$log.err" "$log.txt" >&2
                cmp_die "the $side run of $coll failed (round $k)"
            done
        done
        last=$(($(date +%s) - now))
        k=$((k + 1))
    done
}

# $work/medians: "side coll size median_time_us" from the runs' table rows (13 fields, not '#'; out of place),
# each row of the collective whose block it is in. cmp_wrong=1 when any run counted a wrong element.
cmp_medians() {
    for f in "$work"/*.txt; do
        base=$(basename "$f" .txt)
        awk -v s="${base%%.*}" '/^# Collective test starting: / { c = $5; sub(/_perf$/, "", c) }
            !/^#/ && NF == 13 && c != "" { print s, c, $1, $6, $9, $13 }' "$f"
    done | sort -k1,1 -k2,2 -k3,3n -k4,4g >"$work/rows"
    [ -s "$work/rows" ] || cmp_die "no result rows in the runs' output (see --keep DIR)"
    cmp_wrong=0
    awk '($5 != "N/A" && $5 != 0) || ($6 != "N/A" && $6 != 0) { bad = 1 } END { exit !bad }' "$work/rows" &&
        cmp_wrong=1
    # Sorted, so the middle line of each group, or the mean of the two middle ones.
    awk '{ key = $1 " " $2 " " $3; if (key != last) { flush(); last = key; n = 0 } t[++n] = $4 }
         function flush() { if (n) print last, (n % 2 ? t[(n + 1) / 2] : (t[n / 2] + t[n / 2 + 1]) / 2) }
         END { flush() }' "$work/rows" >"$work/medians"
}

# Bus-bandwidth factors as tcomms-perf's; busbw comes from the median time, so busbw ratio = 1 / time ratio.
cmp_awk_lib='function factor(c, n) { if (c ~ /^all_reduce/) return 2 * (n - 1) / n
    if (c == "broadcast" || c == "reduce" || c == "sendrecv") return 1; return (n - 1) / n }
    function bw(c, size, t) { return t > 0 ? size / t / 1e3 * factor(c, N) : 0 }
    function num(v) { return sprintf(v >= 100 ? "%.0f" : v >= 0.1 ? "%.2f" : "%.2g", v) }
    function hsize(b) { return b >= 1073741824 ? b / 1073741824 "G" : b >= 1048576 ? b / 1048576 "M" \
        : b >= 1024 ? b / 1024 "K" : b "B" }'

# One Markdown table per collective of SIDE against REF: busbw and time of both, and ratios SIDE / REF.
cmp_table() { # SIDE SIDENAME REF REFNAME NRANKS
    for coll in $colls; do
        echo
        echo "### $coll: $2 vs $4 (out of place; ratio = $2 / $4)"
        echo
        echo "| size | $2 busbw (GB/s) | $4 busbw (GB/s) | busbw ratio | $2 time (us) | $4 time (us) | time ratio |"
        echo "|---:|---:|---:|---:|---:|---:|---:|"
        awk -v a="$1" -v b="$3" -v c="$coll" '$2 != c { next } $1 == a { x[$3] = $4 } $1 == b { y[$3] = $4 }
            END { for (s in x) if (s in y) print s, x[s], y[s] }' "$work/medians" | sort -n |
            awk -v c="$coll" -v N="$5" "$cmp_awk_lib"'{
                printf "| %s | %s | %s | %s | %s | %s | %s |\n", hsize($1), num(bw(c, $1, $2)), num(bw(c, $1, $3)),
                    num($2 > 0 ? $3 / $2 : 0), num($2), num($3), num($3 > 0 ? $2 / $3 : 0) }'
    done
}

# The medians as one tcomms-perf-shaped JSON file per side, $work/median-SIDE.json, which tcomms-plot reads.
# LABELS is "side=label;side=label;..." (labels may hold spaces).
cmp_json() { # NRANKS DTYPE DEVICE LABELS
    for side in $sides; do
        label=$(echo "$4" | tr ';' '\n' | awk -F= -v s="$side" '$1 == s { print $2 }')
        awk -v s="$side" -v label="${label:-$side}" -v N="$1" -v d="$2" -v dev="$3" "$cmp_awk_lib"'
            BEGIN { printf "{\"tool\": \"compare\", \"backend\": \"%s\", \"label\": \"%s\", ", s, label
                    printf "\"nranks\": %d, ", N
                    printf "\"dtype\": \"%s\", \"device\": \"%s\", \"results\": [", d, dev }
            $1 == s { printf "%s\n {\"collective\": \"%s\", \"size\": %s, \"oop\": {\"time_us\": %s, \"busbw\": %.9g}}",
                      sep, $2, $3, $4, bw($2, $3, $4); sep = "," }
            END { print "\n]}" }' "$work/medians" >"$work/median-$side.json"
    done
}

# A chart of the medians (cmp_json's files drawn together by tcomms-plot, $plot). Returns non-zero when no chart
# was written.
cmp_chart() { # CHART TITLE NRANKS DTYPE DEVICE LABELS
    cmp_json "$3" "$4" "$5" "$6"
    if [ -z "$plot" ]; then
        echo "$cmp_prog: tcomms-plot not found (set TCOMMS_PLOT): no chart" >&2
        return 1
    fi
    chart=$1 title=$2
    set --
    for side in $sides; do set -- "$@" "$work/median-$side.json"; done
    python3 "$plot" -o "$chart" --title "$title" "$@" || return 1
    echo "$cmp_prog: chart written to $chart" >&2
}
