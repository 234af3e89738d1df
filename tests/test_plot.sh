#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Test of tools/plot/tcomms-plot ($TCOMMS_PLOT, the build tree's): renders a PNG and an SVG from two result files
# written here and checks the files themselves (PNG signature and size, SVG parses as XML, both labels present);
# reads nccl-tests' JSON and text (hand-written from nccl-tests' src/util.cu layout, and tcomms-perf -J output when
# $TCOMMS_PERF and $TCOMMS_RUN are set) and checks the figures parsed (--data); --version; bad input must fail
# with a message. Exit 77 (skipped) without gnuplot or python3, which tcomms-plot needs.
# shellcheck disable=SC2015,SC1091 # 'test && ok || fail': ok only echoes, so it cannot fail; sh_lib.sh
set -eu

plot=${TCOMMS_PLOT:-tools/plot/tcomms-plot}
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not found"; exit 77; }
command -v "${GNUPLOT:-gnuplot}" >/dev/null 2>&1 || { echo "SKIP: gnuplot not found (Debian: gnuplot-nox)"; exit 77; }
[ -f "$plot" ] || { echo "FAIL: tcomms-plot not found at $plot"; exit 1; }

. "${srcdir:-.}/tests/sh_lib.sh"

# Two result files in the tcomms-perf -J shape: two collectives, 8 B to 1 MiB, in-place entries null.
fixture() { # LABEL SCALE FILE
    {
        printf '{"tool": "tcomms-perf", "backend": "gloo", "device": "cpu", "nranks": 2, "label": "%s",\n' "$1"
        printf ' "dtype": "float32", "op": "sum", "results": [\n'
        sep=
        for coll in all_reduce all_gather; do
            size=8
            while [ "$size" -le 1048576 ]; do
                t=$((20 + size / (1000 * $2)))
                printf '%s{"collective": "%s", "size": %d, "count": %d, "type": "float", "redop": "sum",\n' \
                    "$sep" "$coll" "$size" $((size / 4))
                printf '  "root": -1,'
                printf '  "oop": {"time_us": %d.5, "algbw": 0.1, "busbw": %d.25, "wrong": 0}, "ip": null}\n' "$t" "$2"
                sep=,
                size=$((size * 4))
            done
        done
        # N/A rows (sendrecv on one rank) are left out of the chart, whichever way they are written.
        printf ',{"collective": "sendrecv", "size": 8, "count": 2, "type": "float", "redop": "none", "root": -1,\n'
        printf '  "oop": {"time_us": null, "algbw": null, "busbw": null, "wrong": null}, "ip": null}\n'
        printf ',{"collective": "sendrecv", "size": 16, "count": 4, "type": "float", "redop": "none", "root": -1,\n'
        printf '  "oop": null, "ip": null}\n'
        printf '], "avg_busbw": 1.0, "wrong": 0}\n'
    } >"$3"
}
fixture label-alpha 1 "$work/a.json"
fixture label-beta 3 "$work/b.json"

# --version: configure's version, put in by make.
v=$("$plot" --version 2>&1) || true
case $v in
"tcomms-plot (tcomms) "[0-9]*) ok "--version: $v" ;;
*) fail "--version printed '$v'" ;;
esac

# data FILE... > $work/data: what tcomms-plot would draw (label, collective, size, busbw, time).
data() {
    "$plot" --data "$@" >"$work/data" 2>"$work/err" || { fail "--data $*: $(cat "$work/err")"; return 1; }
}
expect_data() { # WHAT (expected lines on stdin)
    cat >"$work/want"
    diff "$work/want" "$work/data" >"$work/diff" && ok "$1" || fail "$1: $(cat "$work/diff")"
}
TAB=$(printf '\t')

