#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs the GPU tests of issue 5 from the repository root with a carried build: test_coll_cuda (the shared table on
# NCCL, 2 ranks and 4 when 4 GPUs are visible), test_nccl and test_fsdp_cuda (the FSDP runtime on NCCL). Prints each program's result, the SKIP lines inside
# it, and "N passed, N failed, N skipped"; logs go to $OUT/gpu-tests when OUT is set. Also run by make check, where
# without a GPU every program skips (exit 77). Exit: 0 none failed, 1 some failed, 77 all skipped.
#   TCOMMS_GPU_BUILD   build directory holding tests/gpu/test_* (default: _gpu/build)
#   TCOMMS_GPU_PREFIX  install prefix with lib/ and lib/tcomms/ (default: use the build tree's .libs)
#   TCOMMS_TEST_CPU_BACKEND  CPU backend for the mixed tests (default: gloo, else ucx, whichever loads)
#   TCOMMS_GPU_TESTS   which programs, in order (default: test_coll_cuda test_nccl test_fsdp_cuda)
#   TCOMMS_GPU_TEST_TIMEOUT  seconds each program may run (default 420, 900 with 4 GPUs or more)
set -u

. "$(dirname "$0")/env.sh"

passed=0 failed=0 skipped=0
if [ -n "${OUT:-}" ]; then
    logdir="$OUT/gpu-tests"
    mkdir -p "$logdir"
else
    logdir=$(mktemp -d "${TMPDIR:-/tmp}/tcomms-gpu-tests.XXXXXX")
    trap '[ "$failed" -eq 0 ] && rm -rf "$logdir"' EXIT # kept only when something failed
fi

gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
fi
# With 4 GPUs each program runs its cases on 2 and on 4 ranks, so it takes more than twice as long.
limit=${TCOMMS_GPU_TEST_TIMEOUT:-$([ "$gpus" -ge 4 ] && echo 900 || echo 420)}
echo "tcomms GPU tests, $(date -u '+%Y-%m-%d %H:%M UTC'), build $build, modules $moddirs, logs $logdir"
if [ "$gpus" -gt 0 ]; then
    nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader 2>/dev/null |
        sed 's/^/  GPU /'
else
    echo "  nvidia-smi lists no GPU (the test programs ask CUDA themselves)"
fi

# A module "loads" here if its file exists and ldd finds every library it needs.
loads() {
    local f
    for d in ${moddirs//:/ }; do
        f="$d/tcomms_$1.so"
        [ -f "$f" ] && ! ldd "$f" 2>/dev/null | grep -q 'not found' && return 0
    done
    return 1
}
if [ -z "${TCOMMS_TEST_CPU_BACKEND+set}" ]; then
    TCOMMS_TEST_CPU_BACKEND=""
    for b in gloo ucx; do
        if loads "$b"; then TCOMMS_TEST_CPU_BACKEND=$b; break; fi
    done
    [ -z "$TCOMMS_TEST_CPU_BACKEND" ] &&
        echo "  no CPU backend module loads here (gloo, ucx): the mixed cpu+cuda cases will print SKIP"
fi
export TCOMMS_TEST_CPU_BACKEND

run_one() { # name, then environment assignments for it
    local name=$1 bin="$build/tests/gpu/$1" log="$logdir/$1.log" rc t0 t1
    shift
    if [ ! -x "$bin" ]; then
        if [ "$gpus" -gt 0 ]; then
            echo "FAIL $name: $bin not built (make -C BUILD tests/gpu/$name, configure --with-cuda)"
            failed=$((failed + 1))
        else
            echo "SKIP $name: not built in $build (no CUDA/NCCL at configure) and no GPU here"
            skipped=$((skipped + 1))
        fi
        return
    fi
    local missing
    missing=$(ldd "$bin" 2>/dev/null | awk '/not found/ {print $1}' | tr '\n' ' ')
    if [ -n "$missing" ]; then
        echo "FAIL $name: shared libraries not found: $missing(copy them into TCOMMS_GPU_PREFIX/lib)"
        failed=$((failed + 1))
        return
    fi
    t0=$(date +%s)
    echo "$name: started"
    # Each case's line as it comes ("NAME: case ...: started", then "passed in T s"), so that a program killed
    # from outside shows which case it was in; the whole output goes to the log.
    env "$@" timeout -k 10 "$limit" "$bin" 2>&1 | tee "$log" |
        grep --line-buffered -E "^$name: case " | sed -u 's/^/    /'
    rc=${PIPESTATUS[0]}
    t1=$(date +%s)
    case $rc in
        0) echo "PASS $name ($((t1 - t0)) s)"; passed=$((passed + 1)) ;;
        77)
            echo "SKIP $name: $(grep -m1 'SKIP' "$log" | sed "s/^$name: SKIP: //")"
            skipped=$((skipped + 1))
            return 0 ;;
        124|137) echo "FAIL $name: killed after $limit s"; failed=$((failed + 1)) ;;
        *) echo "FAIL $name (exit $rc, $((t1 - t0)) s)"; failed=$((failed + 1)) ;;
    esac
    # What the program said about itself: its summary lines, skips inside it, and failures (first 40).
    grep -E 'test_coll: |test_nccl[: ]|test_coll_cuda: |test_fsdp_cuda|SKIP|[0-9]+%: Checks' "$log" |
        grep -v -E '^[a-z_]+: case ' | sed 's/^/    /'
    [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && grep -E 'FAIL|:[EF]:' "$log" | head -40 | sed 's/^/    /'
    return 0
}

for t in ${TCOMMS_GPU_TESTS:-test_coll_cuda test_nccl test_fsdp_cuda}; do
    case $t in
        test_coll_cuda) run_one test_coll_cuda TCOMMS_TEST_RANKS="${TCOMMS_GPU_RANKS:-2 4}" ;;
        test_nccl | test_fsdp_cuda) run_one "$t" ;;
        *) echo "FAIL $t: not a GPU test program (test_coll_cuda, test_nccl, test_fsdp_cuda)"; failed=$((failed + 1)) ;;
    esac
done

echo "$passed passed, $failed failed, $skipped skipped"
if [ "$failed" -gt 0 ]; then
    exit 1
elif [ "$passed" -eq 0 ]; then
    exit 77
fi
exit 0
