#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The NCCL module as this machine sees it, run by make check from the build directory: it exports only
# tcomms_backend_module, records libnccl.so.2 and libcudart by soname, and loads; tcomms-info then either lists it
# with its hints (a GPU is present) or shows why it declined (the CUDA runtime's reason). Exit 77 if not built.
set -u
mod=backends/nccl/.libs/tcomms_nccl.so
info=tools/info/tcomms-info
if [ ! -f "$mod" ] || [ ! -x "$info" ]; then
    echo "SKIP: $mod or $info is not built"
    exit 77
fi
fail=0
bad() {
    echo "FAIL: $*"
    fail=1
}

if command -v nm >/dev/null 2>&1; then
    exports=$(nm -D --defined-only "$mod" | awk 'NF == 3 { print $3 }' | sort -u | tr '\n' ' ')
    [ "$exports" = "tcomms_backend_module " ] || bad "the module exports '$exports', not only tcomms_backend_module"
fi
if command -v readelf >/dev/null 2>&1; then
    needed=$(readelf -d "$mod" | grep NEEDED)
    echo "$needed" | grep -q '\[libnccl\.so\.2\]' || bad "libnccl.so.2 is not recorded by soname: $needed"
    echo "$needed" | grep -q '\[libcudart\.so\.[0-9]*\]' || bad "libcudart is not recorded by soname: $needed"
fi

out=$(TCOMMS_BACKEND_PATH="$PWD/backends/nccl/.libs" TCOMMS_LOG_LEVEL=error "$info" 2>/dev/null)
# The nccl entry: from its "  nccl" line to the next entry or the closing line.
entry=$(printf '%s\n' "$out" | awk '/^  nccl / { p = 1; print; next } p && /^  [^ ]/ { p = 0 } /^default/ { p = 0 } p')
printf '%s\n' "$entry"
case "$entry" in
*"nccl     available"*)
    for h in high_priority_stream cga_cluster_size min_ctas max_ctas blocking nccl.net_name; do
        printf '%s\n' "$entry" | grep -q "hints:.* $h" || bad "tcomms-info lists no hint $h for nccl"
    done
    printf '%s\n' "$entry" | grep -q "devices: cuda" || bad "nccl does not say it serves cuda"
    ;;
*"nccl     unavailable"*)
    printf '%s\n' "$entry" | grep -q "reason:  declined: " ||
        bad "the module did not load or gave no reason for declining"
    printf '%s\n' "$entry" | grep -Eq "cudaGetDeviceCount failed: .+ \(cuda[A-Za-z]+\)|sees 0 devices|NCCL library" ||
        bad "the reason does not carry the CUDA runtime's words"
    ;;
*)
    bad "tcomms-info shows no nccl entry: $out"
    ;;
esac
[ "$fail" -eq 0 ] && echo "PASS: the nccl module loads and answers its query"
exit "$fail"