# nccl-tests' JSON, as nccl-tests 2.19 writes it (src/util.cu, JSON_FILE_VERSION 3), one line: the collective
# from args[0], experiment_name empty, root a padded string, booleans as strings. A 0-byte row, a row with "nan"
# figures and a row whose out-of-place form is null (in-place figures drawn) are there too.
{
    printf '{"version":3,"start_time":"2025-01-01 10:00:00","args":["./build/all_reduce_perf","-b","0","-e","4096",'
    printf '"-f","4","-g","2","-J","nc.json"],"env":["HOME=/root"],"nccl_version":22304,"config":{"nthreads":1,'
    printf '"ngpus":2,"minimum_bytes":0,"maximum_bytes":4096,"step_factor":4,"warmup_iters":1,"iterations":20,'
    printf '"aggregated_iterations":1,"validation":1,"graph":0,"blocking_collectives":"false",'
    printf '"per_iter_timing":"false","per_iter_skip":0,"parallel_init":"false","devices":[{"rank":0,"group":0,'
    printf '"pid":4242,"hostname":"node1","device":0,"device_hex":"0000:18:00","device_info":"NVIDIA H100"}]},'
    printf '"results":['
    row() { # SIZE COUNT OOP IP
        printf '{"size":%s,"count":%s,"type":"float","redop":"sum","root":"    -1","out_of_place":%s,' "$1" "$2" "$3"
        printf '"in_place":%s,"actual_iterations":20,"experiment_name":""}' "$4"
    }
    fig() { printf '{"time":%s,"alg_bw":%s,"bus_bw":%s,"nwrong":0.000000}' "$1" "$2" "$3"; }
    row 0 0 "$(fig 0.120000 0.000000 0.000000)" "$(fig 0.110000 0.000000 0.000000)"
    printf ','
    row 16 4 "$(fig 9.500000 0.001684 0.001684)" "$(fig 9.400000 0.001702 0.001702)"
    printf ','
    row 64 16 '{"time":"nan","alg_bw":"nan","bus_bw":"nan","nwrong":null}' null
    printf ','
    row 256 64 "$(fig 10.250000 0.024976 0.024976)" "$(fig 10.100000 0.025347 0.025347)"
    printf ','
    row 1024 256 null "$(fig 12.000000 0.085333 0.085333)"
    printf ','
    row 4096 1024 "$(fig 14.000000 0.292571 0.292571)" "$(fig 13.900000 0.294676 0.294676)"
    printf '],"out_of_bounds":{"count":0,"okay":"true"},"average_bus_bandwidth":{"bandwidth":0.101,'
    printf '"okay":"unchecked"},"errors":[],"end_time":"2025-01-01 10:00:01"}\n'
} >"$work/nccl-ar.json"
# ... and an MPI build's reduce_scatter (program _perf_mpi) with -d all -C 1: cpu_time, nwrong null, two types,
# so one series per type.
{
    printf '{"version":3,"start_time":"x","args":["/opt/nccl-tests/reduce_scatter_perf_mpi","-d","all"],'
    printf '"env":[],"nccl_version":22304,"config":{},"results":['
    sep=
    for t in float half; do
        for s in 1024 2048; do
            printf '%s{"size":%d,"count":%d,"type":"%s","redop":"sum","root":"    -1",' "$sep" "$s" $((s / 4)) "$t"
            printf '"out_of_place":{"cpu_time":%d.5,"alg_bw":1.0,"bus_bw":%d.75,"nwrong":null},' \
                $((s / 100)) $((s / 1000))
            printf '"in_place":{"cpu_time":1.0,"alg_bw":1.0,"bus_bw":9.0,"nwrong":null},'
            printf '"actual_iterations":20,"experiment_name":""}'
            sep=,
        done
    done
    printf '],"errors":[]}\n'
} >"$work/nccl-rs.json"
if data "$work/nccl-ar.json" "$work/nccl-rs.json"; then
    expect_data "nccl-tests JSON (hand-written): sizes, busbw, time" <<EOF
nccl-ar${TAB}all_reduce${TAB}16${TAB}0.001684${TAB}9.5
nccl-ar${TAB}all_reduce${TAB}256${TAB}0.024976${TAB}10.25
nccl-ar${TAB}all_reduce${TAB}1024${TAB}0.085333${TAB}12.0
nccl-ar${TAB}all_reduce${TAB}4096${TAB}0.292571${TAB}14.0
nccl-rs${TAB}reduce_scatter float sum${TAB}1024${TAB}1.75${TAB}10.5
nccl-rs${TAB}reduce_scatter float sum${TAB}2048${TAB}2.75${TAB}20.5
nccl-rs${TAB}reduce_scatter half sum${TAB}1024${TAB}1.75${TAB}10.5
nccl-rs${TAB}reduce_scatter half sum${TAB}2048${TAB}2.75${TAB}20.5
EOF
fi

