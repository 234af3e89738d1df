#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Test of bench/compare-nccl-report.sh, the summary compare-nccl prints for issue 5's targets: from a medians file
# with known times, the busbw ratio at >= 64 MiB (min, size, mean, verdict), the time difference at 8 B-64 KiB
# (max, size, median, verdict), small all_reduce's largest ratio, sizes outside both ranges ignored, and the note
# that goes with --raw-twice. The expected figures are worked out here from the chosen times, not by the report's
# awk.
# shellcheck disable=SC2015,SC2034,SC2154,SC1091 # 'test && ok || fail' (ok only echoes); the report's variables
set -u
cmp_prog=test_nccl_report
build='' keep=''
. "${srcdir:-.}/bench/compare.sh"
. "${srcdir:-.}/bench/compare-nccl-report.sh"
. "${srcdir:-.}/tests/sh_lib.sh"
label() { echo "L-$1"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }

# Median times (us) of all_reduce per side and size. 128 KiB lies in neither range: its wild figures must not count.
M64=67108864 M128=134217728
cat >"$work/medians" <<TIMES
nccl-raw all_reduce 8 10.0
nccl-raw all_reduce 1024 10.0
nccl-raw all_reduce 65536 12.0
nccl-raw all_reduce 131072 14.0
nccl-raw all_reduce $M64 250
nccl-raw all_reduce $M128 470
nccl-raw-again all_reduce 8 10.2
nccl-raw-again all_reduce 1024 9.9
nccl-raw-again all_reduce 65536 12.1
nccl-raw-again all_reduce 131072 14.0
nccl-raw-again all_reduce $M64 251
nccl-raw-again all_reduce $M128 469
tcomms-nccl all_reduce 8 11.5
tcomms-nccl all_reduce 1024 7.0
tcomms-nccl all_reduce 65536 6.0
tcomms-nccl all_reduce 131072 99.0
tcomms-nccl all_reduce $M64 252.5
tcomms-nccl all_reduce $M128 476
tcomms-nccl-R2 all_reduce 8 6.0
tcomms-nccl-R2 all_reduce 1024 8.5
tcomms-nccl-R2 all_reduce 65536 9.0
tcomms-nccl-R2 all_reduce 131072 50.0
TIMES
sides='nccl-raw nccl-raw-again tcomms-nccl tcomms-nccl-R2' colls=all_reduce nranks=2
nccl_targets >"$work/targets"
row() { awk -F' *[|] *' -v s="L-$1" '$2 == s { print $4 "|" $5 "|" $6 "|" $7 "|" $8 "|" $9 }' "$work/targets"; }

# 1. tcomms: busbw ratio raw / tcomms is 250/252.5 at 64 MiB and 470/476 at 128 MiB (the minimum, a miss); time
#    minus raw is +1.5, -3.0, -6.0 us at 8 B, 1 KiB, 64 KiB (max +1.5 at 8 B, a miss; median -3.0).
want="$(ratio 470 476) (128M)|$(awk 'BEGIN { printf "%.3f", (250 / 252.5 + 470 / 476) / 2 }')|no|+1.50 (8B)|-3.00|no"
got=$(row tcomms-nccl)
[ "$got" = "$want" ] && ok "tcomms row: $got" || fail "tcomms row: got '$got', want '$want'"

# 2. raw NCCL again: 250/251 and 470/469 (min at 64 MiB, met); +0.2, -0.1, +0.1 us (max +0.2 at 8 B, median +0.1).
want="$(ratio 250 251) (64M)|$(awk 'BEGIN { printf "%.3f", (250 / 251 + 470 / 469) / 2 }')|yes|+0.20 (8B)|+0.10|yes"
got=$(row nccl-raw-again)
[ "$got" = "$want" ] && ok "raw again row: $got" || fail "raw again row: got '$got', want '$want'"

# 3. No row for raw NCCL against itself.
[ -z "$(row nccl-raw)" ] && ok "no raw NCCL row" || fail "raw NCCL has a row of its own: $(row nccl-raw)"

# 4. Small all_reduce: -R 2 against raw is 0.6, 0.85, 0.75 at 8 B-64 KiB (largest 0.85, a miss; 128 KiB's 3.6
#    ignored), plain tcomms 1.15, 0.7, 0.5.
nccl_small_allreduce >"$work/small"
got=$(awk -F' *[|] *' '$2 ~ /^largest ratio/ { print $(NF - 2) "|" $(NF - 1) }' "$work/small")
want="$(ratio 11.5 10.0) no|$(ratio 8.5 10.0) no"
[ "$got" = "$want" ] && ok "small all_reduce largest ratios: $got" || fail "small all_reduce: got '$got', want '$want'"
[ "$(grep -c '^| [0-9]' "$work/small")" = 3 ] && ok "small all_reduce: 3 sizes" ||
    fail "small all_reduce should list 8 B, 1 KiB and 64 KiB only: $(grep '^| [0-9]' "$work/small" | cut -c1-20)"

# 5. The report explains raw NCCL again only when that side ran.
gpus=2 gpu=G commit=c ncclver=v modnccl=m torchver='' minb=8 maxb=1G factor=2 dtype=float blocking=0 iters=1
warmup=1 runs=1 graph=0 checked=0 checkmax=0
n=$(nccl_report | grep -c 'raw NCCL again (--raw-twice)')
[ "$n" = 1 ] && ok "--raw-twice note present" || fail "--raw-twice note printed $n times with the side present"
sides='nccl-raw tcomms-nccl'
n=$(nccl_report | grep -c 'raw NCCL again (--raw-twice)')
[ "$n" = 0 ] && ok "--raw-twice note absent" || fail "--raw-twice note printed $n times without the side"

[ "$failures" -eq 0 ] || exit 1
