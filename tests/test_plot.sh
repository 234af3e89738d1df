#!/bin/sh
# Test of tools/plot/tcomms-plot ($TCOMMS_PLOT): renders a PNG and an SVG from two result files written here and
# checks the files themselves (PNG signature and size, SVG parses as XML, both labels present); bad input must fail
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
bad "unknown option" --bogus -o "$work/bad.png" "$work/a.json"
bad "unknown metric" --metric speed -o "$work/bad.png" "$work/a.json"
bad "unknown output type" -o "$work/bad.pdf" "$work/a.json"
bad "no input file" -o "$work/bad.png"

[ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