# nccl-tests' text output, its table printed from its own format strings (writeResultHeader,
# writeBenchmarkLinePreamble, writeBenchmarkLineBody; a blank out-of-place body as writeBenchMarkLineNullBody).
{
    echo '# nccl-tests version 2.19.6 nccl-headers=22304 nccl-library=22304'
    echo '# Collective test starting: all_gather_perf'
    echo '#'
    printf '# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n' size count type redop root \
        time algbw busbw '#wrong' time algbw busbw '#wrong' 0 ''
    line() { # SIZE COUNT TIME ALGBW BUSBW WRONG
        printf '%12s  %12s  %8s  %6s  %6s' "$1" "$2" float none -1
        if [ "$3" = - ]; then
            printf '                                '
        else
            printf '  %7s  %6s  %6s  %6s' "$3" "$4" "$5" "$6"
        fi
        printf '  %7s  %6s  %6s  %6s\n' 7.00 0.01 0.01 N/A
    }
    line 0 0 5.00 0.00 0.00 N/A
    line 64 16 8.50 0.01 0.00 0
    line 65536 16384 21.34 3.07 1.54 0
    line 1048576 262144 - - - -
    line 268435456 67108864 1234.5 217.5 108.7 0
    echo '# Out of bounds values : 0 OK'
    echo '# Avg bus bandwidth    : 27.56'
} >"$work/nccl-ag.txt"
if data "$work/nccl-ag.txt"; then
    expect_data "nccl-tests text (hand-written): sizes, busbw, time" <<EOF
nccl-ag${TAB}all_gather${TAB}64${TAB}0.0${TAB}8.5
nccl-ag${TAB}all_gather${TAB}65536${TAB}1.54${TAB}21.34
nccl-ag${TAB}all_gather${TAB}1048576${TAB}0.01${TAB}7.0
nccl-ag${TAB}all_gather${TAB}268435456${TAB}108.7${TAB}1234.5
EOF
fi

# tcomms-perf -J (nccl-tests' JSON) and its stdout (nccl-tests' text) from one run on 2 ranks: the same sizes,
# and the same busbw as the table prints it (2 decimals, fewer for large figures).
if [ -n "${TCOMMS_PERF:-}" ] && [ -n "${TCOMMS_RUN:-}" ]; then
    if "$TCOMMS_RUN" -n 2 --no-tag-output "$TCOMMS_PERF" all_reduce -b 8 -e 2K -f 4 -n 2 -w 1 \
        -J "$work/perf.json" >"$work/perf.txt" 2>"$work/err"; then
        data "$work/perf.json" && mv "$work/data" "$work/perf-json.data"
        data "$work/perf.txt" && mv "$work/data" "$work/perf-txt.data"
        sizes=$(cut -f2,3 "$work/perf-json.data" | tr '\t\n' ': ')
        [ "$sizes" = "all_reduce:8 all_reduce:32 all_reduce:128 all_reduce:512 all_reduce:2048 " ] &&
            ok "tcomms-perf -J read: $sizes" || fail "tcomms-perf -J: collectives and sizes '$sizes'"
        paste "$work/perf-json.data" "$work/perf-txt.data" | awk -F '\t' '
            { d = $4 - $9; if (d < 0) d = -d; if ($3 != $8 || d > 0.006 + $4 / 500 || $4 <= 0) bad = bad " " $3 }
            END { if (bad != "" || NR != 5) { print "rows " NR ", differ at" bad; exit 1 } }' >"$work/cmp" &&
            ok "tcomms-perf -J busbw matches its table: $(cut -f4 "$work/perf-json.data" | tr '\n' ' ')" ||
            fail "tcomms-perf -J vs its table: $(cat "$work/cmp")"
    else
        fail "tcomms-perf -J run failed: $(cat "$work/err")"
    fi
