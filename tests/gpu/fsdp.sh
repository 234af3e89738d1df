#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The FSDP runtime on GPUs (issue 6): examples/fsdp_mlp/fsdp_mlp_cuda trained sharded over 2 (and 4) GPUs against
# its one-GPU --reference, loss lines compared bit for bit in deterministic float64 mode and to a tolerance in
# float32 and bf16, one PASS/FAIL line per case and a total; then bench/compare-fsdp when present. A markdown table
# and the output of failed cases go to $OUT/fsdp (the benchmark's files to $OUT/compare-fsdp) when OUT is set.
# Exit: 0 all passed, 1 some failed, 77 no GPU or the CUDA example not built (so make check counts it skipped).
#   TCOMMS_GPU_BUILD    build directory holding examples/fsdp_mlp/fsdp_mlp_cuda (default: _gpu/build)
#   TCOMMS_GPU_PREFIX   install prefix with bin/tcomms-run, lib/ and lib/tcomms/ (default: the build tree)
#   FSDP_GPU_BUDGET_S   seconds for the cases (default 220): cases not started by then are counted skipped
#   FSDP_GPU_CASE_S     timeout of one launch (default 90)
#   FSDP_GPU_ONLY       an extended regular expression: only the cases whose name matches run
#   FSDP_GPU_BENCH      0 leaves out bench/compare-fsdp (default 1); FSDP_GPU_BENCH_ARGS (default --quick),
#                       FSDP_GPU_BENCH_S its timeout (default 140)
set -u

. "$(dirname "$0")/env.sh"
unset TCOMMS_BACKEND

prog="$build/examples/fsdp_mlp/fsdp_mlp_cuda"
[ -x "$build/examples/fsdp_mlp/.libs/fsdp_mlp_cuda" ] && prog="$build/examples/fsdp_mlp/.libs/fsdp_mlp_cuda"
gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
fi
if [ "$gpus" -eq 0 ]; then
    echo "SKIP fsdp.sh: nvidia-smi lists no GPU"
    exit 77
fi
if [ ! -x "$prog" ]; then
    echo "SKIP fsdp.sh: $prog not built (configure found no nvcc, cuBLAS or NCCL)"
    exit 77
fi
if [ ! -x "$launcher" ]; then
    echo "FAIL fsdp.sh: no launcher at $launcher"
    exit 1
fi

# Runs write into a scratch folder; what is kept (few files: the device tool brings back 8) is the table and one
# log holding the output of every case that did not pass.
work=$(mktemp -d "${TMPDIR:-/tmp}/tcomms-fsdp-gpu.XXXXXX")
trap 'rm -rf "$work"' EXIT
if [ -n "${OUT:-}" ]; then
    logdir="$OUT/fsdp"
else
    logdir="$work/kept"
fi
mkdir -p "$logdir"
faillog="$logdir/fsdp-failures.log"
: >"$faillog"
case_s=${FSDP_GPU_CASE_S:-90}
budget=${FSDP_GPU_BUDGET_S:-220}
start=$(date +%s)
passed=0 failed=0 skipped=0
table="$logdir/fsdp.md"
{
    echo "# fsdp_mlp_cuda: sharded against the one-GPU reference"
    echo
    echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $gpus GPU(s):" \
        "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
    echo
    echo "| case | ranks | result | seconds |"
    echo "|---|---|---|---|"
} >"$table"
echo "fsdp_mlp_cuda on $gpus GPU(s): $prog, table and failures in $logdir"

# Loss lines of a run's output, without tcomms-run's "[rank] " prefix.
losses() { sed -n 's/^\(\[[0-9]*\] \)\{0,1\}\(step [0-9]* loss .*\)$/\2/p' "$1"; }

# The reference of a mode: trained once per (mode options, ep, microbatches), in its own file.
reference() { # file, then the program's options
    local file=$1
    shift
    [ -s "$file" ] && return 0
    timeout -k 5 "$case_s" "$prog" --reference "$@" >"$file.log" 2>&1 && losses "$file.log" >"$file"
    [ -s "$file" ]
}

# Compare the loss lines of two files: exactly (tol 0) or to a relative tolerance, printing the largest relative
# difference then.
compare() { # tol, got, want
    if [ "$1" = 0 ]; then
        cmp -s "$2" "$3"
        return
    fi
    awk -v tol="$1" 'NR == FNR { want[$2] = $4; n++; next }
        { got++; d = $4 - want[$2]; if (d < 0) d = -d; s = want[$2] < 0 ? -want[$2] : want[$2];
          r = s > 0 ? d / s : d; if (r > worst) worst = r;
          if (!($2 in want) || d > tol * s) bad++ }
        END { printf "max rel diff %.2g", worst; exit (bad > 0 || got != n || n == 0) }' "$3" "$2"
}

