#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# tcomms-perf as a drop-in for nccl-tests ($TCOMMS_PERF under $TCOMMS_RUN): every nccl-tests flag is accepted
# with its meaning, -g/-t > 1 and types or ops tcomms lacks fail with exit 2 and a reason, -d/-o/-r all iterate,
# nccl-tests' binary names select the collective, the text matches patterns written from nccl-tests' format
# strings (src/util.cu, 2.19.6), and -J writes nccl-tests' JSON keys. Needs python3 for the JSON (77 without).
# shellcheck disable=SC2015,SC1091 # 'test && ok || fail': ok only echoes; sh_lib.sh
set -eu

perf=${TCOMMS_PERF:?TCOMMS_PERF names the built tcomms-perf}
run=${TCOMMS_RUN:?TCOMMS_RUN names the built tcomms-run}
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not found"; exit 77; }
. "${srcdir:-.}/tests/sh_lib.sh"

# expect STATUS TEXT CMD...: CMD exits STATUS and stderr says TEXT.
expect() {
    want=$1 text=$2
    shift 2
    st=0
    "$@" >"$work/out" 2>"$work/err" || st=$?
    [ "$st" = "$want" ] && grep -q -- "$text" "$work/err" && ok "$* -> $st" ||
        fail "$*: exit $st (want $want), stderr: $(cat "$work/err")"
}

# nccl-tests' header lines, printed here from its own format strings (writeResultHeader, no -S).
hdr() { # TIMELABEL
    printf "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n" "size" "count" "type" \
        "redop" "root" "$1" "algbw" "busbw" "#wrong" "$1" "algbw" "busbw" "#wrong" 0 ""
    printf "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n" "(B)" "(elements)" "" "" "" \
        "(us)" "(GB/s)" "(GB/s)" "" "(us)" "(GB/s)" "(GB/s)" "" 0 ""
}
# A result row: "%12li  %12li  %8s  %6s  %6s" then twice "  %7s  %6s  %6s  %6g" (or N/A).
num='[0-9.e+-]'
cell="  [ ]*$num{1,7}  [ ]*$num{1,6}  [ ]*$num{1,6}  [ ]*([0-9.e+]{1,6}|N/A)"
row="^[ ]*[0-9]{1,12}  [ ]*[0-9]{1,12}  [ ]*[a-z0-9]{1,8}  [ ]*[a-z]{1,6}  [ ]*-?[0-9]{1,6}$cell$cell\$"

# check_text FILE: every line of nccl-tests' layout is there and every other line is a row.
check_text() {
    f=$1
    grep -Eq '^# nThread 1 nGpus 1 minBytes [0-9]+ maxBytes [0-9]+ step: [0-9]+\((factor|bytes)\) warmup iters: [0-9]+ iters: [0-9]+ agg iters: [0-9]+ validation: [0-9]+ graph: [0-9]+ unalign: [0-9]+$' "$f" &&
        grep -q '^# Using devices$' "$f" &&
        grep -Eq '^#  Rank [ 0-9]{2} Group [ 0-9]{2} Pid [ 0-9]{6,} on +[^ ]+ device [ 0-9-]{2} \[[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\] .+$' "$f" &&
        grep -Eq '^# Out of bounds values : [0-9]+ (OK|FAILED)$' "$f" &&
        grep -Eq '^# Avg bus bandwidth    : [0-9.e+-]+ $' "$f" &&
        grep -q '^# Collective test concluded: [a-z_]*_perf$' "$f" || return 1
    hdr time >"$work/hdr"
    grep -F -x -f "$work/hdr" "$f" | wc -l | grep -q '^2$' || return 1
    ! grep -v '^#' "$f" | grep -v '^$' | grep -Ev "$row" | grep -q .
}

# 1. Every nccl-tests flag, with a value that means something here, on 2 ranks.
flags="-t 1 -g 1 -b 8 -e 64 -i 8 -f 2 -n 2 -w 1 -m 2 -N 1 -p 0 -c 2 -o sum -d float -r 0 -z 0 -y 0 -T 60 -G 0"
flags="$flags -C 0 -S 0 -a 1 -R 0 -x -1 -D 0 -V 16 -M 0 -u 1 -I 0 -K 0 -J $work/r.json"
"$run" -n 2 --no-tag-output "$perf" all_reduce_perf $flags >"$work/t1" 2>"$work/e1" &&
    check_text "$work/t1" && ok "every nccl-tests flag; text matches nccl-tests' format" ||
    fail "every flag: $(cat "$work/t1" "$work/e1")"
grep -q '^# Writing JSON output to ' "$work/t1" && grep -q 'agg iters: 2 validation: 2 .* unalign: 1$' "$work/t1" &&
    ok "-m, -c and -u in the preamble" || fail "-m/-c/-u not in the preamble: $(cat "$work/t1")"
