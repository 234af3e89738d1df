#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# examples/allreduce ($TCOMMS_EXAMPLE_ALLREDUCE) under `mpirun -np 4 --oversubscribe` on each CPU backend of
# $TCOMMS_TEST_BACKENDS: every rank's sum must be correct, and every rank must learn from the rendezvous that the 4
# ranks share this host (mpirun sets no TCOMMS_LOCAL_*; its OMPI_COMM_WORLD_LOCAL_* are only a cross-check). With
# UCX, the backend must also see the host as oversubscribed when it has fewer than 4 CPUs. Exit 77 (skipped)
# without mpirun. The rendezvous address comes from -x TCOMMS_MASTER_ADDR/PORT: mpirun sets no MASTER_*.
# shellcheck disable=SC2015,SC1091 # 'test && ok || fail': ok only echoes, so it cannot fail; sh_lib.sh
set -eu

example=${TCOMMS_EXAMPLE_ALLREDUCE:-examples/allreduce}
mpirun=${MPIRUN:-mpirun}
command -v "$mpirun" >/dev/null 2>&1 || { echo "SKIP: mpirun not found (Debian: openmpi-bin)"; exit 77; }
[ -x "$example" ] || { echo "FAIL: examples/allreduce not found at $example"; exit 1; }

. "${srcdir:-.}/tests/sh_lib.sh"

root_flag=
[ "$(id -u)" -eq 0 ] && root_flag=--allow-run-as-root # Open MPI refuses root without it
cpus=$(nproc 2>/dev/null || echo 0)
backends=$(echo "${TCOMMS_TEST_BACKENDS:-}" | tr ',' ' ')
[ -n "$backends" ] || { echo "SKIP: TCOMMS_TEST_BACKENDS is empty"; exit 77; }

for be in $backends; do
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' \
        2>/dev/null || echo $(( 20000 + $$ % 20000 )))
    # shellcheck disable=SC2086 # root_flag is empty or one word
    if ! timeout 120 "$mpirun" $root_flag --oversubscribe -np 4 --mca btl self,tcp -x TCOMMS_BACKEND="$be" \
        -x TCOMMS_MASTER_ADDR=127.0.0.1 -x TCOMMS_MASTER_PORT="$port" -x TCOMMS_STORE_BIND_ADDR=127.0.0.1 \
        -x TCOMMS_CORE_LOG_LEVEL=debug -x TCOMMS_UCX_LOG_LEVEL=debug -x TCOMMS_TIMEOUT_MS=60000 \
        "$example" >"$work/out" 2>"$work/err"; then
        fail "$be: mpirun exited with an error"; sed 's/^/  | /' "$work/err" | tail -20
        continue
    fi
    n=$(grep -c "of 4 ($be).*correct" "$work/out" || true)
    [ "$n" -eq 4 ] && ok "$be: 4 ranks report a correct sum" || { fail "$be: $n of 4 correct"; cat "$work/out"; }
    n=$(grep -c "is local rank [0-3] of 4 on host" "$work/err" || true)
    [ "$n" -eq 4 ] && ok "$be: 4 ranks found 4 local ranks" || { fail "$be: $n of 4 found 4 local ranks";
        grep "local rank" "$work/err" || true; }
    ! grep -q "WARN core" "$work/err" && ok "$be: no warning (mpirun's local variables agree)" ||
        { fail "$be: a warning"; grep "WARN core" "$work/err"; }
    if [ "$be" = ucx ] && [ "$cpus" -gt 0 ] && [ "$cpus" -lt 4 ]; then
        n=$(grep -c "4 rank(s) on this host, $cpus CPU(s): oversubscribed" "$work/err" || true)
        [ "$n" -eq 4 ] && ok "ucx: oversubscribed on $cpus CPUs" || fail "ucx: $n of 4 ranks saw the oversubscription"
    fi
done
[ "$failures" -eq 0 ]