# One case: name, ranks, tolerance (0: bit-exact), options of the mode (shared with the reference), then the
# sharding options.
run_case() {
    local name=$1 n=$2 tol=$3 mode=$4 shard=$5 now t0 rc result diffs
    [ -n "${FSDP_GPU_ONLY:-}" ] && ! [[ $name =~ $FSDP_GPU_ONLY ]] && return 0
    now=$(date +%s)
    if [ "$n" -gt "$gpus" ]; then
        result="SKIP (needs $n GPUs)"
        skipped=$((skipped + 1))
    elif [ $((now - start)) -ge "$budget" ]; then
        result="SKIP (time budget of $budget s spent)"
        skipped=$((skipped + 1))
    else
        local log="$work/$name.log" refopts ref
        # the reference depends on the mode, the experts and the data of a step, not on the sharding
        refopts="$mode $(echo "$shard" | grep -oE -- '--(ep|microbatches|steps) [0-9]+' | tr '\n' ' ')"
        ref="$work/ref$(echo "$refopts" | tr -c 'a-z0-9' '_' | tr -s '_').losses"
        t0=$(date +%s)
        # shellcheck disable=SC2086
        timeout -k 10 "$case_s" "$launcher" -n "$n" --timeout "$case_s" -- "$prog" $mode $shard >"$log" 2>&1
        rc=$?
        losses "$log" >"$log.losses"
        # shellcheck disable=SC2086
        if [ "$rc" -ne 0 ]; then
            result="FAIL (exit $rc$([ "$rc" -eq 124 ] && echo ", timed out after $case_s s"))"
        elif ! reference "$ref" $refopts; then
            result="FAIL (the reference failed: $ref.log)"
        elif diffs=$(compare "$tol" "$log.losses" "$ref"); then
            result="PASS${diffs:+ ($diffs)}"
        else
            result="FAIL (losses differ from the reference${diffs:+: $diffs, tolerance $tol})"
        fi
        case $result in PASS*) passed=$((passed + 1)) ;; *) failed=$((failed + 1)) ;; esac
        now=$(date +%s)
        echo "| $name | $n | $result | $((now - t0)) |" >>"$table"
        echo "${result%% *} $name ($n ranks, $((now - t0)) s)${result#"${result%% *}"}"
        if [ "${result#PASS}" = "$result" ]; then
            grep -vE '^(\[[0-9]+\] )?step [0-9]+ loss' "$log" | tail -8 | sed 's/^/    /'
            [ -s "$ref" ] && diff "$ref" "$log.losses" | head -8 | sed 's/^/    /'
            {
                echo "==== $name: $result"
                echo "---- $launcher -n $n -- $prog $mode $shard"
                cat "$log"
                echo "---- reference ($refopts)"
                cat "$ref.log" 2>/dev/null
            } >>"$faillog"
        fi
        return 0
    fi
    echo "| $name | $n | $result | |" >>"$table"
    echo "$result $name"
}

det="--mode deterministic"
# Deterministic float64 on 2 GPUs: every strategy, microbatches 1/3, prefetch 0/1, both schedules; half of the
# product first, the other half last (the first to go when the time budget runs out).
det_cases() { # "microbatches prefetch" pairs
    local s sched mp mb pf
    for s in 0 1 2 3; do
        for sched in standard 1f1b; do
            for mp in "$@"; do
                read -r mb pf <<<"$mp"
                run_case "det-s$s-mb$mb-pf$pf-$sched" 2 0 "$det" \
                    "--strategy $s --microbatches $mb --prefetch $pf --schedule $sched"
            done
        done
    done
}
det_cases "1 0" "3 1"
# Experts over 2 GPUs (the expert layer's all_to_all_v), then float32 and bf16.
run_case "det-s3-ep2-mb3-pf1-1f1b" 2 0 "$det" "--strategy 3 --ep 2 --microbatches 3 --prefetch 1 --schedule 1f1b"
run_case "det-s1-ep2-mb1-pf0" 2 0 "$det" "--strategy 1 --ep 2 --microbatches 1"
for s in 0 1 2 3; do
    run_case "f32-s$s-mb3-pf1" 2 1e-6 "--mode random" "--strategy $s --microbatches 3 --prefetch 1"
done
run_case "bf16-s3-mb3-pf1-1f1b" 2 2e-2 "--mode random --dtype bf16" \
    "--strategy 3 --microbatches 3 --prefetch 1 --schedule 1f1b"
run_case "bf16-s1-mb1" 2 2e-2 "--mode random --dtype bf16" "--strategy 1"
# 4 GPUs: HSDP 2x2, hybrid sharding 2x2, experts with ep 2 and dp 4.
run_case "det-s3-hsdp2x2-mb3-pf1" 4 0 "$det" "--strategy 3 --outer 2 --microbatches 3 --prefetch 1"
run_case "det-s2-hybrid2x2-mb3-1f1b" 4 0 "$det" "--strategy 2 --outer 2 --hybrid --microbatches 3 --schedule 1f1b"
run_case "det-s3-ep2-dp4-mb3-pf1" 4 0 "$det" "--strategy 3 --ep 2 --microbatches 3 --prefetch 1"
run_case "det-s0-dp4-mb1" 4 0 "$det" "--strategy 0"
det_cases "3 0" "1 1"

echo "$passed passed, $failed failed, $skipped skipped ($(($(date +%s) - start)) s)"
echo >>"$table"
echo "$passed passed, $failed failed, $skipped skipped" >>"$table"

# The benchmark against PyTorch FSDP2 (bench/compare-fsdp, the benchmark engineer's), when present.
if [ "${FSDP_GPU_BENCH:-1}" != 0 ] && [ -x bench/compare-fsdp ]; then
    bdir="${OUT:-$work}/compare-fsdp"
    mkdir -p "$bdir"
    echo "bench/compare-fsdp --out $bdir ${FSDP_GPU_BENCH_ARGS:---quick}"
    # shellcheck disable=SC2086
    timeout -k 10 "${FSDP_GPU_BENCH_S:-140}" bench/compare-fsdp --out "$bdir" ${FSDP_GPU_BENCH_ARGS:---quick} \
        >"$bdir/compare-fsdp.log" 2>&1
    echo "  exit $? (log $bdir/compare-fsdp.log)"
    [ -f "$bdir/compare-fsdp.md" ] && cat "$bdir/compare-fsdp.md"
fi

if [ "$failed" -gt 0 ]; then
    exit 1
elif [ "$passed" -eq 0 ]; then
    exit 77
fi
exit 0