else
    echo "SKIP (part): tcomms-perf -J (TCOMMS_PERF and TCOMMS_RUN not set)"
fi

# Every kind at once in one chart.
if "$plot" -o "$work/mixed.svg" "$work/a.json" "$work/nccl-ar.json" "$work/nccl-rs.json" "$work/nccl-ag.txt" \
    2>"$work/err"; then
    grep -q 'reduce_scatter half sum' "$work/mixed.svg" && grep -q 'nccl-ag' "$work/mixed.svg" &&
        ok "SVG of tcomms JSON, nccl-tests JSON and text" || fail "mixed SVG lacks a series or label"
else
    fail "mixed SVG rendering exited $?: $(cat "$work/err")"
fi

# PNG: the 8-byte signature \x89 P N G \r \n \x1a \n, and a size a real chart has.
if "$plot" -o "$work/out.png" --title "test chart" "$work/a.json" "$work/b.json" 2>"$work/err"; then
    sig=$(od -An -tx1 -N8 "$work/out.png" | tr -d ' \n')
    [ "$sig" = 89504e470d0a1a0a ] && ok "PNG signature" || fail "PNG signature is '$sig'"
    bytes=$(wc -c <"$work/out.png")
    [ "$bytes" -gt 2000 ] && [ "$bytes" -lt 20000000 ] && ok "PNG size $bytes" || fail "PNG size $bytes bytes"
else
    fail "PNG rendering exited $?: $(cat "$work/err")"
fi

# SVG: well-formed XML whose root is <svg>, naming both lines.
if "$plot" -o "$work/out.svg" --metric busbw "$work/a.json" "$work/b.json" 2>"$work/err"; then
    root=$(python3 -c 'import sys, xml.etree.ElementTree as E; print(E.parse(sys.argv[1]).getroot().tag)' \
        "$work/out.svg" 2>&1) || true
    case $root in
    *svg) ok "SVG parses, root $root" ;;
    *) fail "SVG does not parse as XML with an <svg> root: $root" ;;
    esac
    for label in label-alpha label-beta; do
        grep -q "$label" "$work/out.svg" && ok "SVG names $label" || fail "SVG lacks $label"
    done
else
    fail "SVG rendering exited $?: $(cat "$work/err")"
fi

# Bad input: each must exit non-zero with a message on stderr and write no chart.
printf '{"results": [ {"collective": "all_reduce", ' >"$work/broken.json"
printf '{"results": [{"collective": "all_reduce", "size": 8}]}\n' >"$work/nofig.json"
printf '# nccl-tests version 2.19.6\n# Collective test starting: all_reduce_perf\n' >"$work/norow.txt"
printf '{"nccl_version": 0, "results": [{"size": 8, "out_of_place": null, "in_place": null}]}\n' >"$work/nofig-nc.json"
bad() { # WHAT ARGS...
    what=$1
    shift
    rm -f "$work/bad.png"
    if "$plot" "$@" 2>"$work/err" >/dev/null; then
        fail "$what: exit status 0"
    elif [ ! -s "$work/err" ]; then
        fail "$what: no message"
    elif [ -e "$work/bad.png" ]; then
        fail "$what: a chart was written"
    else
        ok "$what: $(tail -n 1 "$work/err")"
    fi
}
bad "missing file" -o "$work/bad.png" "$work/missing.json"
bad "malformed JSON" -o "$work/bad.png" "$work/broken.json"
bad "row without figures" -o "$work/bad.png" "$work/nofig.json"
bad "nccl-tests text without a row" -o "$work/bad.png" "$work/norow.txt"
bad "nccl-tests JSON without figures" -o "$work/bad.png" "$work/nofig-nc.json"
bad "unknown option" --bogus -o "$work/bad.png" "$work/a.json"
bad "unknown metric" --metric speed -o "$work/bad.png" "$work/a.json"
bad "unknown output type" -o "$work/bad.pdf" "$work/a.json"
bad "no input file" -o "$work/bad.png"

[ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