python3 - "$work/r.json" <<'PY' && ok "-J: nccl-tests' JSON keys" || fail "-J file: $(cat "$work/r.json")"
import json, sys
d = json.load(open(sys.argv[1]))
for k in ["version", "start_time", "args", "env", "nccl_version", "config", "results", "out_of_bounds",
          "average_bus_bandwidth", "errors", "end_time"]:
    assert k in d, k
assert d["version"] == 3
c = d["config"]
for k in ["nthreads", "ngpus", "minimum_bytes", "maximum_bytes", "step_factor", "warmup_iters", "iterations",
          "aggregated_iterations", "validation", "graph", "blocking_collectives", "parallel_init", "devices"]:
    assert k in c, k
assert c["aggregated_iterations"] == 2 and c["validation"] == 2 and len(c["devices"]) == 2
assert [r["size"] for r in d["results"]] == [8, 16, 32, 64]
for r in d["results"]:
    assert r["type"] == "float" and r["redop"] == "sum" and r["root"] == "    -1"
    for form in ("out_of_place", "in_place"):
        assert set(r[form]) == {"time", "alg_bw", "bus_bw", "nwrong"}, r[form]
        assert r[form]["nwrong"] == 0
assert d["out_of_bounds"] == {"count": 0, "okay": "true"}
assert d["average_bus_bandwidth"]["okay"] == "unchecked"
PY

# 2. -S adds a timestamp column; -C renames time to cputime.
"$perf" all_reduce -b 8 -e 8 -n 1 -S 1 -C 1 >"$work/t2" 2>&1 &&
    grep -q '  cputime ' "$work/t2" && grep -Eq '  [0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8}$' "$work/t2" &&
    ok "-S 1 -C 1" || fail "-S/-C: $(cat "$work/t2")"

# 3. `all` iterates: 8 tcomms types of nccl-tests' 10, 5 ops, every root.
"$perf" all_reduce -b 8 -e 8 -n 1 -w 0 -d all -o all >"$work/t3" 2>"$work/e3" &&
    [ "$(grep -v '^#' "$work/t3" | awk 'NF { print $3 }' | sort -u | wc -l)" = 8 ] &&
    [ "$(grep -v '^#' "$work/t3" | awk 'NF { print $4 }' | sort -u | wc -l)" = 5 ] &&
    grep -q 'uint32 and uint64 are left out' "$work/e3" && ok "-d all -o all" || fail "-d/-o all: $(cat "$work/t3")"
"$run" -n 2 --no-tag-output "$perf" broadcast -b 8 -e 8 -n 1 -r all >"$work/t4" 2>&1 &&
    [ "$(grep -v '^#' "$work/t4" | awk 'NF { print $5 }' | sort -u | tr '\n' ' ')" = "0 1 " ] &&
    ok "-r all" || fail "-r all: $(cat "$work/t4")"

# 4. Collective names as nccl-tests spells them.
"$perf" allgather -b 8 -e 8 -n 1 2>&1 | grep -q '^# Collective test starting: all_gather_perf$' &&
    "$perf" alltoallv_perf -b 8 -e 8 -n 1 2>&1 | grep -q '^# Collective test starting: alltoall_v_perf$' &&
    ok "allgather, alltoallv_perf" || fail "nccl-tests' collective names"
bin=$(dirname "$perf")/.libs/tcomms-perf
[ -x "$bin" ] || bin=$perf
ln -s "$bin" "$work/reduce_scatter_perf"
LD_LIBRARY_PATH=$(dirname "$perf")/../../lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
    "$work/reduce_scatter_perf" -b 8 -e 8 -n 1 2>&1 | grep -q '^# Collective test starting: reduce_scatter_perf$' &&
    ok "invoked as reduce_scatter_perf" || fail "argv[0] reduce_scatter_perf"

# 5. What tcomms cannot do fails with exit 2 and a reason; --version.
expect 2 "one GPU per process" "$perf" all_reduce -g 2
expect 2 "one GPU per process" "$perf" all_reduce -t 4
expect 2 "no uint32 type" "$perf" all_reduce -d uint32
expect 2 "pre-multiplied" "$perf" all_reduce -o mulsum
expect 2 "device-API" "$perf" all_reduce -D 1
expect 2 "--device cuda" "$perf" all_reduce -D cuda
expect 2 "no hypercube" "$perf" hypercube_perf
"$perf" --version | grep -Eq '^tcomms-perf \(tcomms\) [0-9]+\.[0-9]+' && ok "--version" || fail "--version"

[ "$failures" = 0 ] || exit 1
