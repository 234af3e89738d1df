#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Does the NCCL module still build against older NCCL? Run by make check from the build directory where the module
# is built (exit 77 elsewhere). Only one nccl.h is installed, so each older release is stood in for by a header of
# our own that includes the real one, sets NCCL_VERSION_CODE back, and makes every name the module uses from a
# later release unusable (a function or type by renaming it, a macro by removing it, an ncclConfig_t field by
# renaming it), so a use outside its version guard fails to compile. $TCN_CC and $TCN_CFLAGS (from
# backends/nccl/local.mk) are how make compiles the module; the sources are compiled with -fsyntax-only.
set -u
if [ -z "${TCN_CC:-}" ] || [ ! -f backends/nccl/.libs/tcomms_nccl.so ]; then
    echo "SKIP: the NCCL module is not built here"
    exit 77
fi
src=${srcdir:-.}/backends/nccl
real=
for flag in $TCN_CFLAGS; do
    case $flag in -I*) [ -z "$real" ] && [ -f "${flag#-I}/nccl.h" ] && real=${flag#-I}/nccl.h ;; esac
done
[ -n "$real" ] || { echo "FAIL: no nccl.h under the -I directories of '$TCN_CFLAGS'"; exit 1; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/test_old_nccl.XXXXXX")
trap 'rm -rf "$dir"' EXIT INT TERM

# version code:name, for what the module uses of releases after 2.14 (the oldest configure accepts), at the
# version its guards in tcn.h name.
later='21800:ncclCommSplit 21800:NCCL_SPLIT_NOCOLOR 21800:splitShare
21900:ncclMemAlloc 21900:ncclMemFree 21900:ncclCommRegister 21900:ncclCommDeregister
22700:ncclCommWindowRegister 22700:ncclCommWindowDeregister 22700:ncclWindow_t 22700:NCCL_WIN_COLL_SYMMETRIC
22700:trafficClass 22700:commName 22700:collnetEnable 22700:CTAPolicy 22700:shrinkShare 22700:nvlsCTAs
22700:ncclCommShrink 22700:NCCL_SHRINK_DEFAULT
22800:nChannelsPerNetPeer 22800:nvlinkCentricSched 22800:ncclAlltoAll 22800:ncclGather 22800:ncclScatter
22800:NCCL_CTA_POLICY_ZERO'

stand_in() { # DIR CODE MAJOR MINOR PATCH
    mkdir -p "$1"
    {
        echo "/* NCCL $3.$4.$5 as the module sees it (backends/nccl/test_old_nccl.sh) */"
        echo "#include \"$real\""
        echo "#undef NCCL_VERSION_CODE"
        echo "#define NCCL_VERSION_CODE $2"
        for m in "MAJOR $3" "MINOR $4" "PATCH $5"; do
            echo "#undef NCCL_${m% *}"
            echo "#define NCCL_$m"
        done
        for entry in $later; do
            [ "${entry%%:*}" -gt "$2" ] || continue
            name=${entry#*:}
            case $name in
            NCCL_*) echo "#undef $name" ;;
            *) echo "#define $name ${name}_needs_a_newer_nccl" ;;
            esac
        done
    } >"$1/nccl.h"
}

fail=0
for v in 2.14.3 2.18.1 2.19.3 2.27.3; do
    major=${v%%.*} rest=${v#*.}
    minor=${rest%%.*} patch=${rest#*.}
    code=$((major * 10000 + minor * 100 + patch))
    stand_in "$dir/$v" "$code" "$major" "$minor" "$patch"
    bad=
    for f in "$src"/*.c; do
        # shellcheck disable=SC2086 # TCN_CFLAGS is a list of flags
        $TCN_CC -I"$dir/$v" $TCN_CFLAGS -fsyntax-only "$f" >"$dir/$v.log" 2>&1 || {
            bad="$bad $(basename "$f")"
            head -n 5 "$dir/$v.log"
        }
    done
    if [ -n "$bad" ]; then
        echo "FAIL: NCCL $v: does not compile:$bad"
        fail=1
    else
        echo "ok: NCCL $v: every source compiles ($(echo "$later" | tr ' ' '\n' | awk -F: -v c="$code" \
            '$1 > c' | wc -l | tr -d ' ') later names made unusable)"
    fi
done
exit $fail
